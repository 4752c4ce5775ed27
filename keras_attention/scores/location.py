"""Location-based alignment (Luong et al. 2015)."""

import keras
from keras import ops

from keras_attention.arguments import int_argument
from keras_attention.scores.base import PACKAGE, Score


@keras.saving.register_keras_serializable(package=PACKAGE)
class Location(Score):
    """Location score `W_a s`: depends only on the query, cropped to `Tv`.

    The query alone predicts a score for each of `max_length` source
    positions; the first `Tv` are kept. Keys are only used for their length.

    Args:
        max_length: int or None. Longest key sequence supported. `None`
            takes the key length at build time, which must then be static.
            Defaults to `None`.
        use_bias: bool. Defaults to `True`.
        kernel_initializer: initializer. Defaults to `"glorot_uniform"`.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        query: tensor `(batch, Tq, Dq)`.
        key: tensor `(batch, Tv, Dk)` with `Tv <= max_length`.

    Returns:
        Raw scores `(batch, Tq, Tv)`.

    Example:
    >>> import numpy as np
    >>> tuple(Location(10)(np.ones((1, 2, 3)), np.ones((1, 4, 5))).shape)
    (1, 2, 4)

    Reference:
        Luong et al., 2015, "Effective Approaches to Attention-based Neural
        Machine Translation", eq. 9.
    """

    def __init__(
        self,
        max_length=None,
        use_bias=True,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        max_length = int_argument("max_length", max_length, allowed=(None,))
        self.max_length = max_length
        self.use_bias = use_bias
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    def build(self, query_shape, key_shape):
        super().build(query_shape, key_shape)
        length = self.max_length
        if length is None:
            length = key_shape[1]
            if length is None:
                raise ValueError(
                    "Location needs `max_length` when the key length is not "
                    f"static. Received: key.shape={tuple(key_shape)}"
                )
            self.max_length = length
        elif key_shape[1] is not None and key_shape[1] > length:
            raise ValueError(
                f"Location(max_length={length}) cannot score {key_shape[1]} "
                f"key positions. Received: key.shape={tuple(key_shape)}"
            )
        self.kernel = self.add_weight(
            name="kernel",
            shape=(query_shape[-1], length),
            initializer=self.kernel_initializer,
        )
        self.bias = None
        if self.use_bias:
            self.bias = self.add_weight(
                name="bias", shape=(length,), initializer="zeros"
            )

    def call(self, query, key):
        scores = ops.matmul(query, ops.cast(self.kernel, query.dtype))
        if self.bias is not None:
            scores = scores + ops.cast(self.bias, query.dtype)
        return scores[..., : ops.shape(key)[1]]

    def get_config(self):
        config = super().get_config()
        config.update(
            max_length=self.max_length,
            use_bias=self.use_bias,
            kernel_initializer=keras.initializers.serialize(self.kernel_initializer),
        )
        return config
