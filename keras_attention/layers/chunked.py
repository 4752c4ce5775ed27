"""Memory-efficient exact attention: queries and keys in chunks, online softmax.

`chunked_attention` computes `softmax(score(q, k), masked) v` without ever
holding the `(batch, heads, Tq, Tv)` score tensor: the queries are cut into
chunks of `query_chunk_size` rows, and each query chunk visits the keys
`key_chunk_size` at a time, keeping a running maximum and sum of the
exponentials (the online softmax of Rabe & Staats and of FlashAttention).
Memory is `O(B H (Tq + Tv) d + B H cq ck)` instead of `O(B H Tq Tv)`, in the
forward and in the backward pass.
"""

import collections
import math

from keras import ops

from keras_attention.arguments import int_argument
from keras_attention.layers.chunked_blocks import (
    Plan,
    check_options,
    dropout_keep_mask,
    fori,
    forward,
)
from keras_attention.layers.chunked_remat import rematerialised
from keras_attention.layers.masking import masked_softmax

__all__ = ["chunked_attention", "dropout_keep_mask"]

# The gradients of one key chunk, accumulated over the query chunks.
_KeyGrads = collections.namedtuple("_KeyGrads", ["key", "value"])


def chunked_attention(
    query,
    key,
    value,
    key_mask=None,
    query_mask=None,
    attention_mask=None,
    use_causal_mask=False,
    causal_offset=0,
    sliding_window=None,
    score_fn=None,
    scale=None,
    dropout_rate=0.0,
    seed=None,
    query_chunk_size=512,
    key_chunk_size=512,
    score_mod=None,
):
    """Exact softmax attention in `O(T)` memory, forward and backward.

    Equal, to float tolerance, to the explicit path: raw scores, masks,
    float32 softmax (masked entries get zero weight, a row with nothing to
    attend to gets a zero context and zero gradients), dropout on the
    weights, weighted sum of the values.

    Two gradient strategies, both linear in memory:

    - `score_fn=None` (dot product, times `scale`): a custom gradient in
      the manner of FlashAttention. The forward pass keeps only the context
      and the log-sum-exp of each row; the backward pass recomputes each
      block of probabilities from them.
    - a `score_fn` (any score that can be computed on chunks, e.g. a
      `keras_attention.scores` layer): each query chunk is rematerialised
      (`keras.remat`), so only its context is kept between the passes, and
      the gradient flows through `score_fn`, its weights included.

    When one chunk holds every query and every key (sequences no longer
    than the chunk sizes) there is nothing to save: that one block is
    computed as a plain masked softmax under autodiff, the cheapest exact
    form (same masks and dropout mask).

    Dropout drops each weight with probability `dropout_rate` from a
    counter-based hash of `(seed, batch * heads index, query position, key
    position)` (`dropout_keep_mask`), so the mask does not depend on the
    chunk sizes and the backward pass sees the forward's mask.

    Args:
        query: tensor `(B, Tq, D)` or `(B, Tq, heads, D)`.
        key: tensor `(B, Tv, D)` or `(B, Tv, heads, D)`.
        value: tensor `(B, Tv, Dv)` or `(B, Tv, heads, Dv)`.
        key_mask: optional boolean `(B, Tv)`, `True` = attend (padding).
        query_mask: optional boolean `(B, Tq)`; `False` rows get zeros.
        attention_mask: optional boolean `(Tq, Tv)`, `(B, Tq, Tv)` or
            `(B, heads, Tq, Tv)`, any dimension 1 to broadcast; it is read
            chunk by chunk, never broadcast to full size.
        use_causal_mask: bool. Query `i` sees keys `j <= i + causal_offset`;
            key chunks wholly above that line are skipped. Defaults to
            `False`.
        causal_offset: int. `0` aligns query 0 with key 0 (Keras's
            `MultiHeadAttention`); `Tv - Tq` aligns the last ones (decoding).
            Defaults to `0`.
        sliding_window: int or None. Query `i` sees only keys `j` with
            `|i + causal_offset - j| < sliding_window`, as Keras's
            `MultiHeadAttention(sliding_window=...)`. (Every key chunk is
            still visited; for a narrow window over a long self-attention,
            `windowed_attention` costs `O(T w)`.) Defaults to `None`.
        score_fn: optional callable `(q, k) -> scores` on head-folded
            chunks `(B * heads, cq, D)`, `(B * heads, ck, D)` ->
            `(B * heads, cq, ck)`: the contract of a
            `keras_attention.scores.Score` layer, which may be passed as is
            (built; it is built on the first chunk otherwise). Defaults to
            `None`: `scale * q k^T`.
        scale: float or None. Scale of the dot product when `score_fn` is
            `None`. Defaults to `None` (`1 / sqrt(D)`, scaled dot).
        dropout_rate: float in `[0, 1)`. Dropout on the attention weights;
            pass `0.0` outside training. Defaults to `0.0`.
        seed: int or int scalar tensor. Seed of the dropout, required when
            `dropout_rate > 0` (draw a fresh one per step, e.g.
            `keras.random.randint((), 0, 2**31 - 1, seed=seed_generator)`).
        query_chunk_size: int. Query rows per chunk. Defaults to `512`.
        key_chunk_size: int. Keys per chunk. Defaults to `512`.
        score_mod: optional callable `(scores, query_positions,
            key_positions) -> (scores, mask or None)` on each block's float32
            scores `(B, heads, cq, ck)`, with the block's query indices
            `(cq, 1)` and key indices `(1, ck)` (int32): a bias or cap from
            positions, never a `(Tq, Tv)` tensor
            (`keras_attention.layers.score_mods.Bound`). Gradients then go
            through it by rematerialisation, as with a `score_fn`.
            Defaults to `None`.

    Returns:
        The context, of the query's layout and the value's last dimension
        and dtype: `(B, Tq, Dv)` or `(B, Tq, heads, Dv)`.

    Example:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> q, k, v = (rng.normal(size=(2, 10, 4)).astype("float32") for _ in "qkv")
    >>> out = chunked_attention(q, k, v, use_causal_mask=True,
    ...                         query_chunk_size=4, key_chunk_size=3)
    >>> s = np.einsum("bqd,bkd->bqk", q, k) / 2.0 + np.triu(
    ...     np.full((10, 10), -np.inf), 1)
    >>> w = np.exp(s - s.max(-1, keepdims=True))
    >>> ref = np.einsum("bqk,bkd->bqd", w / w.sum(-1, keepdims=True), v)
    >>> bool(np.allclose(out, ref, atol=1e-5))
    True

    Reference:
        Rabe & Staats, 2021, "Self-attention Does Not Need O(n^2) Memory";
        Dao et al., 2022, "FlashAttention: Fast and Memory-Efficient Exact
        Attention with IO-Awareness".
    """
    rank = len(query.shape)
    if rank not in (3, 4) or len(key.shape) != rank or len(value.shape) != rank:
        raise ValueError(
            "query, key and value must all be (B, T, D) or all (B, T, heads, "
            f"D). Received: query.shape={tuple(query.shape)}, key.shape="
            f"{tuple(key.shape)}, value.shape={tuple(value.shape)}"
        )
    for name, size in (
        ("query_chunk_size", query_chunk_size),
        ("key_chunk_size", key_chunk_size),
    ):
        int_argument(name, size)
    check_options(dropout_rate, seed, score_fn, scale)
    if sliding_window is not None and (
        not isinstance(sliding_window, int)
        or isinstance(sliding_window, bool)
        or sliding_window < 1
    ):
        raise ValueError(
            "`sliding_window` must be a positive int or None. Received: "
            f"sliding_window={sliding_window!r}"
        )
    if not isinstance(causal_offset, int) or isinstance(causal_offset, bool):
        raise ValueError(
            f"`causal_offset` must be an int. Received: causal_offset={causal_offset!r}"
        )
    q_len, k_len = query.shape[1], key.shape[1]
    if q_len is None or k_len is None:
        raise ValueError(
            "chunked_attention needs static sequence lengths. Received: "
            f"query.shape={tuple(query.shape)}, key.shape={tuple(key.shape)}"
        )
    if rank == 3:
        query, key, value = (ops.expand_dims(x, 2) for x in (query, key, value))
    # (B, T, heads, D) -> (B, heads, T, D): each chunk is then contiguous.
    query, key, value = (ops.transpose(x, (0, 2, 1, 3)) for x in (query, key, value))
    if score_fn is None:
        depth = query.shape[-1]
        scale = 1.0 / math.sqrt(depth) if scale is None else float(scale)
        # Scaled before the custom gradient, so autodiff applies the scale.
        query = ops.multiply(query, ops.cast(scale, query.dtype))

    plan = Plan(
        query,
        key,
        value,
        key_mask,
        query_mask,
        attention_mask,
        use_causal_mask,
        causal_offset,
        sliding_window,
        score_fn,
        dropout_rate,
        seed,
        min(query_chunk_size, q_len),
        min(key_chunk_size, k_len),
        score_mod,
    )
    query, key, value = plan.pad(query, key, value)
    if plan.num_query_chunks == 1 and plan.num_key_chunks == 1:
        output = _one_block(plan, query, key, value)
    elif score_fn is None and score_mod is None:
        output = _flash(plan, query, key, value)
    else:
        output = rematerialised(plan, query, key, value)
    output = ops.transpose(output[:, :, :q_len], (0, 2, 1, 3))
    if rank == 3:
        output = ops.squeeze(output, 2)
    return output


def _one_block(plan, query, key, value):
    """Attention when one chunk holds every query and every key.

    The block's scores are the whole score matrix, so no chunking can save
    memory; a plain masked softmax, differentiated by autodiff (which keeps
    the probabilities instead of recomputing them), is the cheapest exact
    form. Same masks, empty rows (zeros) and dropout mask as the chunked
    loops.
    """
    weights = masked_softmax(*plan.block(query, key, 0, 0))
    weights = plan.dropout(weights, plan.keep(ops.shape(query)[0], 0, 0))
    return ops.matmul(ops.cast(weights, value.dtype), value)


def _flash(plan, query, key, value):
    """Dot-product attention with a recomputing custom gradient."""

    @ops.custom_gradient
    def attend(query, key, value):
        context, log_sum = forward(plan, query, key, value)

        def grad(*args, upstream=None):
            if upstream is None:
                (upstream,) = args
            grads = _backward(plan, query, key, value, context, log_sum, upstream)
            return tuple(
                ops.cast(g, x.dtype)
                for g, x in zip(grads, (query, key, value), strict=True)
            )

        return ops.cast(context, plan.value_dtype), grad

    return attend(query, key, value)


def _backward(plan, query, key, value, context, log_sum, upstream):
    """Gradients of `_flash` w.r.t. the scaled query, the key and the value.

    Two passes that recompute the probabilities of each block from the row
    log-sum-exp: over query chunks for `dq`, over key chunks for `dk, dv`;
    each writes its outputs once per chunk.
    """
    batch = ops.shape(query)[0]
    q_size, k_size = plan.query_chunk, plan.key_chunk
    query, key, value = (ops.cast(x, "float32") for x in (query, key, value))
    upstream = ops.cast(upstream, "float32")
    # sum_j P_ij dP_ij = rowsum(dO * O), also with dropout.
    delta = ops.sum(upstream * context, -1, keepdims=True)

    def block(q_start, k_start):
        """Probabilities, their dropped form and dP of one block."""
        q_chunk = plan.rows(query, q_start, q_size)
        k_chunk = plan.rows(key, k_start, k_size)
        v_chunk = plan.rows(value, k_start, k_size)
        d_out = plan.rows(upstream, q_start, q_size)
        scores, mask = plan.block(q_chunk, k_chunk, q_start, k_start)
        probs = ops.exp(scores - plan.rows(log_sum, q_start, q_size))
        if mask is not None:
            probs = ops.where(mask, probs, ops.zeros_like(probs))
        keep = plan.keep(batch, q_start, k_start)
        dropped = plan.dropout(probs, keep)
        d_probs = plan.dropout(ops.matmul(d_out, ops.swapaxes(v_chunk, -1, -2)), keep)
        d_scores = probs * (d_probs - plan.rows(delta, q_start, q_size))
        return q_chunk, k_chunk, d_out, dropped, d_scores

    def query_grads(i, d_query):
        q_start = i * q_size

        def key_chunk(j, grad):
            _, k_chunk, _, _, d_scores = block(q_start, j * k_size)
            return grad + ops.matmul(d_scores, k_chunk)

        start = ops.zeros((batch, plan.heads, q_size, plan.depth), "float32")
        grad = fori(0, plan.key_stop(i), key_chunk, start, plan.num_key_chunks)
        if d_query is None:
            return grad
        return ops.slice_update(d_query, (0, 0, q_start, 0), grad)

    def key_grads(j, buffers):
        k_start = j * k_size

        def query_chunk(i, grads):
            q_chunk, _, d_out, dropped, d_scores = block(i * q_size, k_start)
            d_key = grads.key + ops.matmul(ops.swapaxes(d_scores, -1, -2), q_chunk)
            d_value = grads.value + ops.matmul(ops.swapaxes(dropped, -1, -2), d_out)
            return _KeyGrads(d_key, d_value)

        rows = (batch, plan.heads, k_size)
        start = _KeyGrads(
            ops.zeros((*rows, plan.depth), "float32"),
            ops.zeros((*rows, plan.value_depth), "float32"),
        )
        grads = fori(
            plan.query_start(j),
            plan.num_query_chunks,
            query_chunk,
            start,
            plan.num_query_chunks,
        )
        if buffers is None:
            return grads
        d_keys, d_values = buffers
        d_keys = ops.slice_update(d_keys, (0, 0, k_start, 0), grads.key)
        d_values = ops.slice_update(d_values, (0, 0, k_start, 0), grads.value)
        return d_keys, d_values

    if plan.num_query_chunks == 1:
        d_query = query_grads(0, None)
    else:
        d_query = ops.fori_loop(
            0, plan.num_query_chunks, query_grads, ops.zeros_like(query)
        )
    if plan.num_key_chunks == 1:
        d_key, d_value = key_grads(0, None)
    else:
        d_key, d_value = ops.fori_loop(
            0,
            plan.num_key_chunks,
            key_grads,
            (ops.zeros_like(key), ops.zeros_like(value)),
        )
    return d_query, d_key, d_value
