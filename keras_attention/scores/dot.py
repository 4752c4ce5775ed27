"""Dot-product alignment (Luong et al. 2015, "dot")."""

import keras
from keras import ops

from keras_attention.scores.base import PACKAGE, Score


@keras.saving.register_keras_serializable(package=PACKAGE)
class Dot(Score):
    """Dot-product score `s^T h`.

    Args:
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        query: tensor `(batch, Tq, D)`.
        key: tensor `(batch, Tv, D)`; same `D` as the query.

    Returns:
        Raw scores `(batch, Tq, Tv)`.

    Example:
    >>> import numpy as np
    >>> Dot()(np.ones((1, 2, 3)), np.ones((1, 4, 3))).shape
    (1, 2, 4)

    Reference:
        Luong et al., 2015, "Effective Approaches to Attention-based Neural
        Machine Translation", eq. 8.
    """

    requires_equal_dims = True

    def call(self, query, key):
        return ops.matmul(query, ops.swapaxes(key, -1, -2))
