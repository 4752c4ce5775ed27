"""The `show_attend_tell` family as the registry knows it, without Keras.

Found by `zoo.registry` (it imports every `zoo/<family>/family.py`): the
task class is a `"module:Class"` reference, imported when first used, so
`python -m zoo presets` lists this family without its model code.
"""

from zoo.captioning import summary
from zoo.registry import register
from zoo.show_attend_tell.presets import PRESETS

FAMILY = register(
    __package__,
    "zoo.show_attend_tell.task:ShowAttendTell",
    PRESETS,
    summary="Show, Attend and Tell captioner, Fashion-MNIST scenes",
    kind="captioning",
    metrics_summary=summary.metrics_summary,
)
