"""zoo: trained attention models built from `keras_attention` layers.

Each family (`zoo.seq2seq`, `zoo.transformer`, `zoo.ram`,
`zoo.show_attend_tell`, `zoo.transformer_captioner`) has a backbone (the functional network), a
preprocessor (raw data <-> tensors) and a task (`fit`, `evaluate`,
`predict` and its own verbs):

- `zoo.Seq2Seq`: RNN encoder-decoder with Bahdanau/Luong attention.
- `zoo.Transformer`: encoder-decoder Transformer (Vaswani et al. 2017).
- `zoo.RecurrentAttentionModel`: the glimpse agent of Mnih et al. 2014.
- `zoo.ShowAttendTell`: image captioner with soft/hard attention (Xu et al.
  2015).
- `zoo.TransformerCaptioner`: image captioner, self-attention over CNN
  features and a Transformer decoder.

The folders say each module's role, and imports run one way, families ->
kinds -> base (`tests/zoo/test_layout.py`):

- `zoo.base`: `Task`, the pipeline of raw inputs, the backbone,
  `GenerativeTask` (the generation front end of the generative tasks).
- `zoo.training`: the shared training harness; `zoo.serving`: export
  formats and the server (`python -m zoo serve`).
- the kinds a family's task subclasses: `zoo.TranslationTask`
  (`zoo.translation`), `zoo.CaptioningTask` (`zoo.captioning`),
  `zoo.ClassificationTask` (`zoo.classification`); each names its `kind`,
  its CLI verbs, its export and its metrics.
- `zoo.registry`: the families, each registered by its `family.py`.
- `zoo.data`: the real-data loaders.

`zoo.from_preset(name_or_dir)` loads any zoo preset, picking the class from
its config; `zoo.list_presets()` lists the shipped ones.
"""

from zoo import quiet

quiet.hold_tensorflow_logs()  # whatever imports TensorFlow first: its start-up logs held back

from zoo import lazy

# The public names load on first use: `import zoo` imports no model code
# (and no Keras), so `python -m zoo presets` answers at once.
__getattr__, __dir__ = lazy.exports(
    __name__,
    {
        "data": "zoo.data",
        "registry": "zoo.registry",
        "GenerativeTask": "zoo.base.generation",
        "Task": "zoo.base.task",
        "list_presets": "zoo.registry",
        "CaptioningTask": "zoo.captioning.task",
        "ClassificationTask": "zoo.classification",
        "ImagePreprocessor": "zoo.ram",
        "RecurrentAttentionBackbone": "zoo.ram",
        "RecurrentAttentionModel": "zoo.ram",
        "Seq2Seq": "zoo.seq2seq",
        "Seq2SeqBackbone": "zoo.seq2seq",
        "CaptionPreprocessor": "zoo.show_attend_tell",
        "ShowAttendTell": "zoo.show_attend_tell",
        "ShowAttendTellBackbone": "zoo.show_attend_tell",
        "Transformer": "zoo.transformer",
        "TransformerBackbone": "zoo.transformer",
        "TransformerCaptioner": "zoo.transformer_captioner",
        "TransformerCaptionerBackbone": "zoo.transformer_captioner",
        "TranslationPreprocessor": "zoo.translation",
        "TranslationTask": "zoo.translation",
        "__version__": "zoo.version",
    },
)


def from_preset(preset, load_weights=True, **overrides):
    """Loads a zoo preset (name or directory) whatever its model class.

    Example:
    >>> import zoo
    >>> "seq2seq_bahdanau_bible_en_es" in zoo.list_presets()
    True
    """
    from zoo.base.task import Task

    return Task.from_preset(preset, load_weights=load_weights, **overrides)


__all__ = [
    "CaptionPreprocessor",
    "CaptioningTask",
    "ClassificationTask",
    "GenerativeTask",
    "ImagePreprocessor",
    "RecurrentAttentionBackbone",
    "RecurrentAttentionModel",
    "Seq2Seq",
    "Seq2SeqBackbone",
    "ShowAttendTell",
    "ShowAttendTellBackbone",
    "Task",
    "Transformer",
    "TransformerBackbone",
    "TransformerCaptioner",
    "TransformerCaptionerBackbone",
    "TranslationPreprocessor",
    "TranslationTask",
    "data",
    "registry",
    "from_preset",
    "list_presets",
    "__version__",
]
