"""LoRA on layers that own raw kernels, with the semantics of Keras's `Dense`.

Keras's `Dense.enable_lora(rank)` freezes `kernel`, adds `lora_kernel_a`
`(in, rank)` and `lora_kernel_b` `(rank, out)` (float32; `he_uniform` and
zeros, so a fresh adapter adds nothing) and reads `kernel` as
`kernel + lora_alpha / rank * a @ b` in the forward pass; saving writes
that merged kernel and no adapter, and loading into a layer whose LoRA is
on assigns the kernel and zeros the adapters. Keras's recurrent cells and
our `Additive` score own raw kernel variables and have no such hook.

`LoRAKernels` gives a layer the same: each of its `lora_kernel_names`
gets its own pair of adapters (`lora_kernel_a`/`_b` for `kernel`,
`lora_recurrent_kernel_a`/`_b` for `recurrent_kernel`, ...), read through
a `LoRAKernel` descriptor in place of the plain attribute. A layer without
LoRA reads and saves exactly as before, so presets load unchanged.
`LoRAGRUCell`, `LoRALSTMCell` and `LoRASimpleRNNCell` are Keras's cells
with it, the cells that `keras_attention.layers.AttentionDecoderCell` and
the zoo's recurrent models build.
"""

import keras
from keras import ops

PACKAGE = "keras_attention"


class LoRAKernel:
    """A kernel attribute that adds its LoRA adapter once LoRA is enabled.

    Assigning the attribute stores the variable as `_<name>`; reading it
    gives that variable, or `variable + lora_alpha / lora_rank * a @ b`
    (Keras's `Dense.kernel`) when the layer's LoRA is enabled.
    """

    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, layer, owner=None):
        if layer is None:
            return self
        kernel = getattr(layer, f"_{self.name}")
        if not getattr(layer, "lora_enabled", False):
            return kernel
        a = getattr(layer, f"lora_{self.name}_a")
        b = getattr(layer, f"lora_{self.name}_b")
        return ops.add(kernel, (layer.lora_alpha / layer.lora_rank) * ops.matmul(a, b))

    def __set__(self, layer, value):
        setattr(layer, f"_{self.name}", value)


class LoRAKernels:
    """Mixin: Keras's `Dense` LoRA on each raw kernel in `lora_kernel_names`.

    The class declares each such kernel as a `LoRAKernel` (`kernel =
    LoRAKernel()`) and lists its name in `lora_kernel_names`.

    Example:
    >>> import numpy as np
    >>> cell = LoRAGRUCell(3, name="gru_cell")
    >>> cell.build((None, 2))
    >>> frozen = keras.ops.convert_to_numpy(cell.kernel)
    >>> cell.enable_lora(2)
    >>> [v.path for v in cell.trainable_weights]  # the kernels are frozen
    ['gru_cell/bias', 'gru_cell/lora_kernel_a', 'gru_cell/lora_kernel_b', \
'gru_cell/lora_recurrent_kernel_a', 'gru_cell/lora_recurrent_kernel_b']
    >>> bool(np.allclose(keras.ops.convert_to_numpy(cell.kernel), frozen))  # b is 0
    True
    """

    lora_kernel_names = ()
    lora_enabled = False
    lora_rank = None
    lora_alpha = None

    @property
    def lora_variable_names(self):
        """The adapters' attribute names, `a` then `b` for each kernel."""
        return tuple(
            f"lora_{name}_{part}" for name in self.lora_kernel_names for part in "ab"
        )

    def enable_lora(
        self, rank, lora_alpha=None, a_initializer="he_uniform", b_initializer="zeros"
    ):
        """Adds a rank-`rank` adapter to each kernel and freezes the kernels.

        Keras's `Dense.enable_lora`: `lora_alpha` defaults to `rank`.

        Raises:
            ValueError: the layer is not built, or its LoRA is already on.
        """
        if not self.built:
            raise ValueError("Cannot enable lora on a layer that isn't yet built.")
        if self.lora_enabled:
            raise ValueError(
                "lora is already enabled. This can only be done once per layer."
            )
        self._tracker.unlock()
        for name in self.lora_kernel_names:
            kernel = getattr(self, f"_{name}")
            for part, shape, initializer in (
                ("a", (kernel.shape[0], rank), a_initializer),
                ("b", (rank, kernel.shape[1]), b_initializer),
            ):
                variable = self.add_weight(
                    name=f"lora_{name}_{part}",
                    shape=shape,
                    initializer=keras.initializers.get(initializer),
                    dtype="float32",
                )
                setattr(self, f"lora_{name}_{part}", variable)
            kernel.trainable = False
        self._tracker.lock()
        self.lora_enabled = True
        self.lora_rank = rank
        self.lora_alpha = lora_alpha if lora_alpha is not None else rank

    def _saved_variables(self):
        """The variables Keras saves, in its order, without the adapters."""
        variables = {}
        super().save_own_variables(variables)
        adapters = {id(getattr(self, name)) for name in self.lora_variable_names}
        return [v for v in variables.values() if id(v) not in adapters]

    def save_own_variables(self, store):
        """Keras's order; with LoRA on, each kernel merged and no adapter."""
        if not self.lora_enabled:
            return super().save_own_variables(store)
        merged = {
            id(getattr(self, f"_{name}")): getattr(self, name)
            for name in self.lora_kernel_names
        }
        for index, variable in enumerate(self._saved_variables()):
            store[str(index)] = merged.get(id(variable), variable)

    def load_own_variables(self, store):
        """Keras's order; with LoRA on, the adapters are zeroed (as `Dense`)."""
        if not self.lora_enabled:
            return super().load_own_variables(store)
        for index, variable in enumerate(self._saved_variables()):
            variable.assign(store[str(index)])
        for name in self.lora_variable_names:
            variable = getattr(self, name)
            variable.assign(ops.zeros(variable.shape))


class _RecurrentLoRA(LoRAKernels):
    kernel = LoRAKernel()
    recurrent_kernel = LoRAKernel()
    lora_kernel_names = ("kernel", "recurrent_kernel")


@keras.saving.register_keras_serializable(package=PACKAGE)
class LoRAGRUCell(_RecurrentLoRA, keras.layers.GRUCell):
    """`keras.layers.GRUCell` with `enable_lora` on `kernel` and `recurrent_kernel`."""


@keras.saving.register_keras_serializable(package=PACKAGE)
class LoRALSTMCell(_RecurrentLoRA, keras.layers.LSTMCell):
    """`keras.layers.LSTMCell` with `enable_lora` on `kernel` and `recurrent_kernel`."""


@keras.saving.register_keras_serializable(package=PACKAGE)
class LoRASimpleRNNCell(_RecurrentLoRA, keras.layers.SimpleRNNCell):
    """`keras.layers.SimpleRNNCell` with `enable_lora` on both its kernels."""
