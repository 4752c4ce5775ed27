"""keras_attention: every classic attention mechanism as a Keras 3 layer.

Importing the package registers every layer with `keras.saving`
(`package="keras_attention"`), so `keras.saving.load_model` reads a `.keras`
file holding them without `custom_objects`, in a process that has run
`import keras_attention` first (`import zoo` for the zoo's models, which
imports it).
"""

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
