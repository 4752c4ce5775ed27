"""Restricted (windowed) self-attention in blocks: O(r T d), not a masked T x T."""

import math

from keras import ops

from keras_attention.arguments import int_argument
from keras_attention.layers.chunked_blocks import check_options, four_d_mask, keep_block
from keras_attention.layers.masking import masked_softmax


def windowed_attention(
    query,
    key,
    value,
    radius,
    causal=False,
    key_mask=None,
    query_mask=None,
    attention_mask=None,
    score_fn=None,
    scale=None,
    dropout_rate=0.0,
    seed=None,
    score_mod=None,
):
    """Self-attention where each position sees only the keys within `radius`.

    Query `i` attends to keys `j` with `|i - j| <= radius`, or, with
    `causal=True`, `i - radius <= j <= i`. The sequence is cut into blocks
    of `w = max(radius, 1)` positions; each block of queries scores its own
    block of keys and its neighbours (the previous one, and the next one
    unless causal), a window of `3w` (`2w`) keys, with a band mask inside
    it. Time and memory are `O(T w d)`: linear in `T`. The weights are the
    float32 masked softmax over the window (a row with nothing to attend to
    gets zeros), then dropout, as in `chunked_attention` (same
    `dropout_keep_mask` draws, so the two paths drop the same entries).
    Gradients are plain autodiff (the residuals are `O(T w)` already).

    Keras's `MultiHeadAttention(sliding_window=s)` keeps keys less than `s`
    positions away: `radius = s - 1`.

    Args:
        query: tensor `(B, T, D)` or `(B, T, heads, D)`.
        key: tensor of the query's shape (self-attention: same `T`).
        value: tensor `(B, T, Dv)` or `(B, T, heads, Dv)`.
        radius: int >= 0. How far a query looks, in positions.
        causal: bool. Look back only. Defaults to `False`.
        key_mask: optional boolean `(B, T)`, `True` = attend (padding).
        query_mask: optional boolean `(B, T)`; `False` rows get zeros.
        attention_mask: optional boolean `(T, T)`, `(B, T, T)` or
            `(B, heads, T, T)`, any dimension 1 to broadcast, `True` =
            attend; ANDed with the band. Only its band is read (gathered
            block by block), never broadcast to full size.
        score_fn: optional callable on head-folded blocks, `(N, w, D)`,
            `(N, 3w, D)` -> `(N, w, 3w)`: a built
            `keras_attention.scores.Score` layer may be passed as is.
            Defaults to `None`: `scale * q k^T`.
        scale: float or None. Scale of the dot product when `score_fn` is
            `None`. Defaults to `None` (`1 / sqrt(D)`).
        dropout_rate: float in `[0, 1)`. Dropout on the weights; pass `0.0`
            outside training. Defaults to `0.0`.
        seed: int or int scalar tensor; required with dropout.
        score_mod: optional callable `(scores, query_positions,
            key_positions) -> (scores, mask or None)`, as in
            `chunked_attention`, on the windows' float32 scores `(B, heads,
            n, w, span)` with the positions `(n, w, 1)` and `(n, 1, span)`.
            Defaults to `None`.

    Returns:
        The context, of the query's layout and the value's last dimension
        and dtype.

    Example:
    >>> import numpy as np
    >>> x = np.random.default_rng(0).normal(size=(1, 9, 4)).astype("float32")
    >>> out = windowed_attention(x, x, x, radius=2, causal=True)
    >>> tuple(out.shape)
    (1, 9, 4)
    >>> # The first position sees only itself: its context is its own value.
    >>> bool(np.allclose(out[0, 0], x[0, 0], atol=1e-6))
    True

    Reference:
        Vaswani et al., 2017, "Attention Is All You Need", section 4
        (restricted self-attention); Beltagy et al., 2020, "Longformer".
    """
    rank = len(query.shape)
    if rank not in (3, 4) or len(key.shape) != rank or len(value.shape) != rank:
        raise ValueError(
            "query, key and value must all be (B, T, D) or all (B, T, heads, "
            f"D). Received: query.shape={tuple(query.shape)}, key.shape="
            f"{tuple(key.shape)}, value.shape={tuple(value.shape)}"
        )
    radius = int_argument("radius", radius, minimum=0)
    length = query.shape[1]
    if length is None or key.shape[1] != length or value.shape[1] != length:
        raise ValueError(
            "windowed_attention is self-attention over a static length: "
            "query, key and value need the same, known T. Received: "
            f"query.shape={tuple(query.shape)}, key.shape={tuple(key.shape)}, "
            f"value.shape={tuple(value.shape)}"
        )
    check_options(dropout_rate, seed, score_fn, scale)
    if rank == 3:
        query, key, value = (ops.expand_dims(x, 2) for x in (query, key, value))
    heads, depth = query.shape[2], query.shape[3]
    width = max(radius, 1)
    num_blocks = -(-length // width)
    pad = num_blocks * width - length
    span = (2 if causal else 3) * width

    def blocks(x):
        """(B, T, heads, d) -> (B, heads, n, w, d)."""
        x = ops.pad(x, ((0, 0), (0, pad), (0, 0), (0, 0)))
        x = ops.reshape(x, (-1, num_blocks, width, heads, x.shape[-1]))
        return ops.transpose(x, (0, 3, 1, 2, 4))

    q_blocks = blocks(query)
    k_window = _with_neighbours(blocks(key), 2, causal)
    v_window = _with_neighbours(blocks(value), 2, causal)

    if score_fn is None:
        scale = 1.0 / math.sqrt(depth) if scale is None else float(scale)
        q_blocks = ops.multiply(q_blocks, ops.cast(scale, q_blocks.dtype))
        raw = ops.matmul(q_blocks, ops.swapaxes(k_window, -1, -2))
    else:
        raw = score_fn(
            ops.reshape(q_blocks, (-1, width, depth)),
            ops.reshape(k_window, (-1, span, depth)),
        )
        raw = ops.reshape(raw, (-1, heads, num_blocks, width, span))

    # Absolute positions: query (n, w, 1), key (n, 1, span).
    rows = ops.reshape(ops.arange(num_blocks * width, dtype="int32"), (-1, width, 1))
    first_key = (ops.arange(num_blocks, dtype="int32") - 1) * width
    cols = (first_key[:, None] + ops.arange(span, dtype="int32")[None, :])[:, None, :]
    distance = rows - cols
    band = ops.less_equal(distance, radius)
    band = ops.logical_and(band, ops.greater_equal(distance, 0 if causal else -radius))
    band = ops.logical_and(band, ops.logical_and(cols >= 0, cols < length))
    mask = band[None, None]
    if score_mod is not None:
        raw, extra = score_mod(raw, rows, cols)
        if extra is not None:
            mask = ops.logical_and(mask, extra)
    if key_mask is not None:
        keys = ops.pad(ops.cast(key_mask, "bool"), ((0, 0), (0, pad)))
        keys = _with_neighbours(ops.reshape(keys, (-1, num_blocks, width)), 1, causal)
        mask = ops.logical_and(mask, keys[:, None, :, None, :])
    if query_mask is not None:
        queries = ops.pad(ops.cast(query_mask, "bool"), ((0, 0), (0, pad)))
        queries = ops.reshape(queries, (-1, 1, num_blocks, width, 1))
        mask = ops.logical_and(mask, queries)
    if attention_mask is not None:
        pairs = _band_of(attention_mask, heads, length, width, span, causal)
        mask = ops.logical_and(mask, pairs)

    weights = ops.cast(masked_softmax(raw, mask), value.dtype)
    if dropout_rate:
        batch = ops.shape(q_blocks)[0]
        bh = ops.reshape(
            ops.arange(batch * heads, dtype="int32"), (batch, heads, 1, 1, 1)
        )
        keep = keep_block(seed, bh, rows, cols, dropout_rate)
        weights = ops.where(keep, weights / (1.0 - dropout_rate), 0.0)
    context = ops.matmul(weights, v_window)  # (B, heads, n, w, Dv)
    context = ops.transpose(context, (0, 2, 3, 1, 4))
    context = ops.reshape(context, (-1, num_blocks * width, heads, value.shape[-1]))
    context = context[:, :length]
    if rank == 3:
        context = ops.squeeze(context, 2)
    return context


def check_window(window):
    """Checks a layer's `window` argument: a positive int or None."""
    return int_argument("window", window, allowed=(None,))


def _band_of(attention_mask, heads, length, width, span, causal):
    """The window of each query block in a `(.., T, T)` mask: `(B, h, n, w, span)`.

    Dimensions of size 1 stay 1 (broadcast). Block `n`'s keys start at
    `(n - 1) w`; columns outside `[0, T)` read as False (the band mask
    drops them anyway).
    """
    mask, shape = four_d_mask(attention_mask, "(T, T), (B, T, T) or (B, heads, T, T)")
    _, mask_heads, rows, cols = mask.shape
    if (
        mask_heads not in (1, heads)
        or rows not in (1, length)
        or cols not in (1, length)
    ):
        raise ValueError(
            f"`attention_mask` does not broadcast to (B, {heads}, {length}, "
            f"{length}). Received: attention_mask.shape={shape}"
        )
    num_blocks = -(-length // width)
    padded = num_blocks * width
    if rows == 1 and cols == 1:
        return mask[:, :, :, :, None]
    if rows == 1:
        # The same row for every query: the keys' blocks and neighbours.
        mask = ops.pad(mask[:, :, 0], ((0, 0), (0, 0), (0, padded - length)))
        mask = ops.reshape(mask, (-1, mask_heads, num_blocks, width))
        return _with_neighbours(mask, 2, causal)[:, :, :, None, :]
    mask = ops.pad(mask, ((0, 0), (0, 0), (0, padded - length), (0, 0)))
    mask = ops.reshape(mask, (-1, mask_heads, num_blocks, width, cols))
    if cols == 1:
        return mask
    # Columns shifted by one block, so block n's window starts at n * w.
    mask = ops.pad(mask, ((0, 0),) * 4 + ((width, padded - length + width),))
    starts = ops.arange(num_blocks, dtype="int32") * width
    index = starts[:, None] + ops.arange(span, dtype="int32")[None, :]
    index = ops.broadcast_to(
        ops.reshape(index, (1, 1, num_blocks, 1, span)),
        (ops.shape(mask)[0], mask_heads, num_blocks, width, span),
    )
    return ops.take_along_axis(mask, index, axis=-1)


def _with_neighbours(blocks, axis, causal):
    """Each block next to its previous (and, unless causal, next) block.

    `blocks` has the block index on `axis` and the positions on `axis + 1`;
    the result has `2w` or `3w` positions there, zero blocks past the ends.
    """
    widths = [(0, 0)] * len(blocks.shape)
    widths[axis] = (1, 1)
    padded = ops.pad(blocks, widths)
    size = blocks.shape[axis]

    def take(start):
        index = [slice(None)] * len(blocks.shape)
        index[axis] = slice(start, start + size)
        return padded[tuple(index)]

    parts = [take(0), blocks] if causal else [take(0), blocks, take(2)]
    return ops.concatenate(parts, axis=axis + 1)
