"""Base class shared by every alignment (score) function."""

import keras

from keras_attention.scores.precision import score_dtype

PACKAGE = "keras_attention"


@keras.saving.register_keras_serializable(package=PACKAGE)
class Score(keras.layers.Layer):
    """Base class of alignment functions: `score(query, key) -> (B, Tq, Tv)`.

    An alignment function compares every query vector with every key vector
    and returns raw, unnormalised scores (no softmax). Subclasses implement
    `call(query, key)`; they create their weights in `build(query_shape,
    key_shape)`.

    Call arguments:
        query: tensor of shape `(batch, Tq, Dq)`.
        key: tensor of shape `(batch, Tv, Dk)`.

    Returns:
        Scores of shape `(batch, Tq, Tv)`.
    """

    #: Whether the score compares query and key without weights, so the
    #: two last dimensions must be equal.
    requires_equal_dims = False

    #: Whether the score multiplies query and key vectors, which it then
    #: does in `precision.score_dtype` (float32 for float16 inputs), the
    #: dtype of its output.
    multiplies_vectors = False

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        # Scores are computed for every query row; the attention layer that
        # owns the score applies the masks, so a Keras mask on the query
        # passes through without a warning.
        self.supports_masking = True

    def build(self, query_shape, key_shape):
        check_shapes(self, query_shape, key_shape)
        self.built = True

    def project_key(self, key):
        """The key-only part of the score, computed once per memory.

        Decoders that score many queries against one fixed memory (one
        query per step) call `project_key(memory)` once and then
        `score_projected(query, projected)` each step, which equals
        `score(query, memory)` but skips re-projecting the memory. The
        default is the identity.

        Args:
            key: tensor `(batch, Tv, Dk)`.

        Returns:
            The projected keys `(batch, Tv, ...)`.
        """
        return key

    def score_projected(self, query, projected_key):
        """Scores queries against keys already passed through `project_key`."""
        return self.call(query, projected_key)

    def compute_output_shape(self, query_shape, key_shape):
        return (query_shape[0], query_shape[1], key_shape[1])

    def compute_output_spec(self, query, key):
        dtype = self.compute_dtype
        if self.multiplies_vectors:
            dtype = score_dtype(dtype)
        shape = self.compute_output_shape(query.shape, key.shape)
        return keras.KerasTensor(shape, dtype=dtype)


def check_shapes(score, query_shape, key_shape):
    """Raises a clear `ValueError` when `query` and `key` cannot be scored."""
    name = type(score).__name__
    if len(query_shape) != 3 or len(key_shape) != 3:
        raise ValueError(
            f"{name} expects query (batch, Tq, Dq) and key (batch, Tv, Dk) "
            f"of rank 3. Received: query.shape={tuple(query_shape)}, "
            f"key.shape={tuple(key_shape)}"
        )
    qb, kb = query_shape[0], key_shape[0]
    if qb is not None and kb is not None and qb != kb:
        raise ValueError(
            f"{name}: query and key must have the same batch size. "
            f"Received: query.shape={tuple(query_shape)}, "
            f"key.shape={tuple(key_shape)}"
        )
    if score.requires_equal_dims and query_shape[-1] != key_shape[-1]:
        raise ValueError(
            f"{name} has no weights to compare vectors of different sizes: "
            f"the last dimensions of query and key must be equal. Received: "
            f"query.shape={tuple(query_shape)}, key.shape={tuple(key_shape)}. "
            "Use a parametrised score such as 'general' or 'additive'."
        )
