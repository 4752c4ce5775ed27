"""One-head attention through the backend's fused kernel.

`Attention` and `ImageSelfAttention` take this path where their score is a
(scaled) dot product and `keras_attention.layers.dispatch` says the
backend's `keras.ops.dot_product_attention` is memory-efficient for the
device, dtype and mask; on their chunked path, JAX's Triton flash kernel
where `dispatch.triton_flash_applies` (`triton_attention`).
`MultiHeadAttention` calls the kernels itself, on its heads.
"""

import math

from keras import ops

from keras_attention import scores
from keras_attention.layers import dispatch


def dot_product_scale(score, key_dim):
    """The scale of `score` when it is a scaled dot product, else None.

    `ScaledDot` is `1 / sqrt(key_dim)`, `Dot` without a learned scale is
    1; every other score (a learned scalar, projections, a norm, a
    position) has no fused kernel.

    >>> dot_product_scale(scores.ScaledDot(), 16), dot_product_scale(scores.Dot(), 16)
    (0.25, 1.0)
    >>> dot_product_scale(scores.General(), 16) is None
    True
    """
    if isinstance(score, scores.ScaledDot):
        return 1.0 / math.sqrt(key_dim)
    if isinstance(score, scores.Dot) and not score.use_scale:
        return 1.0
    return None


def fused_attention(
    query,
    key,
    value,
    scale,
    key_mask=None,
    query_mask=None,
    attention_mask=None,
    use_causal_mask=False,
):
    """`softmax(scale q k^T) v` of one head by `keras.ops.dot_product_attention`.

    A row with nothing to attend to gives zeros, as the explicit path's
    masked softmax does (the kernels average such a row uniformly). Values
    of another width than the queries and keys are exact too: the narrower
    side is padded with zero channels, which change no score and no
    output (fused kernels want one head width).

    Args:
        query: tensor `(batch, Tq, D)`.
        key: tensor `(batch, Tv, D)`.
        value: tensor `(batch, Tv, Dv)`.
        scale: float. The factor of `q k^T`.
        key_mask: optional boolean `(batch, Tv)`, `True` = attend.
        query_mask: optional boolean `(batch, Tq)`; `False` rows are zero.
        attention_mask: optional boolean `([batch or 1,] Tq, Tv)`, every
            mask already merged into it (then `key_mask` and
            `use_causal_mask` are not given).
        use_causal_mask: bool. Query `i` attends to keys `j <= i`,
            aligned at the first query and key.

    Returns:
        The context `(batch, Tq, Dv)`.
    """
    value_width = value.shape[-1]
    query, key, value = _one_width(query, key, value)
    mask, valid = None, None
    if attention_mask is not None:
        mask = ops.cast(attention_mask, "bool")
        if len(mask.shape) == 2:
            mask = mask[None]
        valid = ops.any(mask, axis=-1)
        mask = mask[:, None]
    elif key_mask is not None:
        keys = ops.cast(key_mask, "bool")
        mask = keys[:, None, None, :]
        valid = ops.any(keys, axis=-1, keepdims=True)
    if query_mask is not None:
        rows = ops.cast(query_mask, "bool")
        valid = rows if valid is None else ops.logical_and(valid, rows)
    context = ops.dot_product_attention(
        query[:, :, None, :],
        key[:, :, None, :],
        value[:, :, None, :],
        mask=mask,
        scale=scale,
        is_causal=use_causal_mask,
    )
    context = context[:, :, 0, :value_width]
    if valid is not None:
        context = ops.where(valid[..., None], context, ops.zeros_like(context))
    return context


def triton_attention(
    query, key, value, scale, padding="none", query_mask=None, use_causal_mask=False
):
    """`softmax(scale q k^T) v` of one head by JAX's Triton flash kernel.

    None where the kernel does not apply on this backend and device
    (`dispatch.triton_flash_applies`); the caller then takes its chunked
    loop. Widths as in `fused_attention`: the narrower side gets zero
    channels.

    Args:
        query: tensor `(batch, Tq, D)`.
        key: tensor `(batch, Tv, D)`.
        value: tensor `(batch, Tv, Dv)`.
        scale: float. The factor of `q k^T`.
        padding: str or None. `dispatch.triton_padding` of the call's masks,
            as given.
        query_mask: optional boolean `(batch, Tq)`; `False` rows are zero.
            With `padding="shared"`, also the keys' mask.
        use_causal_mask: bool. Query `i` attends to keys `j <= i`.

    Returns:
        The context `(batch, Tq, Dv)`, or None.
    """
    value_width = value.shape[-1]
    depth = max(query.shape[-1], value_width)
    if not dispatch.triton_flash_applies_here(
        query, key, depth, use_causal_mask, padding
    ):
        return None
    query, key, value = _one_width(query, key, value)
    context = dispatch.triton_flash_attention(
        query[:, :, None, :],
        key[:, :, None, :],
        value[:, :, None, :],
        use_causal_mask,
        scale,
        query_mask,
        shared_mask=padding == "shared",
    )
    return context[:, :, 0, :value_width]


def _one_width(query, key, value):
    """`query`, `key`, `value` `(batch, T, width)` padded with zero channels
    to one width: zeros change no score and no output."""
    width, value_width = query.shape[-1], value.shape[-1]
    if width < value_width:
        pad = [(0, 0), (0, 0), (0, value_width - width)]
        query, key = ops.pad(query, pad), ops.pad(key, pad)
    elif value_width < width:
        value = ops.pad(value, [(0, 0), (0, 0), (0, width - value_width)])
    return query, key, value
