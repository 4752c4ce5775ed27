"""Dot-product alignment (Luong et al. 2015, "dot")."""

import keras
from keras import ops

from keras_attention.scores.base import PACKAGE, Score
from keras_attention.scores.precision import dot_scores


@keras.saving.register_keras_serializable(package=PACKAGE)
class Dot(Score):
    """Dot-product score `s^T h`, optionally times a learned scalar.

    With `use_scale=True` the scores are multiplied by a trainable scalar
    `scale` (initialised to 1), which is `keras.layers.Attention(
    use_scale=True)`'s score, with a variable of the same name and shape.

    Under a float16 compute dtype the product runs in float32 and the scores
    are float32 (`scores.precision`): float16 overflows once `|s| |h|`
    passes 65504, e.g. at about 100x unit scale for 16 dimensions, where
    `keras.layers.Attention` returns NaN.

    Args:
        use_scale: bool. Multiply the scores by a learned scalar `scale`.
            Defaults to `False`.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        query: tensor `(batch, Tq, D)`.
        key: tensor `(batch, Tv, D)`; same `D` as the query.

    Returns:
        Raw scores `(batch, Tq, Tv)`, float32 for float16 inputs.

    Example:
    >>> import numpy as np
    >>> tuple(Dot()(np.ones((1, 2, 3)), np.ones((1, 4, 3))).shape)
    (1, 2, 4)
    >>> layer = Dot(use_scale=True)
    >>> _ = layer(np.ones((1, 2, 3)), np.ones((1, 4, 3)))
    >>> [(w.name, tuple(w.shape)) for w in layer.weights]
    [('scale', ())]

    Reference:
        Luong et al., 2015, "Effective Approaches to Attention-based Neural
        Machine Translation", eq. 8.
    """

    requires_equal_dims = True
    multiplies_vectors = True

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

    def call(self, query, key):
        scores = dot_scores(query, key)
        if self.scale is not None:
            scores = ops.multiply(scores, ops.cast(self.scale, scores.dtype))
        return scores

    def get_config(self):
        config = super().get_config()
        config["use_scale"] = self.use_scale
        return config
