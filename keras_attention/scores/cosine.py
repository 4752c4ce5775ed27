"""Content-based (cosine) alignment (Graves et al. 2014)."""

import keras
from keras import ops

from keras_attention.scores.base import PACKAGE, Score


@keras.saving.register_keras_serializable(package=PACKAGE)
class Cosine(Score):
    """Cosine (content-based) score `s^T h / (||s|| ||h||)`.

    Aliases: `"cosine"`, `"content"`. A zero vector has similarity 0 with
    everything (norms are clipped at `epsilon`), never NaN.

    Args:
        epsilon: float. Lower bound on each norm. Defaults to `1e-6`.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        query: tensor `(batch, Tq, D)`.
        key: tensor `(batch, Tv, D)`; same `D` as the query.

    Returns:
        Scores in `[-1, 1]`, shape `(batch, Tq, Tv)`.

    Example:
    >>> import numpy as np
    >>> Cosine()(np.ones((1, 1, 2)), np.ones((1, 1, 2)))[0, 0, 0]
    1.0

    Reference:
        Graves et al., 2014, "Neural Turing Machines", eq. 6.
    """

    requires_equal_dims = True

    def __init__(self, epsilon=1e-6, **kwargs):
        super().__init__(**kwargs)
        self.epsilon = epsilon

    def call(self, query, key):
        def normalise(x):
            norm = ops.sqrt(ops.sum(ops.square(x), axis=-1, keepdims=True))
            return x / ops.maximum(norm, ops.cast(self.epsilon, x.dtype))

        return ops.matmul(normalise(query), ops.swapaxes(normalise(key), -1, -2))

    def get_config(self):
        config = super().get_config()
        config["epsilon"] = self.epsilon
        return config
