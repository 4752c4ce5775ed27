"""Mask merging and masked softmax shared by every attention layer.

Masks are boolean with `True` meaning "may attend" (Keras convention).
"""

from keras import ops


def merge_masks(
    query,
    value,
    query_mask=None,
    value_mask=None,
    attention_mask=None,
    use_causal_mask=False,
):
    """Combines every kind of mask into one `(batch, Tq, Tv)` boolean mask.

    Args:
        query: tensor `(batch, Tq, ...)`.
        value: tensor `(batch, Tv, ...)`.
        query_mask: optional `(batch, Tq)` mask of valid query positions.
        value_mask: optional `(batch, Tv)` mask of valid value positions.
        attention_mask: optional `(batch, Tq, Tv)` (or broadcastable) mask.
        use_causal_mask: bool. Position `i` may only attend to `j <= i`
            (aligned at the end when `Tq < Tv`, as in incremental decoding).

    Returns:
        A boolean tensor broadcastable to `(batch, Tq, Tv)`, or `None` when
        no mask applies.
    """
    mask = None

    def combine(a, b):
        return b if a is None else ops.logical_and(a, b)

    if query_mask is not None:
        mask = combine(mask, ops.expand_dims(ops.cast(query_mask, "bool"), -1))
    if value_mask is not None:
        mask = combine(mask, ops.expand_dims(ops.cast(value_mask, "bool"), -2))
    if attention_mask is not None:
        mask = combine(mask, ops.cast(attention_mask, "bool"))
    if use_causal_mask:
        mask = combine(mask, causal_mask(ops.shape(query)[1], ops.shape(value)[1]))
    return mask


def causal_mask(query_length, value_length):
    """Lower-triangular `(1, Tq, Tv)` mask, aligned at the last position."""
    rows = ops.expand_dims(ops.arange(query_length), -1)
    cols = ops.expand_dims(ops.arange(value_length), 0)
    return ops.expand_dims(rows + (value_length - query_length) >= cols, 0)


def masked_softmax(scores, mask=None, axis=-1):
    """Softmax in float32 where masked entries get exactly zero weight.

    A row in which every entry is masked yields all zeros, never NaN.

    Args:
        scores: float tensor of raw scores.
        mask: optional boolean tensor broadcastable to `scores`.
        axis: int. Axis to normalise over. Defaults to `-1`.

    Returns:
        float32 weights of the shape of `scores`.
    """
    scores = ops.cast(scores, "float32")
    if mask is None:
        return ops.softmax(scores, axis=axis)
    mask = ops.broadcast_to(ops.cast(mask, "bool"), ops.shape(scores))
    # The most negative float32 keeps exp() at exactly zero without -inf.
    filled = ops.where(mask, scores, ops.full_like(scores, -1e30))
    weights = ops.softmax(filled, axis=axis)
    return ops.where(mask, weights, ops.zeros_like(weights))
