"""The `transformer_captioner` family as the registry knows it, without Keras.

Found by `zoo.registry` (it imports every `zoo/<family>/family.py`): the
task class is a `"module:Class"` reference, imported when first used, so
`python -m zoo presets` lists this family without its model code.
"""

from zoo.captioning import summary
from zoo.registry import register
from zoo.transformer_captioner.presets import PRESETS

FAMILY = register(
    __package__,
    "zoo.transformer_captioner.task:TransformerCaptioner",
    PRESETS,
    summary="Transformer captioner: self-attention over CNN features, Fashion-MNIST scenes",
    kind="captioning",
    metrics_summary=summary.metrics_summary,
)
