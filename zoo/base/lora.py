"""LoRA adapters on a zoo backbone, with keras-hub's `Backbone` API.

keras-hub's `Backbone.enable_lora(rank, target_layer_names=None)` freezes
the backbone and calls Keras's own `enable_lora(rank)` on each layer named
in `target_layer_names` (default: `backbone.default_lora_layer_names()`);
`save_lora_weights` / `load_lora_weights` write and read the adapters
alone (`.lora.h5`), the layers identified by their index among the layers
that own weights. The functions here do the same for any functional model;
`zoo.base.backbone.Backbone` exposes them as methods, and each family names
its default targets in its backbone's `default_lora_layer_names`.

Keras's LoRA lives in `Dense`, `EinsumDense` (the attention projections of
`keras_attention.layers.MultiHeadAttention`), `Embedding` and the
convolutions: the kernel is frozen and `lora_kernel_a @ lora_kernel_b`
(scaled by `lora_alpha / lora_rank`) is added to it, also on an int8 layer
(QLoRA: `task.quantize("int8")` first). Layers that own raw kernels get
the same from `keras_attention.lora.LoRAKernels`: the recurrent cells that
our decoder cells and RAM's core build (`LoRAGRUCell`, `LoRALSTMCell`,
`LoRASimpleRNNCell`: an adapter on `kernel` and one on
`recurrent_kernel`) and the `Additive` score (`query_kernel`,
`key_kernel`). Layers with neither (the cells inside Keras's own `LSTM` /
`GRU` layers, as in Seq2Seq's encoder) are refused by name. Unlike
keras-hub, the target layers' biases are frozen too: only the adapters
train.

Saving merges: Keras writes each adapted layer's kernel with its adapter
added (re-quantized on an int8 layer), so `save_to_preset` then
`from_preset` gives the in-memory model without adapters. `merge_lora`
does the same in memory, e.g. before `export`.
"""

import h5py
import keras
import numpy as np

from keras_attention.arguments import int_argument
from zoo.base import quantization

#: The names Keras gives a `MultiHeadAttention`'s projections (`EinsumDense`),
#: ours included.
ATTENTION_PROJECTIONS = ("query", "key", "value", "attention_output")
#: keras-hub's default LoRA targets (`Backbone.default_lora_layer_names`):
#: the query and value projections; the Transformers' default here.
QUERY_AND_VALUE = ("query", "value")


def weighted_layers(model):
    """`model`'s layers that own weights, in keras-hub's order (its index)."""
    return [
        layer for layer in model._flatten_layers(include_self=False) if layer.weights
    ]


def adaptable_names(model, chosen):
    """The names of `model`'s layers that Keras's LoRA reaches and `chosen` picks.

    What a backbone's `default_lora_layer_names` returns.

    Args:
        model: a built model.
        chosen: callable `chosen(layer) -> bool`.

    Example:
    >>> inputs = keras.Input((4,))
    >>> model = keras.Model(inputs, keras.layers.Dense(2, name="out")(inputs))
    >>> adaptable_names(model, lambda layer: True)
    ['out']
    """
    names = []
    for layer in weighted_layers(model):
        if hasattr(layer, "enable_lora") and chosen(layer) and layer.name not in names:
            names.append(layer.name)
    return names


def lora_layers(model):
    """`model`'s layers whose LoRA is enabled, in `weighted_layers` order."""
    return [layer for layer in weighted_layers(model) if _lora_enabled(layer)]


def _lora_enabled(layer):
    return bool(getattr(layer, "lora_enabled", False))


def adapter_names(layer):
    """The attribute names of `layer`'s adapters: Keras's pair, or a pair per kernel.

    Example:
    >>> adapter_names(keras.layers.Dense(2))
    ('lora_kernel_a', 'lora_kernel_b')
    >>> from keras_attention.lora import LoRALSTMCell
    >>> adapter_names(LoRALSTMCell(2))
    ('lora_kernel_a', 'lora_kernel_b', 'lora_recurrent_kernel_a', \
'lora_recurrent_kernel_b')
    """
    return getattr(layer, "lora_variable_names", ("lora_kernel_a", "lora_kernel_b"))


def adapters(layer):
    """`layer`'s adapter variables, in `adapter_names` order."""
    return [getattr(layer, name) for name in adapter_names(layer)]


def enable_lora(model, rank, target_layer_names):
    """Freezes `model` and adds a rank-`rank` adapter to each named layer.

    Args:
        model: a built functional model (a zoo backbone).
        rank: int >= 1. The adapters' rank (`lora_alpha` is `rank`, as
            Keras's default).
        target_layer_names: list of str. Layer names (`layer.name`, at any
            depth), each matching at least one layer that owns weights.

    Raises:
        ValueError: a name that matches no layer, or a layer without
            `enable_lora` (a cell of Keras's `LSTM`/`GRU` layers, a score
            other than `Additive`).

    Example:
    >>> inputs = keras.Input((4,))
    >>> hidden = keras.layers.Dense(8, name="hidden")(inputs)
    >>> model = keras.Model(inputs, keras.layers.Dense(2, name="out")(hidden))
    >>> enable_lora(model, 2, ["hidden"])
    >>> [v.path for v in model.trainable_weights]
    ['hidden/lora_kernel_a', 'hidden/lora_kernel_b']
    """
    rank = int_argument("rank", rank)
    names = list(target_layer_names)
    chosen = [layer for layer in weighted_layers(model) if layer.name in names]
    missing = sorted(set(names) - {layer.name for layer in chosen})
    if missing:
        raise ValueError(
            f"No layer of {model.name} owning weights is named {missing}. "
            f"Received: target_layer_names={names}"
        )
    unreachable = [layer.path for layer in chosen if not hasattr(layer, "enable_lora")]
    if unreachable:
        raise ValueError(
            f"LoRA does not reach {unreachable}: only Keras's `Dense`, "
            "`EinsumDense`, `Embedding` and convolution layers and "
            "`keras_attention.lora`'s cells and `Additive` score have "
            "`enable_lora` (the cells inside Keras's `LSTM`/`GRU` layers "
            f"and other score layers do not). Received: target_layer_names={names}"
        )
    model.trainable = True
    for layer in model._flatten_layers(include_self=False):
        layer.trainable = False
    for layer in chosen:
        layer.trainable = True
        layer.enable_lora(rank)
        own = {id(variable) for variable in adapters(layer)}
        for variable in layer.trainable_weights:
            if id(variable) not in own:
                variable.trainable = False


def merge_lora(model):
    """Adds each adapter to its kernel and removes it; `model` trains whole again.

    The merged kernel is the one Keras saves (`save_own_variables`): on an
    int8 layer the sum is quantized again. The model then gives what its
    preset loads to, and exports without adapters.

    Returns:
        The number of layers merged.

    Example:
    >>> inputs = keras.Input((4,))
    >>> model = keras.Model(inputs, keras.layers.Dense(2, name="out")(inputs))
    >>> enable_lora(model, 2, ["out"])
    >>> _ = model.layers[1].lora_kernel_b.assign(np.ones((2, 2)))
    >>> x = np.ones((1, 4), "float32")
    >>> before = keras.ops.convert_to_numpy(model(x))
    >>> merge_lora(model)
    1
    >>> len(model.trainable_weights), bool(np.allclose(model(x), before))
    (2, True)
    """
    layers = lora_layers(model)
    # Keras's `__delattr__` runs `gc.collect()` for each dropped variable.
    with quantization.frozen_heap():
        for layer in layers:
            store = {}
            layer.save_own_variables(store)
            layer._tracker.unlock()
            for name in adapter_names(layer):
                delattr(layer, name)
            layer._tracker.lock()
            layer.lora_enabled = False
            layer.lora_rank = None
            layer.lora_alpha = None
            layer.load_own_variables(store)
            for variable in layer.weights:
                if keras.backend.is_float_dtype(variable.dtype):
                    variable.trainable = True
    for layer in model._flatten_layers(include_self=False):
        layer.trainable = True
    return len(layers)


def save_lora_weights(model, filepath):
    """Writes `model`'s adapters (and their rank) to `filepath` (`.lora.h5`).

    keras-hub's file layout: `lora/rank`, then `lora/<index>/lora_kernel_a`
    and `lora_kernel_b` for each adapted layer, `<index>` its place among
    the layers that own weights (a layer with several raw kernels holds
    each pair by its name, `lora_recurrent_kernel_a`, ...: `adapter_names`).

    Raises:
        ValueError: no adapter is enabled, or the name does not end in
            `.lora.h5`.
    """
    indices = _lora_indices(model)
    if not indices:
        raise ValueError(
            f"{model.name} has no LoRA-enabled layers: call `enable_lora(rank)` first."
        )
    if not str(filepath).endswith(".lora.h5"):
        raise ValueError(f"The filename must end in `.lora.h5`. Received: {filepath=}")
    layers = weighted_layers(model)
    with h5py.File(filepath, "w") as store:
        group = store.create_group("lora")
        group["rank"] = layers[indices[0]].lora_rank
        for index in indices:
            inner = group.create_group(str(index))
            inner.attrs["path"] = layers[index].path
            for name in adapter_names(layers[index]):
                inner[name] = keras.ops.convert_to_numpy(getattr(layers[index], name))


def load_lora_weights(model, filepath, default_layer_names):
    """Reads adapters written by `save_lora_weights` into `model`.

    A model without adapters gets them first (`enable_lora` with the
    file's rank on `default_layer_names`, keras-hub's behaviour).

    Raises:
        ValueError: the file's rank or adapted layers differ from the
            model's.
    """
    with h5py.File(filepath, "r") as store:
        rank = int(store["lora/rank"][()])
        if not _lora_indices(model):
            enable_lora(model, rank, default_layer_names)
        indices = _lora_indices(model)
        layers = weighted_layers(model)
        saved = sorted(int(key) for key in store["lora"] if key != "rank")
        if layers[indices[0]].lora_rank != rank or saved != indices:
            raise ValueError(
                f"The LoRA adapters in '{filepath}' (rank {rank}, layers "
                f"{saved}) do not match {model.name}'s (rank "
                f"{layers[indices[0]].lora_rank}, layers {indices}): enable "
                "LoRA with the same rank and targets as when they were saved."
            )
        for index in indices:
            for name in adapter_names(layers[index]):
                getattr(layers[index], name).assign(store[f"lora/{index}/{name}"][()])


def _lora_indices(model):
    return [i for i, layer in enumerate(weighted_layers(model)) if _lora_enabled(layer)]


def trainable_share(model):
    """The fraction of `model`'s parameters that train (e.g. `0.012`).

    Example:
    >>> inputs = keras.Input((4,))
    >>> model = keras.Model(inputs, keras.layers.Dense(2, name="out")(inputs))
    >>> trainable_share(model)
    1.0
    """
    trainable = sum(int(np.prod(v.shape)) for v in model.trainable_weights)
    return trainable / max(1, sum(int(np.prod(v.shape)) for v in model.weights))
