"""Content-based (cosine) alignment (Graves et al. 2014)."""

import keras
from keras import ops

from keras_attention.scores.base import PACKAGE, Score

# Smallest norm clip under a float16 compute dtype (float16's machine
# epsilon): the gradient at a zero vector is `sum_j g_j h_j / |h_j|` divided
# by the clip, and float16 gradients end at 65504 (1 / 1e-6 does not fit).
FLOAT16_EPSILON = 2.0**-10


@keras.saving.register_keras_serializable(package=PACKAGE)
class Cosine(Score):
    """Cosine (content-based) score `s^T h / (||s|| ||h||)`.

    Aliases: `"cosine"`, `"content"`. A zero vector has similarity 0 with
    everything (norms are clipped at `epsilon`), never NaN, and the gradient
    at a zero vector is finite too. Norms and the product are computed in
    float32, so inputs up to float16's largest value neither overflow nor
    give a uniform row. Under a float16 compute dtype the clip is at least
    `2**-10`: the gradient at a zero vector is the sum of the key
    directions divided by the clip, which must fit in float16 (max 65504);
    so a float16 vector shorter than `2**-10` has `|cosine| < 1`.

    Args:
        epsilon: float. Lower bound on each norm (at least `2**-10` under
            a float16 compute dtype). Defaults to `1e-6`.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        query: tensor `(batch, Tq, D)`.
        key: tensor `(batch, Tv, D)`; same `D` as the query.

    Returns:
        Scores in `[-1, 1]`, shape `(batch, Tq, Tv)`.

    Example:
    >>> import numpy as np
    >>> round(float(Cosine()(np.ones((1, 1, 2)), np.ones((1, 1, 2)))[0, 0, 0]), 6)
    1.0

    Reference:
        Graves et al., 2014, "Neural Turing Machines", eq. 6.
    """

    requires_equal_dims = True

    def __init__(self, epsilon=1e-6, **kwargs):
        super().__init__(**kwargs)
        self.epsilon = epsilon

    def call(self, query, key):
        dtype = query.dtype
        epsilon = float(self.epsilon)
        if keras.backend.standardize_dtype(dtype) == "float16":
            epsilon = max(epsilon, FLOAT16_EPSILON)
        floor = epsilon**2

        def normalise(x):
            # x / max(|x|, eps) as x / sqrt(max(|x|^2, eps^2)): the clip comes
            # before the root, whose gradient at 0 is infinite (0 * inf = NaN
            # for a zero vector). float32, so that eps^2 and |x|^2 neither
            # underflow nor overflow under mixed precision.
            x = ops.cast(x, "float32")
            squared = ops.sum(ops.square(x), axis=-1, keepdims=True)
            return x / ops.sqrt(ops.maximum(squared, floor))

        scores = ops.matmul(normalise(query), ops.swapaxes(normalise(key), -1, -2))
        return ops.cast(scores, dtype)

    def get_config(self):
        config = super().get_config()
        config["epsilon"] = self.epsilon
        return config
