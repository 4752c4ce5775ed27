"""`Preprocessor`: the base layer of the zoo's preprocessors, on every backend.

A preprocessor turns raw data (strings, images) into model inputs with
TensorFlow ops (keras-hub tokenizers, `tf.image`), inside `tf.data` or
called directly. Under JAX or PyTorch Keras would convert its raw inputs to
that backend's tensors (strings cannot be) and hand TensorFlow tensors to a
model that takes NumPy; so, as keras-hub's preprocessing layers do, a
`Preprocessor` takes its inputs as they come and, called outside a
TensorFlow graph on another backend, returns NumPy arrays on JAX (PyTorch's
Keras layers hand back torch tensors themselves); inside `tf.data` its
outputs stay TensorFlow tensors, which Keras's data adapter converts.
"""

import keras

from zoo import quiet
from zoo.base import backends

tf = quiet.LazyModule("tensorflow", "A tokenizer or image preprocessor")


def as_numpy(outputs):
    """TensorFlow tensors in `outputs` (a nested structure) as NumPy arrays.

    A ragged tensor becomes a list of rows; anything else is kept.

    Example:
    >>> as_numpy({"ids": tf.constant([1, 2])})["ids"]
    array([1, 2], dtype=int32)
    """

    if not quiet.tensorflow_imported():
        return outputs

    def convert(value):
        if isinstance(value, tf.RaggedTensor):
            return value.to_list()
        if isinstance(value, tf.Tensor):
            return value.numpy()
        return value

    return keras.tree.map_structure(convert, outputs)


@keras.saving.register_keras_serializable(package="zoo")
class Preprocessor(keras.layers.Layer):
    """A layer of TensorFlow preprocessing that serves a model on any backend.

    Subclasses implement `call(x, y=None, sample_weight=None)` with
    TensorFlow ops. The layer takes raw inputs as they are (strings, NumPy
    arrays, lists, TensorFlow tensors: Keras does not convert them to the
    backend's tensors) and, called eagerly on a backend other than
    TensorFlow, returns arrays a model on that backend takes: NumPy
    (`as_numpy`) on JAX, torch tensors on PyTorch.

    Args:
        **kwargs: base layer arguments.

    Example:
    >>> import numpy as np
    >>> class Lengths(Preprocessor):
    ...     def call(self, x):
    ...         return tf.strings.length(x)
    >>> lengths = Lengths()(np.array(["in", "the", "beginning"]))
    >>> np.asarray(lengths).tolist()
    [2, 3, 9]
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        # Raw inputs (strings) have no tensor on JAX or PyTorch.
        self._convert_input_args = False
        self._allow_non_tensor_positional_args = True

    def __call__(self, *args, **kwargs):
        outputs = super().__call__(*args, **kwargs)
        if backends.on_tensorflow() or not tf.executing_eagerly():
            return outputs
        return as_numpy(outputs)
