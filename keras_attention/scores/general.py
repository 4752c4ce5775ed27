"""General / multiplicative alignment (Luong et al. 2015)."""

import keras
from keras import ops

from keras_attention.scores.base import PACKAGE, Score
from keras_attention.scores.precision import dot_scores


@keras.saving.register_keras_serializable(package=PACKAGE)
class General(Score):
    """General (multiplicative, bilinear) score `s^T W_a h`.

    Aliases: `"general"`, `"luong"`, `"multiplicative"`. With `W_a` the
    identity this is `Dot`. The projection `W_a h` (or `s^T W_a`) runs in
    the compute dtype, like a `Dense` layer; the product of the two sides
    runs in float32 under a float16 compute dtype, which then gives float32
    scores (`scores.precision`).

    Args:
        kernel_initializer: initializer of `W_a`. Defaults to
            `"glorot_uniform"`.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        query: tensor `(batch, Tq, Dq)`.
        key: tensor `(batch, Tv, Dk)`.

    Returns:
        Raw scores `(batch, Tq, Tv)`, float32 for float16 inputs.

    Example:
    >>> import numpy as np
    >>> tuple(General()(np.ones((1, 2, 3)), np.ones((1, 4, 5))).shape)
    (1, 2, 4)

    Reference:
        Luong et al., 2015, "Effective Approaches to Attention-based Neural
        Machine Translation", eq. 8.
    """

    multiplies_vectors = True

    def __init__(self, kernel_initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    def build(self, query_shape, key_shape):
        super().build(query_shape, key_shape)
        self.kernel = self.add_weight(
            name="kernel",
            shape=(query_shape[-1], key_shape[-1]),
            initializer=self.kernel_initializer,
        )

    def call(self, query, key):
        projected = ops.matmul(query, ops.cast(self.kernel, query.dtype))
        return dot_scores(projected, key)

    def project_key(self, key):
        # s^T W h = s^T (W h): the memory side can be projected once.
        return ops.matmul(key, ops.transpose(ops.cast(self.kernel, key.dtype)))

    def score_projected(self, query, projected_key):
        return dot_scores(query, projected_key)

    def get_config(self):
        config = super().get_config()
        config["kernel_initializer"] = keras.initializers.serialize(
            self.kernel_initializer
        )
        return config
