"""The range a score needs under mixed precision: float32 for float16 products.

float16 tops out at 65504, so the dot product of two float16 vectors
overflows to `inf` as soon as `|s| |h|` passes it, e.g. vectors of 16
entries of size 100 (their product is 160000), and the softmax of a row
holding `inf` is NaN. That is what `keras.layers.Attention`,
`keras.layers.MultiHeadAttention` and a plain `ops.matmul` give under the
`"mixed_float16"` policy once inputs are about 100x unit scale. The scores
that multiply a query by a key (`Dot`, `ScaledDot`, `General`) therefore
run that product in float32 when their inputs are float16 and return
float32 scores; float32 holds `|s| |h|` for every pair of finite float16
vectors (at most 65504^2 times the width). bfloat16 has float32's range
and is left as it is. The cast is of the `(batch, T, D)` inputs, not of
the `(batch, Tq, Tv)` scores, which the softmax reads in float32 anyway.
"""

import keras
from keras import ops


def score_dtype(dtype):
    """The dtype in which to multiply query and key vectors of `dtype`.

    Args:
        dtype: a dtype or its name.

    Returns:
        `"float32"` for float16, the standardized `dtype` otherwise.

    Example:
    >>> score_dtype("float16"), score_dtype("bfloat16")
    ('float32', 'bfloat16')
    """
    dtype = keras.backend.standardize_dtype(dtype)
    return "float32" if dtype == "float16" else dtype


def widen(x):
    """`x` cast to `score_dtype(x.dtype)`: float16 becomes float32.

    Call it on the query and the key before their product (a matmul or an
    einsum); other tensors are returned unchanged.

    Args:
        x: a tensor.

    Returns:
        The tensor, in float32 if it was float16.
    """
    dtype = score_dtype(x.dtype)
    if dtype == keras.backend.standardize_dtype(x.dtype):
        return x
    return ops.cast(x, dtype)


def dot_scores(query, key):
    """`query @ key^T` over the last axis, in float32 for float16 inputs.

    Args:
        query: tensor `(..., Tq, D)`.
        key: tensor `(..., Tv, D)`.

    Returns:
        Scores `(..., Tq, Tv)`, float32 when the inputs are float16.

    Example:
    >>> import numpy as np
    >>> query = np.full((1, 1, 16), 100.0, "float16")
    >>> float(ops.matmul(query, ops.swapaxes(query, -1, -2))[0, 0, 0])
    inf
    >>> scores = dot_scores(query, query)
    >>> keras.backend.standardize_dtype(scores.dtype), float(scores[0, 0, 0])
    ('float32', 160000.0)
    """
    return ops.matmul(widen(query), ops.swapaxes(widen(key), -1, -2))
