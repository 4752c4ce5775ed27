"""Which Keras backend runs, and what needs TensorFlow's.

The zoo's models run on every Keras backend (TensorFlow, JAX, PyTorch): their
math is `keras.ops`, and their preprocessing runs in TensorFlow (`tf.data`,
keras-hub tokenizers; TensorFlow installed for data only) and hands NumPy
arrays to a model on another backend (`zoo.base.preprocessor`), as keras-hub's
preprocessing layers do. A few features are TensorFlow objects and stay
TensorFlow-only: the serving SavedModel export and `tf.distribute` strategies.
They ask `require_tensorflow` first, so another backend gets one clear error
instead of a traceback from inside TensorFlow.
"""

import keras


class BackendError(RuntimeError):
    """A TensorFlow-only feature asked for on another Keras backend.

    Example:
    >>> error = BackendError("`export` needs the TensorFlow backend")
    >>> isinstance(error, RuntimeError), str(error)
    (True, '`export` needs the TensorFlow backend')
    """


def on_tensorflow():
    """Whether Keras runs on the TensorFlow backend.

    Example:
    >>> on_tensorflow() == (keras.backend.backend() == "tensorflow")
    True
    """
    return keras.backend.backend() == "tensorflow"


def require_tensorflow(feature):
    """Refuses `feature` unless Keras runs on the TensorFlow backend.

    Args:
        feature: str. What needs TensorFlow, as the user names it (e.g.
            ``"`export`"``).

    Raises:
        BackendError: (a `RuntimeError`) on another backend, naming the feature and the backend.

    Example:
    >>> require_tensorflow("`export`") if on_tensorflow() else None
    """
    if not on_tensorflow():
        raise BackendError(
            f"{feature} needs the TensorFlow backend (KERAS_BACKEND=tensorflow); "
            f"this process runs {keras.backend.backend()!r}."
        )


def set_before_init(model, name, value):
    """Sets `model.name = value` untracked where the backend cannot track it yet.

    A zoo backbone or task (a functional `keras.Model`) names its layers as
    attributes before `keras.Model.__init__` builds the graph, which tracks
    them. On PyTorch a layer is a `torch.nn.Module`, which refuses a
    submodule before `Module.__init__`; there (and for properties) the value
    is set as a plain attribute, as keras-hub's backbones do: the functional
    graph holds the layers and their weights either way.

    Args:
        model: the model being built.
        name: str. The attribute.
        value: its value.

    Returns:
        True when the value was set here; False when the caller should set
        it through `keras.Model.__setattr__`.
    """
    if keras.backend.backend() != "torch":
        return False
    is_property = isinstance(getattr(type(model), name, None), property)
    if not is_property and "_modules" in model.__dict__:
        return False
    object.__setattr__(model, name, value)
    return True
