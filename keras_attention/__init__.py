"""keras_attention: every classic attention mechanism as a Keras 3 layer."""

from keras_attention import decoding, layers, plotting, presets, scores, training

__version__ = "0.1.0"

__all__ = [
    "decoding",
    "layers",
    "plotting",
    "presets",
    "scores",
    "training",
    "__version__",
]
