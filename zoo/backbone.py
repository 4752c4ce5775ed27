"""`Backbone`: the base of the zoo's backbones (functional, `dtype` kept).

As keras-hub's `Backbone`, in small: a backbone is a functional
`keras.Model` whose config is its constructor arguments. A functional
model drops the `dtype` argument, and its config's `dtype` is a dict; both
are handled here once, for the backbones and (through `set_dtype_policy`,
`base_config` and `with_dtype_policy`) for the tasks (`zoo.task.Task`).
"""

import keras

from zoo.backbone_arguments import ArgumentsOf, check_model_arguments


def set_dtype_policy(model, dtype):
    """Gives a functional model the `dtype` it was built with.

    A functional `keras.Model` ignores its `dtype` argument; the policy is
    set afterwards, as layers set theirs. `None` keeps the global policy.

    Example:
    >>> x = keras.Input((2,))
    >>> model = keras.Model(x, x)
    >>> set_dtype_policy(model, "mixed_bfloat16")
    >>> model.dtype_policy.name
    'mixed_bfloat16'
    """
    if dtype is not None:
        model.dtype_policy = dtype


def base_config(model):
    """The config entries every zoo model writes first: name, trainable, dtype.

    Example:
    >>> x = keras.Input((2,))
    >>> sorted(base_config(keras.Model(x, x, name="m")))
    ['dtype', 'name', 'trainable']
    """
    return {
        "name": model.name,
        "trainable": model.trainable,
        "dtype": keras.dtype_policies.serialize(model.dtype_policy),
    }


def with_dtype_policy(config):
    """A copy of `config` whose serialized `dtype` (a dict) is a policy again.

    Example:
    >>> policy = keras.dtype_policies.serialize(keras.DTypePolicy("bfloat16"))
    >>> with_dtype_policy({"dtype": policy, "units": 2})["dtype"].name
    'bfloat16'
    """
    config = dict(config)
    if isinstance(config.get("dtype"), dict):
        config["dtype"] = keras.dtype_policies.deserialize(config["dtype"])
    return config


def positive_int(name, value):
    """`value` if it is a positive int (not a bool), else a `ValueError`.

    Example:
    >>> positive_int("units", 0)
    Traceback (most recent call last):
    ...
    ValueError: `units` must be a positive int. Received: units=0
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"`{name}` must be a positive int. Received: {name}={value!r}")
    return value


class Backbone(keras.Model):
    """Base class of the zoo's backbones: a functional model built from arguments.

    A subclass builds its layers and functional graph in `__init__`, calls
    `super().__init__(inputs=..., outputs=..., dtype=dtype, **kwargs)` and
    stores each argument under its own name; `get_config` then lists them
    (after `name`, `trainable` and `dtype`), read from those attributes, and
    `from_config` rebuilds the model with its `dtype` policy deserialized.
    A subclass overrides `get_config` only for a value it writes otherwise.
    Keyword arguments other than `keras.Model`'s `name` and `trainable`
    raise a `TypeError` (a functional model would drop them silently).

    Args:
        inputs, outputs: the functional graph's inputs and outputs.
        dtype: optional dtype policy (e.g. `"mixed_bfloat16"`). Defaults to
            `None` (the global policy).
        **kwargs: `keras.Model` arguments (`name`, `trainable`).

    Example:
    >>> class Doubler(Backbone):
    ...     def __init__(self, units=2, dtype=None, **kwargs):
    ...         x = keras.Input((units,), name="x")
    ...         super().__init__(x, x * 2, dtype=dtype, **kwargs)
    ...         self.units = units
    >>> model = Doubler(3, dtype="mixed_bfloat16")
    >>> config = model.get_config()
    >>> config["units"], config["dtype"]["config"]["name"]
    (3, 'mixed_bfloat16')
    >>> Doubler.from_config(config).dtype_policy.name
    'mixed_bfloat16'
    >>> Doubler(3, unit=4)
    Traceback (most recent call last):
    ...
    TypeError: Doubler got unexpected keyword arguments: unit. Received: unit=4
    """

    def __init__(self, inputs, outputs, dtype=None, **kwargs):
        check_model_arguments(type(self).__name__, kwargs)
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)
        set_dtype_policy(self, dtype)

    def get_config(self):
        config = base_config(self)
        for name in ArgumentsOf(type(self)).names:
            config[name] = getattr(self, name)
        return config

    @classmethod
    def from_config(cls, config):
        return cls(**with_dtype_policy(config))
