"""The captioning kind: what every image captioner of the zoo shares.

- `zoo.captioning.task`: `CaptioningTask`, the kind a captioner's task
  subclasses (`caption`, `attention_maps`, its export, evaluation and
  metrics; its docstring says what a subclass supplies).
- `zoo.captioning.preprocessor`: `CaptionPreprocessor` (images and
  captions <-> tensors).
- `zoo.captioning.export`: the SavedModel of a captioner.
- `zoo.captioning.evaluation`: BLEU-1..4 and the attention peak in the
  named item's box, on the scenes.
- `zoo.captioning.plotting`: per-word attention overlays.
"""

from zoo import lazy

__getattr__, __dir__ = lazy.exports(
    __name__,
    {
        "CaptionPreprocessor": "zoo.captioning.preprocessor",
        "CaptioningTask": "zoo.captioning.task",
    },
)

__all__ = ["CaptionPreprocessor", "CaptioningTask"]
