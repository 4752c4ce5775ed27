"""Training helpers: `tf.distribute` strategies and learning-rate schedules.

`get_strategy` needs TensorFlow (imported inside it); `InverseSqrtSchedule`
is backend-agnostic.
"""

from keras_attention.training.schedules import InverseSqrtSchedule
from keras_attention.training.strategy import get_strategy

__all__ = ["InverseSqrtSchedule", "get_strategy"]
