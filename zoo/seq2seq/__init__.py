"""Seq2Seq with attention (Bahdanau 2014, Luong 2015).

- `backbone.py`: `Seq2SeqBackbone` (the network) and its `Maxout` layer.
- `task.py`: `Seq2Seq`, the translation task (`fit`, `translate`).
- `presets.py`: the shipped presets; `README.md`: the model card.

`TranslationPreprocessor` lives in `zoo.translation` (re-exported here).
"""

from zoo.registry import register
from zoo.seq2seq.backbone import Maxout, Seq2SeqBackbone
from zoo.seq2seq.presets import PRESETS
from zoo.seq2seq.task import Seq2Seq
from zoo.translation import TranslationPreprocessor

register(
    __name__,
    Seq2Seq,
    PRESETS,
    summary="RNN encoder-decoder with attention (Bahdanau, Luong), EN->ES",
)

__all__ = ["PRESETS", "Maxout", "Seq2Seq", "Seq2SeqBackbone", "TranslationPreprocessor"]
