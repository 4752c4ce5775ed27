"""Keras's "concat" alignment: a scaled sum of `tanh(query + key)`."""

import keras
from keras import ops

from keras_attention.scores.base import PACKAGE, Score


@keras.saving.register_keras_serializable(package=PACKAGE)
class TanhSum(Score):
    """Score `c sum_d tanh(a (s_d + h_d))`, Keras's `score_mode="concat"`.

    This is the score of `keras.layers.Attention(score_mode="concat")`: the
    additive score without the projections `W_a`, `U_a` of `Additive`
    (query and key must already live in one space) and with `v_a = c 1`.
    `c` is the trainable scalar `concat_score_weight` and `a` the trainable
    scalar `scale` (only with `use_scale=True`, otherwise 1), both
    initialised to 1 and created in that order, named as in Keras, so that
    weights transfer with `set_weights(keras_layer.get_weights())`.

    Args:
        use_scale: bool. Multiply `s + h` by a learned scalar `scale` before
            the `tanh`. Defaults to `False`.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        query: tensor `(batch, Tq, D)`.
        key: tensor `(batch, Tv, D)`; same `D` as the query.

    Returns:
        Raw scores `(batch, Tq, Tv)`.

    Example:
    >>> import numpy as np
    >>> layer = TanhSum(use_scale=True)
    >>> tuple(layer(np.zeros((1, 2, 3)), np.zeros((1, 4, 3))).shape)
    (1, 2, 4)
    >>> [w.name for w in layer.weights]
    ['scale', 'concat_score_weight']
    """

    requires_equal_dims = True

    def __init__(self, use_scale=False, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(use_scale, bool):
            raise ValueError(
                f"`use_scale` must be a bool. Received: use_scale={use_scale!r}"
            )
        self.use_scale = use_scale

    def build(self, query_shape, key_shape):
        super().build(query_shape, key_shape)
        self.scale = None
        if self.use_scale:
            self.scale = self.add_weight(name="scale", shape=(), initializer="ones")
        self.concat_score_weight = self.add_weight(
            name="concat_score_weight", shape=(), initializer="ones"
        )

    def call(self, query, key):
        dtype = query.dtype
        hidden = ops.expand_dims(query, -2) + ops.expand_dims(key, -3)
        if self.scale is not None:
            hidden = ops.cast(self.scale, dtype) * hidden
        total = ops.sum(ops.tanh(hidden), axis=-1)
        return ops.cast(self.concat_score_weight, dtype) * total

    def get_config(self):
        config = super().get_config()
        config["use_scale"] = self.use_scale
        return config
