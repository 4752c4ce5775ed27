"""Scaled dot-product alignment (Vaswani et al. 2017)."""

import math

import keras
from keras import ops

from keras_attention.scores.base import PACKAGE, Score
from keras_attention.scores.precision import dot_scores, widen


@keras.saving.register_keras_serializable(package=PACKAGE)
class ScaledDot(Score):
    """Scaled dot-product score `s^T h / sqrt(d_k)`.

    The same mathematics as `Dot` up to the constant `1 / sqrt(d_k)`, which
    keeps the softmax out of its saturated region for large `d_k`. The query
    is scaled before the product; under a float16 compute dtype both run in
    float32 and the scores are float32 (`scores.precision`), finite for any
    finite float16 inputs.

    Args:
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        query: tensor `(batch, Tq, D)`.
        key: tensor `(batch, Tv, D)`; same `D` as the query.

    Returns:
        Raw scores `(batch, Tq, Tv)`, float32 for float16 inputs.

    Example:
    >>> import numpy as np
    >>> float(ScaledDot()(np.ones((1, 2, 4)), np.ones((1, 3, 4)))[0, 0, 0])
    2.0

    Reference:
        Vaswani et al., 2017, "Attention Is All You Need", eq. 1.
    """

    requires_equal_dims = True
    multiplies_vectors = True

    def call(self, query, key):
        query = widen(query)
        scale = 1.0 / math.sqrt(key.shape[-1])
        query = ops.multiply(query, ops.cast(scale, query.dtype))
        return dot_scores(query, key)
