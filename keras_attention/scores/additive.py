"""Additive alignment (Bahdanau et al. 2014) and its perceptron twin."""

import keras
from keras import ops

from keras_attention.arguments import int_argument
from keras_attention.lora import LoRAKernel, LoRAKernels
from keras_attention.scores.base import PACKAGE, Score


@keras.saving.register_keras_serializable(package=PACKAGE)
class Additive(LoRAKernels, Score):
    """Additive (Bahdanau) score `v_a^T tanh(W_a s + U_a h)`.

    Aliases: `"additive"`, `"bahdanau"`. `Perceptron` is the same
    mathematics under the name used in surveys; `Concat(units=...)` is also
    the same function, because `W[s; h] = W_s s + W_h h`.

    `keras.layers.AdditiveAttention` has no `W_a`, `U_a`: it scores
    `sum_d v_d tanh(s_d + h_d)` (queries and keys already projected). That
    is this score with `query_kernel` and `key_kernel` the identity and
    `scale` set to Keras's `scale` variable (all ones with
    `use_scale=False`); `TanhSum` is the variant of
    `keras.layers.Attention(score_mode="concat")`.

    Args:
        units: int or None. Size of the hidden layer. `None` uses the key's
            last dimension. Defaults to `None`.
        use_bias: bool. Add a bias inside the `tanh`. Defaults to `False`,
            as in the paper's formula.
        kernel_initializer: initializer of `W_a`, `U_a` and `v_a`. Defaults
            to `"glorot_uniform"`.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        query: tensor `(batch, Tq, Dq)`.
        key: tensor `(batch, Tv, Dk)`.

    Returns:
        Raw scores `(batch, Tq, Tv)`.

    Example:
    >>> import numpy as np
    >>> tuple(Additive(8)(np.ones((1, 2, 3)), np.ones((1, 4, 5))).shape)
    (1, 2, 4)

    Reference:
        Bahdanau et al., 2014, "Neural Machine Translation by Jointly
        Learning to Align and Translate", appendix A.1.2.
    """

    # `enable_lora(rank)` adapts W_a and U_a as Keras's `Dense` adapts its
    # kernel (`keras_attention.lora`); `v_a` (`scale`) is a vector.
    query_kernel = LoRAKernel()
    key_kernel = LoRAKernel()
    lora_kernel_names = ("query_kernel", "key_kernel")

    def __init__(
        self,
        units=None,
        use_bias=False,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        units = int_argument("units", units, allowed=(None,))
        self.units = units
        self.use_bias = use_bias
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    def build(self, query_shape, key_shape):
        super().build(query_shape, key_shape)
        units = self.units or key_shape[-1]
        init = self.kernel_initializer
        self.query_kernel = self.add_weight(
            name="query_kernel", shape=(query_shape[-1], units), initializer=init
        )
        self.key_kernel = self.add_weight(
            name="key_kernel", shape=(key_shape[-1], units), initializer=init
        )
        self.bias = None
        if self.use_bias:
            self.bias = self.add_weight(
                name="bias", shape=(units,), initializer="zeros"
            )
        self.scale = self.add_weight(name="scale", shape=(units,), initializer=init)

    def call(self, query, key):
        return self.score_projected(query, self.project_key(key))

    def project_key(self, key):
        projected = ops.matmul(key, ops.cast(self.key_kernel, key.dtype))
        if self.bias is not None:
            projected = projected + ops.cast(self.bias, key.dtype)
        return projected

    def score_projected(self, query, projected_key):
        dtype = query.dtype
        q = ops.matmul(query, ops.cast(self.query_kernel, dtype))
        hidden = ops.expand_dims(q, 2) + ops.expand_dims(projected_key, 1)
        return ops.einsum("bqvu,u->bqv", ops.tanh(hidden), ops.cast(self.scale, dtype))

    def get_config(self):
        config = super().get_config()
        config.update(
            units=self.units,
            use_bias=self.use_bias,
            kernel_initializer=keras.initializers.serialize(self.kernel_initializer),
        )
        return config


@keras.saving.register_keras_serializable(package=PACKAGE)
class Perceptron(Additive):
    """Perceptron score `v_a^T tanh(W_a s + U_a h)`, W and U separate weights.

    The same mathematics as `Additive` (Bahdanau): a one-hidden-layer
    perceptron over the query and the key. Kept as its own name because the
    literature uses both.

    Args:
        units: int or None. Size of the hidden layer; `None` uses the key's
            last dimension. Defaults to `None`.
        use_bias: bool. Add a bias inside the `tanh`. Defaults to `False`.
        kernel_initializer: initializer. Defaults to `"glorot_uniform"`.
        **kwargs: base layer arguments.

    Call arguments:
        query: tensor `(batch, Tq, Dq)`.
        key: tensor `(batch, Tv, Dk)`.

    Returns:
        Raw scores `(batch, Tq, Tv)`.

    Example:
    >>> import numpy as np
    >>> tuple(Perceptron(4)(np.ones((2, 1, 3)), np.ones((2, 5, 3))).shape)
    (2, 1, 5)

    Reference:
        Bahdanau et al., 2014; Chaudhari et al., 2021, "An Attentive Survey
        of Attention Models", table 2.
    """
