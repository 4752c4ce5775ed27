"""The `seq2seq` family as the registry knows it, without Keras.

Found by `zoo.registry` (it imports every `zoo/<family>/family.py`): the
task class is a `"module:Class"` reference, imported when first used, so
`python -m zoo presets` lists this family without its model code.
"""

from zoo.registry import register
from zoo.seq2seq.presets import PRESETS
from zoo.translation import summary

FAMILY = register(
    __package__,
    "zoo.seq2seq.task:Seq2Seq",
    PRESETS,
    summary="RNN encoder-decoder with attention (Bahdanau, Luong), EN->ES",
    kind="translation",
    metrics_summary=summary.metrics_summary,
)
