"""keras_attention: every classic attention mechanism as a Keras 3 layer."""

from keras_attention import layers, scores

__version__ = "0.1.0"

__all__ = ["layers", "scores", "__version__"]
