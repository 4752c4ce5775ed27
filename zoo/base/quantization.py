"""Quantizing a zoo model's weights through Keras's own API (`Model.quantize`).

`Task.quantize` hands Keras the layers that own weights, leaving out the
preprocessor (tokenizers and image handling hold vocabularies, not
kernels). Keras converts the layers that implement its quantization hooks
(`Dense`, `EinsumDense`, `Embedding` and the layers built on them, e.g.
`ReversibleEmbedding` and the attention projections); the others keep
their float weights and Keras says so with a warning naming each
(recurrent cells, convolutions, normalizations, the `Additive` score).

A zoo config lists constructor arguments, not layers, so a quantized task
records its layers' policies as keras-hub's backbones do: its `dtype` is a
`keras.dtype_policies.DTypePolicyMap` from each quantized layer's path to
its policy (e.g. `int8_from_float32`). `requantized` rebuilds that state:
the model is built with the map's default policy and the same layers are
quantized again, so the weights file loads into variables of the same
names and dtypes.
"""

import contextlib
import gc
import re

import keras


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
