"""Quantizing a zoo model's weights through Keras's own API (`Model.quantize`).

`Task.quantize` hands Keras the layers that own weights, leaving out the
preprocessor (tokenizers and image handling hold vocabularies, not
kernels). Keras converts the layers that implement its quantization hooks
(`Dense`, `EinsumDense`, `Embedding` and the layers built on them, e.g.
`ReversibleEmbedding` and the attention projections); the others keep
their float weights. Those are not handed to Keras (which would warn once
per layer kind, in its own format): `warn_left_float` names the ones with
a kernel once (recurrent cells, convolutions, the `Additive` score), and
says nothing of those with none to quantize (normalizations: vectors).

A zoo config lists constructor arguments, not layers, so a quantized task
records its layers' policies as keras-hub's backbones do: its `dtype` is a
`keras.dtype_policies.DTypePolicyMap` from each quantized layer's path to
its policy (e.g. `int8_from_float32`). `requantized` rebuilds that state:
the model is built with the map's default policy and the same layers are
quantized again, so the weights file loads into variables of the same
names and dtypes.
"""

import collections
import contextlib
import gc
import re
import warnings

import keras

from keras_attention import lora


def chosen_layers(filters, skipped=()):
    """The layer filter `Task.quantize` hands `keras.Model.quantize`.

    Args:
        filters: `keras.Model.quantize`'s `filters`: `None`, a regex (or a
            list of them) searched in each layer's name, or a callable.
        skipped: layers never quantized (the preprocessor's).

    Returns:
        A callable `filter(layer) -> bool`: `True` for a layer that owns
        weights, is not skipped and passes `filters`.
    """
    skipped = {id(layer) for layer in skipped}
    if isinstance(filters, str):
        filters = [filters]
    if isinstance(filters, (list, tuple)):
        patterns = list(filters)

        def filters(layer):
            return any(re.search(pattern, layer.name) for pattern in patterns)

    def chosen(layer):
        if id(layer) in skipped or not layer.weights:
            return False
        return filters is None or bool(filters(layer))

    return chosen


def quantizable(layer):
    """Whether `keras.Model.quantize` can convert `layer` (else it warns).

    Keras calls `quantize` on the layers without sublayers; one whose class
    has no `quantize` of its own raises in `keras.layers.Layer.quantize`.
    A layer with sublayers is reached through them.

    Example:
    >>> quantizable(keras.layers.Dense(2)), quantizable(keras.layers.Conv2D(2, 3))
    (True, False)
    """
    leaf = len(list(layer._flatten_layers())) == 1
    return not leaf or type(layer).quantize is not keras.layers.Layer.quantize


def warn_left_float(layers, mode):
    """Warns once (`UserWarning`) naming the `layers` with a kernel left float.

    Args:
        layers: the chosen layers that are not `quantizable`; those with no
            weight of two axes or more (normalizations, biases only) have
            nothing to quantize and are not named.
        mode: str. The quantization mode, e.g. `"int8"`.

    Example:
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     cell = keras.layers.GRUCell(2)
    ...     cell.build((None, 3))
    ...     warn_left_float([cell, cell, keras.layers.BatchNormalization()], "int8")
    >>> print(caught[0].message)  # doctest: +ELLIPSIS
    int8 leaves 2 layers float, their kernels as trained: 2 GRUCell (Keras ... has no int8 form for them).
    """
    kinds = collections.Counter(
        _known_as(layer)
        for layer in layers
        if any(len(weight.shape) >= 2 for weight in layer.weights)
    )
    if kinds:
        named = ", ".join(f"{count} {name}" for name, count in kinds.items())
        count = kinds.total()
        layers = "1 layer float, its" if count == 1 else f"{count} layers float, their"
        warnings.warn(
            f"{mode} leaves {layers} kernels as trained: {named} (Keras "
            f"{keras.__version__} has no {mode} form for them).",
            UserWarning,
            stacklevel=4,  # the caller of `Task.quantize` (Keras wraps it per instance)
        )


def _known_as(layer):
    """The name of `layer`'s class as a user knows it: a Keras cell that
    `keras_attention.lora` gave adapters (`LoRAGRUCell`) is a `GRUCell`."""
    for kind in type(layer).__mro__:
        if kind.__module__ != lora.__name__:
            return kind.__name__


@contextlib.contextmanager
def frozen_heap():
    """Keeps the objects that exist now out of the collections inside.

    Keras's `Layer.__delattr__` runs `gc.collect()` for every float kernel
    a quantized layer drops: 0.5 s each over TensorFlow's heap, 24 of the
    25 s `quantize` took on the Transformer preset (49 kernels). Frozen
    (`gc.freeze`), the objects that existed before are not traversed; a
    dropped kernel is freed when its last reference goes (or by the next
    collection, after the frozen objects are handed back on exit).
    """
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def policy_map(model):
    """`model`'s quantized layers' policies by path, or `None` if none is.

    Example:
    >>> inputs = keras.Input((3,))
    >>> model = keras.Model(inputs, keras.layers.Dense(2, name="out")(inputs))
    >>> policy_map(model) is None
    True
    >>> model.quantize("int8")
    >>> policies = policy_map(model)
    >>> policies["out"].name, policies.default_policy.name
    ('int8_from_float32', 'float32')
    """
    policies = {
        layer.path: layer.dtype_policy
        for layer in model._flatten_layers(include_self=False)
        if layer.quantization_mode is not None
    }
    if not policies:
        return None
    return keras.dtype_policies.DTypePolicyMap(model.dtype_policy, policies)


def requantized(model, policies):
    """Quantizes `model`'s layers named in `policies` (a `policy_map`).

    Each mode's layers (matched by path) are quantized with that mode, as
    `Task.quantize` did before the model was saved.

    Returns:
        `model`.
    """
    modes = {}
    for path, policy in policies.items():
        modes.setdefault(policy.quantization_mode, set()).add(path)
    for mode, paths in modes.items():
        model.quantize(mode, filters=lambda layer, paths=paths: layer.path in paths)
    return model
