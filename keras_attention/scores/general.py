"""General / multiplicative alignment (Luong et al. 2015)."""

import keras
from keras import ops

from keras_attention.scores.base import PACKAGE, Score


@keras.saving.register_keras_serializable(package=PACKAGE)
class General(Score):
    """General (multiplicative, bilinear) score `s^T W_a h`.

    Aliases: `"general"`, `"luong"`, `"multiplicative"`. With `W_a` the
    identity this is `Dot`.

    Args:
        kernel_initializer: initializer of `W_a`. Defaults to
            `"glorot_uniform"`.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        query: tensor `(batch, Tq, Dq)`.
        key: tensor `(batch, Tv, Dk)`.

    Returns:
        Raw scores `(batch, Tq, Tv)`.

    Example:
    >>> import numpy as np
    >>> tuple(General()(np.ones((1, 2, 3)), np.ones((1, 4, 5))).shape)
    (1, 2, 4)

    Reference:
        Luong et al., 2015, "Effective Approaches to Attention-based Neural
        Machine Translation", eq. 8.
    """

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
        return ops.matmul(projected, ops.swapaxes(key, -1, -2))

    def project_key(self, key):
        # s^T W h = s^T (W h): the memory side can be projected once.
        return ops.matmul(key, ops.transpose(ops.cast(self.kernel, key.dtype)))

    def score_projected(self, query, projected_key):
        return ops.matmul(query, ops.swapaxes(projected_key, -1, -2))

    def get_config(self):
        config = super().get_config()
        config["kernel_initializer"] = keras.initializers.serialize(
            self.kernel_initializer
        )
        return config
