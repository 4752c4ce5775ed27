"""Training helpers: `tf.distribute` strategies (TensorFlow-only module)."""

from keras_attention.training.strategy import get_strategy

__all__ = ["get_strategy"]
