"""Seq2Seq with attention (Bahdanau 2014, Luong 2015).

- `backbone.py`: `Seq2SeqBackbone` (the network) and its `Maxout` layer.
- `task.py`: `Seq2Seq`, the translation task (`fit`, `translate`).
- `presets.py`: the shipped presets; `README.md`: the model card.

`TranslationPreprocessor` lives in `zoo.translation` (re-exported here).
"""

from zoo import lazy

__getattr__, __dir__ = lazy.exports(
    __name__,
    {
        "Maxout": "zoo.seq2seq.backbone",
        "Seq2SeqBackbone": "zoo.seq2seq.backbone",
        "PRESETS": "zoo.seq2seq.presets",
        "Seq2Seq": "zoo.seq2seq.task",
        "TranslationPreprocessor": "zoo.translation",
    },
)

__all__ = ["PRESETS", "Maxout", "Seq2Seq", "Seq2SeqBackbone", "TranslationPreprocessor"]
