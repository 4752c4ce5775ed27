"""Concat alignment (Luong et al. 2015)."""

import keras
from keras import ops

from keras_attention.arguments import int_argument
from keras_attention.scores.base import PACKAGE, Score


@keras.saving.register_keras_serializable(package=PACKAGE)
class Concat(Score):
    """Concat score: `W[s; h]` (linear) or `v_a^T tanh(W_a[s; h])`.

    With `units=None` the score is the linear form of the lecture table,
    `W[s; h] = W_s s + W_h h`, a row term plus a column term. With `units`
    set it is Luong's concat score, which is the same mathematics as
    `Additive(units)`: `W_a[s; h] = W_s s + W_h h` splits the kernel.

    Args:
        units: int or None. Hidden size of the `tanh` layer, or `None` for
            the linear form. Defaults to `None`.
        kernel_initializer: initializer. Defaults to `"glorot_uniform"`.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        query: tensor `(batch, Tq, Dq)`.
        key: tensor `(batch, Tv, Dk)`.

    Returns:
        Raw scores `(batch, Tq, Tv)`.

    Example:
    >>> import numpy as np
    >>> tuple(Concat(units=6)(np.ones((1, 2, 3)), np.ones((1, 4, 5))).shape)
    (1, 2, 4)

    Reference:
        Luong et al., 2015, "Effective Approaches to Attention-based Neural
        Machine Translation", eq. 8.
    """

    def __init__(self, units=None, kernel_initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        units = int_argument("units", units, allowed=(None,))
        self.units = units
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    def build(self, query_shape, key_shape):
        super().build(query_shape, key_shape)
        width = 1 if self.units is None else self.units
        # One kernel over the concatenation [s; h], of shape (Dq + Dk, width).
        self.kernel = self.add_weight(
            name="kernel",
            shape=(query_shape[-1] + key_shape[-1], width),
            initializer=self.kernel_initializer,
        )
        self.scale = None
        if self.units is not None:
            self.scale = self.add_weight(
                name="scale", shape=(self.units,), initializer=self.kernel_initializer
            )

    def call(self, query, key):
        return self.score_projected(query, self.project_key(key))

    def project_key(self, key):
        dk = key.shape[-1]
        return ops.matmul(key, ops.cast(self.kernel, key.dtype)[-dk:])

    def score_projected(self, query, projected_key):
        dtype = query.dtype
        q = ops.matmul(query, ops.cast(self.kernel, dtype)[: query.shape[-1]])
        hidden = ops.expand_dims(q, 2) + ops.expand_dims(projected_key, 1)
        if self.scale is None:
            return ops.squeeze(hidden, -1)
        return ops.einsum("bqvu,u->bqv", ops.tanh(hidden), ops.cast(self.scale, dtype))

    def get_config(self):
        config = super().get_config()
        config.update(
            units=self.units,
            kernel_initializer=keras.initializers.serialize(self.kernel_initializer),
        )
        return config
