"""The `ram` family as the registry knows it, without Keras.

Found by `zoo.registry` (it imports every `zoo/<family>/family.py`): the
task class is a `"module:Class"` reference, imported when first used, so
`python -m zoo presets` lists this family without its model code.
"""

from zoo.classification import summary
from zoo.ram import canvas
from zoo.ram.presets import PRESETS
from zoo.registry import register

FAMILY = register(
    __package__,
    "zoo.ram.task:RecurrentAttentionModel",
    PRESETS,
    summary="Recurrent Attention Model glimpse classifier, Fashion-MNIST",
    kind="classification",
    metrics_summary=summary.metrics_summary,
    preset_note=canvas.preset_note,
)
