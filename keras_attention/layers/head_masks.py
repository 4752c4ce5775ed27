"""The masks of multi-head attention, checked and merged into one per head.

Masks are boolean, `True` = attend. `MultiHeadAttention` takes Keras's
padding masks (`query_mask`, `value_mask`, `key_mask`), an `attention_mask`
of rank 2 to 4 (per head), the causal mask and the bands of `sliding_window`
and `window`; a fused kernel is handed as little of them as it needs.
"""

from keras import ops


def merge_head_masks(
    query,
    key,
    num_heads,
    query_mask=None,
    value_mask=None,
    key_mask=None,
    attention_mask=None,
    use_causal_mask=False,
    cache_update_index=None,
    sliding_window=None,
    window=None,
    fused=False,
):
    """Merges every mask of a multi-head attention for its attention hook.

    The masks are as `MultiHeadAttention.call` takes them; `key` is read
    for its length only (`(B, Tv, ...)`); a cache's `cache_update_index`
    shifts the queries to their absolute positions; `fused`: whether the
    call takes the fused kernel, which applies a lone causal mask by
    itself and averages fully masked rows.

    All the decisions are on static shapes and Python values. Returns
    `(mask, causal_only, row_valid)`:

    - `mask`: None, `(B, Tq, Tv)` or, with a 4-D `attention_mask`,
      `(B, num_heads, Tq, Tv)`, any of them possibly 1 (broadcast).
    - `causal_only`: the causal mask is the only one and the fused kernel
      applies it by itself (then `mask` is None).
    - `row_valid`: on the fused path, which query rows have a key to
      attend to, `(B or 1, Tq or 1, 1)` (`(B, num_heads, Tq, 1)` with a
      4-D mask, any of them possibly 1), for the caller to repair the rows
      the kernel averages uniformly; else None.
    """
    value_mask = key_padding_mask(value_mask, key_mask, key)
    if attention_mask is not None:
        attention_mask = check_attention_mask(attention_mask, query, key, num_heads)
    no_pairwise_mask = (
        attention_mask is None and sliding_window is None and window is None
    )
    if (
        fused
        and use_causal_mask
        and no_pairwise_mask
        and query_mask is None
        and value_mask is None
        and cache_update_index is None
    ):
        return None, True, None
    if fused and no_pairwise_mask and not use_causal_mask:
        # Padding masks only: the kernel gets the `(B, 1, Tv)` key mask
        # (broadcast over queries, no `(B, Tq, Tv)` tensor), and which
        # rows have anything to attend to follows from the 1-D masks,
        # O(B * (Tq + Tv)).
        keys = None if value_mask is None else ops.cast(value_mask, "bool")
        mask = None if keys is None else ops.expand_dims(keys, 1)
        return mask, False, rows_with_keys(query_mask, mask)

    parts = []
    if query_mask is not None:
        parts.append(ops.expand_dims(ops.cast(query_mask, "bool"), -1))
    if value_mask is not None:
        parts.append(ops.expand_dims(ops.cast(value_mask, "bool"), -2))
    # Keras's alignment, query 0 with key 0; a cache shifts the queries
    # to their absolute positions.
    offset = 0 if cache_update_index is None else cache_update_index
    if use_causal_mask or sliding_window is not None or window:
        rows = ops.arange(ops.shape(query)[1]) + offset
        distance = rows[:, None] - ops.arange(ops.shape(key)[1])[None, :]
        if use_causal_mask:
            parts.append(ops.expand_dims(distance >= 0, 0))
        if sliding_window is not None:
            parts.append(ops.expand_dims(ops.abs(distance) < sliding_window, 0))
        if window is not None:
            parts.append(ops.expand_dims(ops.abs(distance) <= window, 0))
    per_head = attention_mask is not None and len(attention_mask.shape) == 4
    mask = attention_mask
    for part in parts:
        if per_head:
            part = ops.expand_dims(part, 1)
        mask = part if mask is None else ops.logical_and(mask, part)
    row_valid = None
    if fused and mask is not None:
        row_valid = ops.any(mask, axis=-1, keepdims=True)
    return mask, False, row_valid


def check_attention_mask(attention_mask, query, key, num_heads):
    """Checks the shape of `attention_mask`; returns it bool, of rank >= 3.

    Keras's shapes: `(Tq, Tv)`, `(B, Tq, Tv)` or `(B, num_heads, Tq,
    Tv)`, each dimension equal to that size or 1 (broadcast).
    """
    attention_mask = ops.cast(attention_mask, "bool")
    shape = tuple(attention_mask.shape)
    batch, q_len, k_len = query.shape[0], query.shape[1], key.shape[1]
    expected = {
        2: (q_len, k_len),
        3: (batch, q_len, k_len),
        4: (batch, num_heads, q_len, k_len),
    }.get(len(shape))
    if expected is None or any(
        m is not None and e is not None and m not in (1, e)
        for m, e in zip(shape, expected, strict=True)
    ):
        raise ValueError(
            "`attention_mask` must have shape (Tq, Tv), (B, Tq, Tv) or "
            "(B, num_heads, Tq, Tv), each dimension equal to that size or "
            f"1, here with B={batch}, num_heads={num_heads}, "
            f"Tq={q_len}, Tv={k_len} (with a cache, Tv is its "
            f"max_length). Received: attention_mask.shape={shape}"
        )
    if len(shape) == 2:
        attention_mask = ops.expand_dims(attention_mask, 0)
    return attention_mask


def key_padding_mask(value_mask, key_mask, key):
    """`value_mask` and `key_mask` merged, `(B, Tv)` (or None), length checked."""
    if key_mask is not None:
        value_mask = (
            key_mask
            if value_mask is None
            else ops.logical_and(
                ops.cast(value_mask, "bool"), ops.cast(key_mask, "bool")
            )
        )
    if value_mask is not None:
        length, mask_length = key.shape[1], value_mask.shape[-1]
        if None not in (length, mask_length) and length != mask_length:
            raise ValueError(
                "`value_mask`/`key_mask` must cover every key position "
                f"({length}; with a cache, its max_length). Received a "
                f"mask of shape {tuple(value_mask.shape)}."
            )
    return value_mask


def causal_mask(query_length, key_length):
    """`(1, Tq, Tv)` bool: query `i` sees keys `j <= i` (Keras's alignment)."""
    rows = ops.arange(query_length)[:, None]
    return ops.expand_dims(rows >= ops.arange(key_length)[None, :], 0)


def rows_with_keys(query_mask, keys):
    """`(B, Tq, 1)` or `(B, 1, 1)` bool: rows with a key under padding masks.

    `keys`: None or the `(B, 1, Tv)` key mask; the trailing axis is the one
    `where` broadcasts over the output's features.
    """
    rows = None if keys is None else ops.any(keys, axis=-1, keepdims=True)
    if query_mask is not None:
        query_mask = ops.expand_dims(ops.cast(query_mask, "bool"), -1)
        rows = query_mask if rows is None else ops.logical_and(query_mask, rows)
    return rows
