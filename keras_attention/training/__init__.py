"""Training helpers: `tf.distribute` strategies and learning-rate schedules.

`get_strategy` and `needs_static_shapes` need TensorFlow (imported inside it); `InverseSqrtSchedule`
is backend-agnostic.
"""

from keras_attention.training.schedules import InverseSqrtSchedule
from keras_attention.training.strategy import get_strategy, needs_static_shapes

__all__ = ["InverseSqrtSchedule", "get_strategy", "needs_static_shapes"]
