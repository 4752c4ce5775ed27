"""Scaled dot-product alignment (Vaswani et al. 2017)."""

import math

import keras
from keras import ops

from keras_attention.scores.base import PACKAGE, Score


@keras.saving.register_keras_serializable(package=PACKAGE)
class ScaledDot(Score):
    """Scaled dot-product score `s^T h / sqrt(d_k)`.

    The same mathematics as `Dot` up to the constant `1 / sqrt(d_k)`, which
    keeps the softmax out of its saturated region for large `d_k`.

    Args:
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        query: tensor `(batch, Tq, D)`.
        key: tensor `(batch, Tv, D)`; same `D` as the query.

    Returns:
        Raw scores `(batch, Tq, Tv)`.

    Example:
    >>> import numpy as np
    >>> float(ScaledDot()(np.ones((1, 2, 4)), np.ones((1, 3, 4)))[0, 0, 0])
    2.0

    Reference:
        Vaswani et al., 2017, "Attention Is All You Need", eq. 1.
    """

    requires_equal_dims = True

    def call(self, query, key):
        scale = 1.0 / math.sqrt(key.shape[-1])
        query = ops.multiply(query, ops.cast(scale, query.dtype))
        return ops.matmul(query, ops.swapaxes(key, -1, -2))
