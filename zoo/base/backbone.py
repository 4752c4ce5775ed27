"""`Backbone`: the base of the zoo's backbones (functional, `dtype` kept).

As keras-hub's `Backbone`, in small: a backbone is a functional
`keras.Model` whose config is its constructor arguments. A functional
model drops the `dtype` argument, and its config's `dtype` is a dict; both
are handled here once, for the backbones and (through `set_dtype_policy`,
`base_config` and `with_dtype_policy`) for the tasks (`zoo.base.task.Task`).
"""

import keras

from keras_attention.arguments import int_argument
from zoo.base import backends, lora
from zoo.base.constructor_arguments import ArgumentsOf, check_model_arguments


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


#: The largest value each size argument of a zoo model may take. A preset is
#: untrusted input: an edited `units=12000` asked for GiBs of weights and
#: `num_glimpses=10**9` for a `classify` that never returns. The limits are
#: generous for real models (the shipped presets use at most 10,824 words,
#: 1,024 intermediate units, 256 everywhere else, 6 glimpses); a larger
#: model can still be built in code by changing this dict.
MAX_SIZES = {
    # Vocabularies: mBART's and Gemma's are about 250,000 tokens.
    "vocabulary_size": 262_144,
    "source_vocabulary_size": 262_144,
    "target_vocabulary_size": 262_144,
    # Widths: 8,192 is Llama 2 70B's hidden size.
    "embedding_dim": 8192,
    "units": 8192,
    "hidden_dim": 8192,
    "annotation_dim": 8192,
    "glimpse_units": 8192,
    "location_units": 8192,
    "glimpse_output_units": 8192,
    "intermediate_dim": 65_536,
    "num_heads": 256,
    # Depths and counts.
    "num_layers": 256,
    "encoder_layers": 64,
    "num_classes": 100_000,
    "num_glimpses": 1000,
    "test_samples": 1000,
    # The RAM retina: its largest patch side is patch_size * scale_factor **
    # (num_scales - 1), limited by `MAX_PATCH_SIDE`.
    "patch_size": 1024,
    "num_scales": 16,
    "scale_factor": 16,
}
#: The largest side of a glimpse patch (the coarsest scale).
MAX_PATCH_SIDE = 8192
#: The largest `image_shape` (height, width, channels) of a captioner.
MAX_IMAGE_SHAPE = (8192, 8192, 4)


def positive_int(name, value, maximum=None):
    """`value` as an int >= 1 within its limit (`MAX_SIZES`), else an error.

    The check is `keras_attention.arguments.int_argument`'s; this adds
    the limit of an architecture size.

    Args:
        name: str. The argument, named in the error.
        value: the value to check.
        maximum: optional int. The largest value allowed; defaults to
            `MAX_SIZES[name]`, or no limit for a name not there.

    Raises:
        TypeError: `value` is not an int.
        ValueError: `value` is below 1 or over its limit.

    Example:
    >>> positive_int("units", 0)
    Traceback (most recent call last):
    ...
    ValueError: `units` must be an int >= 1. Received: units=0
    >>> positive_int("units", 12000)
    Traceback (most recent call last):
    ...
    ValueError: `units` must be at most 8192. Received: units=12000
    """
    if maximum is None:
        maximum = MAX_SIZES.get(name)
    return int_argument(name, value, maximum=maximum)


def dropout_rate(name, value):
    """`value` if it is a rate in `[0, 1)`: an int or float, not a bool.

    Args:
        name: str. The argument, named in the error.
        value: the value to check.

    Raises:
        ValueError: naming the argument and the value.

    Example:
    >>> dropout_rate("dropout", 0.1)
    0.1
    >>> dropout_rate("dropout", 1.0)
    Traceback (most recent call last):
    ...
    ValueError: `dropout` must be a float in [0, 1). Received: dropout=1.0
    """
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not 0 <= value < 1
    ):
        raise ValueError(
            f"`{name}` must be a float in [0, 1). Received: {name}={value!r}"
        )
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

    def __setattr__(self, name, value):
        # Layers named before the graph is built (PyTorch).
        if not backends.set_before_init(self, name, value):
            super().__setattr__(name, value)

    def __init__(self, inputs, outputs, dtype=None, **kwargs):
        check_model_arguments(type(self).__name__, kwargs)
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)
        set_dtype_policy(self, dtype)

    @classmethod
    def parameter_count(cls, **arguments):
        """The parameters `cls(**arguments)` would create, counted unbuilt.

        Every constructor argument is given (defaults filled in, as
        `ArgumentsOf.values` does); each size is checked as the constructor
        checks it before it is multiplied. A subclass counts its own layers
        (see `zoo.base.parameter_budget`); the loader refuses a config above
        `zoo.base.parameter_budget.MAX_PARAMETERS` before building it.

        Raises:
            ValueError: a size the constructor would refuse.

        Example:
        >>> from zoo.ram import RecurrentAttentionBackbone
        >>> sizes = dict(num_classes=3, patch_size=2, num_scales=1, glimpse_units=2,
        ...              location_units=2, glimpse_output_units=2, units=2)
        >>> RecurrentAttentionBackbone.parameter_count(
        ...     **sizes, cell="rnn", glimpse_filters=None, channels=1)
        54
        >>> RecurrentAttentionBackbone(**sizes).count_params()
        54
        >>> RecurrentAttentionBackbone.parameter_count(
        ...     **dict(sizes, units=0), cell="rnn", glimpse_filters=None, channels=1)
        Traceback (most recent call last):
        ...
        ValueError: `units` must be an int >= 1. Received: units=0
        """
        raise NotImplementedError(
            f"{cls.__name__} does not count its parameters: a backbone "
            "implements `parameter_count` (see zoo.base.parameter_budget), which "
            "`Task.from_config` asks before building, so that its presets load."
        )

    def default_lora_layer_names(self):
        """The names of the layers `enable_lora` adapts by default.

        Each family names its own (its backbone overrides this), as
        keras-hub's backbones do; see `docs/fine_tuning.md`.

        Example:
        >>> x = keras.Input((2,))
        >>> Backbone(x, x).default_lora_layer_names()
        Traceback (most recent call last):
        ...
        NotImplementedError: Backbone names no default LoRA targets: pass ...
        """
        raise NotImplementedError(
            f"{type(self).__name__} names no default LoRA targets: pass "
            "`target_layer_names` to `enable_lora`."
        )

    def enable_lora(self, rank, target_layer_names=None):
        """Freezes the backbone and adds LoRA adapters to the named layers.

        keras-hub's `Backbone.enable_lora`: Keras's `enable_lora(rank)` on
        every layer named in `target_layer_names`; only the adapters
        (`lora_kernel_a`, `lora_kernel_b`) train. Call it before `compile`
        and `fit`. See `zoo.base.lora`.

        Args:
            rank: int >= 1. The adapters' rank.
            target_layer_names: optional list of layer names. Defaults to
                `default_lora_layer_names()`.

        Raises:
            ValueError: a name matching no layer, or a layer Keras's LoRA
                does not reach (a recurrent cell, a score layer).

        Example:
        >>> x = keras.Input((4,))
        >>> backbone = Backbone(x, keras.layers.Dense(2, name="out")(x))
        >>> backbone.enable_lora(2, ["out"])
        >>> [v.path for v in backbone.trainable_weights]
        ['out/lora_kernel_a', 'out/lora_kernel_b']
        >>> backbone.enable_lora(2, ["outs"])
        Traceback (most recent call last):
        ...
        ValueError: No layer of backbone owning weights is named ['outs']. ...
        """
        if target_layer_names is None:
            target_layer_names = self.default_lora_layer_names()
        lora.enable_lora(self, rank, target_layer_names)

    def merge_lora(self):
        """Adds the adapters to their kernels and removes them (for export).

        Returns:
            The number of layers merged.

        Example:
        >>> x = keras.Input((4,))
        >>> backbone = Backbone(x, keras.layers.Dense(2, name="out")(x))
        >>> backbone.enable_lora(2, ["out"])
        >>> backbone.merge_lora(), [v.path for v in backbone.trainable_weights]
        (1, ['out/kernel', 'out/bias'])
        """
        return lora.merge_lora(self)

    def save_lora_weights(self, filepath):
        """Writes the adapters alone to `filepath` (ending in `.lora.h5`).

        Example:
        >>> import os, tempfile, h5py
        >>> x = keras.Input((4,))
        >>> backbone = Backbone(x, keras.layers.Dense(2, name="out")(x))
        >>> backbone.enable_lora(2, ["out"])
        >>> path = os.path.join(tempfile.mkdtemp(), "out.lora.h5")
        >>> backbone.save_lora_weights(path)
        >>> with h5py.File(path) as store:
        ...     sorted(store["lora"]), sorted(store["lora/0"])
        (['0', 'rank'], ['lora_kernel_a', 'lora_kernel_b'])
        """
        lora.save_lora_weights(self, filepath)

    def load_lora_weights(self, filepath):
        """Reads adapters from `save_lora_weights`, enabling LoRA if needed.

        A backbone without adapters gets them on its
        `default_lora_layer_names()`, with the file's rank.

        Example:
        >>> import os, tempfile
        >>> from zoo.transformer import TransformerBackbone
        >>> sizes = dict(num_layers=1, hidden_dim=8, intermediate_dim=16, num_heads=2)
        >>> tuned = TransformerBackbone(20, **sizes)
        >>> tuned.enable_lora(2)
        >>> adapter = tuned.trainable_weights[1]  # the first `lora_kernel_b`
        >>> _ = adapter.assign(keras.ops.ones(adapter.shape))
        >>> path = os.path.join(tempfile.mkdtemp(), "tuned.lora.h5")
        >>> tuned.save_lora_weights(path)
        >>> backbone = TransformerBackbone(20, **sizes)
        >>> backbone.load_lora_weights(path)
        >>> loaded = backbone.trainable_weights[1]
        >>> len(backbone.trainable_weights), bool(keras.ops.all(loaded == 1))
        (12, True)
        """
        names = None if lora.lora_layers(self) else self.default_lora_layer_names()
        lora.load_lora_weights(self, filepath, names)

    def get_config(self):
        config = base_config(self)
        for name in ArgumentsOf(type(self)).names:
            config[name] = getattr(self, name)
        return config

    @classmethod
    def from_config(cls, config):
        return cls(**with_dtype_policy(config))
