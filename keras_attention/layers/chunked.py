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

import keras
from keras import ops

from keras_attention.arguments import int_argument
from keras_attention.layers.masking import masked_softmax

# Fill of masked float32 scores: exp(fill - max) underflows to exactly zero
# without the NaNs that -inf gives on a fully masked row.
_NEG = -1e30

# The online softmax state of one query chunk: the unnormalised context
# `sum_j exp(s_j - maximum) v_j`, the running row maximum of the scores, and
# the running sum `sum_j exp(s_j - maximum)`.
_Running = collections.namedtuple("_Running", ["context", "maximum", "total"])
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
    _check_options(dropout_rate, seed, score_fn, scale)
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

    plan = _Plan(
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
        output = _rematerialised(plan, query, key, value)
    output = ops.transpose(output[:, :, :q_len], (0, 2, 1, 3))
    if rank == 3:
        output = ops.squeeze(output, 2)
    return output


def dropout_keep_mask(seed, shape, rate, query_start=0, key_start=0):
    """The dropout keep mask of `chunked_attention`, for a block or in full.

    A counter-based hash of `(seed, b * heads + h, query position, key
    position)`, uniform in `[0, 1)` with 24 bits, kept where `>= rate`: the
    same entry gets the same draw whatever the chunking, so a full-path
    reference (or the explicit path of a layer) can reproduce the chunked
    path's dropout exactly.

    Args:
        seed: int or int scalar tensor.
        shape: `(B, heads, Tq, Tv)` of the block.
        rate: float in `[0, 1)`.
        query_start: int or int tensor. Position of the block's first query.
            Defaults to `0`.
        key_start: int or int tensor. Position of the block's first key.
            Defaults to `0`.

    Returns:
        A boolean tensor of `shape`, `True` = kept.

    Example:
    >>> keep = dropout_keep_mask(7, (2, 3, 64, 64), rate=0.25)
    >>> kept = float(keras.ops.mean(keras.ops.cast(keep, "float32")))
    >>> abs(kept - 0.75) < 0.01
    True
    """
    batch, heads, rows, cols = shape
    bh = ops.reshape(ops.arange(batch * heads, dtype="int32"), (batch, heads, 1, 1))
    rows = ops.arange(rows, dtype="int32")[:, None] + ops.cast(query_start, "int32")
    cols = ops.arange(cols, dtype="int32")[None, :] + ops.cast(key_start, "int32")
    return _keep(seed, bh, rows, cols, rate)


def _check_options(dropout_rate, seed, score_fn, scale):
    """Checks the dropout and score arguments shared with windowed attention."""
    if score_fn is not None and scale is not None:
        raise ValueError(
            "`scale` applies to the default dot-product score only; fold it "
            f"into `score_fn`. Received: scale={scale!r}"
        )
    if not 0.0 <= dropout_rate < 1.0:
        raise ValueError(
            f"`dropout_rate` must be in [0, 1). Received: dropout_rate={dropout_rate!r}"
        )
    if dropout_rate > 0.0 and seed is None:
        raise ValueError(
            "Dropout needs a `seed` (an int or int scalar tensor, fresh at "
            "each training step). Received: seed=None"
        )


def _mix(x):
    """The lowbias32 integer hash on int32 bits (wrapping multiplications)."""
    x = ops.bitwise_xor(x, ops.bitwise_and(ops.right_shift(x, 16), 0xFFFF))
    x = ops.multiply(x, 0x7FEB352D)
    x = ops.bitwise_xor(x, ops.bitwise_and(ops.right_shift(x, 15), 0x1FFFF))
    x = ops.multiply(x, 0x846CA68B - 2**32)
    return ops.bitwise_xor(x, ops.bitwise_and(ops.right_shift(x, 16), 0xFFFF))


def _keep(seed, bh, rows, cols, rate):
    """Keep mask from broadcastable int32 ids; see `dropout_keep_mask`."""
    seed = _mix(ops.cast(seed, "int32"))
    row_hash = _mix(ops.bitwise_xor(_mix(ops.bitwise_xor(bh, seed)), _mix(rows)))
    bits = _mix(ops.bitwise_xor(row_hash, _mix(ops.add(cols, 0x3C6EF372))))
    uniform = ops.cast(ops.bitwise_and(bits, 0xFFFFFF), "float32") / float(2**24)
    return ops.greater_equal(uniform, rate)


class _Plan:
    """Chunk sizes, padded masks and the per-block score, mask and dropout."""

    def __init__(
        self,
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
        query_chunk,
        key_chunk,
        score_mod=None,
    ):
        self.heads = query.shape[1]
        self.depth, self.value_depth = query.shape[-1], value.shape[-1]
        self.q_len, self.k_len = query.shape[2], key.shape[2]
        self.query_chunk, self.key_chunk = query_chunk, key_chunk
        self.num_query_chunks = -(-self.q_len // query_chunk)
        self.num_key_chunks = -(-self.k_len // key_chunk)
        self.q_pad = self.num_query_chunks * query_chunk - self.q_len
        self.k_pad = self.num_key_chunks * key_chunk - self.k_len
        self.causal = use_causal_mask
        self.offset = causal_offset
        self.window = sliding_window
        self.score_fn = score_fn
        self.score_mod = score_mod
        self.rate = float(dropout_rate)
        self.seed = seed
        self.value_dtype = value.dtype

        if key_mask is None and self.k_pad:
            key_mask = ops.ones((1, self.k_len), "bool")
        self.key_mask = None
        if key_mask is not None:
            key_mask = ops.pad(ops.cast(key_mask, "bool"), ((0, 0), (0, self.k_pad)))
            self.key_mask = key_mask[:, None, None, :]
        self.query_mask = None
        if query_mask is not None:
            query_mask = ops.pad(
                ops.cast(query_mask, "bool"), ((0, 0), (0, self.q_pad))
            )
            self.query_mask = query_mask[:, None, :, None]
        self.pair_mask = None
        if attention_mask is not None:
            self.pair_mask = self._pad_pair_mask(attention_mask)

    def _pad_pair_mask(self, mask):
        mask = ops.cast(mask, "bool")
        shape = tuple(mask.shape)
        if len(shape) == 2:
            mask = mask[None, None]
        elif len(shape) == 3:
            mask = mask[:, None]
        elif len(shape) != 4:
            raise ValueError(
                "`attention_mask` must be (Tq, Tv), (B, Tq, Tv) or (B, heads, "
                f"Tq, Tv). Received: attention_mask.shape={shape}"
            )
        _, heads, rows, cols = mask.shape
        if heads not in (1, self.heads) or rows not in (1, self.q_len):
            raise ValueError(
                f"`attention_mask` does not broadcast to (B, {self.heads}, "
                f"{self.q_len}, {self.k_len}). Received: attention_mask.shape={shape}"
            )
        if cols not in (1, self.k_len):
            raise ValueError(
                f"`attention_mask` does not broadcast to (B, {self.heads}, "
                f"{self.q_len}, {self.k_len}). Received: attention_mask.shape={shape}"
            )
        pad_rows = self.q_pad if rows != 1 else 0
        pad_cols = self.k_pad if cols != 1 else 0
        return ops.pad(mask, ((0, 0), (0, 0), (0, pad_rows), (0, pad_cols)))

    def pad(self, query, key, value):
        query = ops.pad(query, ((0, 0), (0, 0), (0, self.q_pad), (0, 0)))
        key = ops.pad(key, ((0, 0), (0, 0), (0, self.k_pad), (0, 0)))
        value = ops.pad(value, ((0, 0), (0, 0), (0, self.k_pad), (0, 0)))
        return query, key, value

    def rows(self, x, start, size):
        """`x[:, :, start:start + size]` of a `(B, heads, T, D)` tensor."""
        shape = ops.shape(x)
        return ops.slice(x, (0, 0, start, 0), (shape[0], shape[1], size, shape[3]))

    def key_stop(self, i):
        """One past the last key chunk that query chunk `i` can see."""
        if not self.causal:
            return self.num_key_chunks
        last_row = (i + 1) * self.query_chunk - 1 + self.offset
        stop = ops.floor_divide(last_row, self.key_chunk) + 1
        return ops.clip(stop, 0, self.num_key_chunks)

    def query_start(self, j):
        """The first query chunk that can see key chunk `j`."""
        if not self.causal:
            return 0
        first_row = j * self.key_chunk - self.offset
        start = ops.floor_divide(first_row, self.query_chunk)
        return ops.clip(start, 0, self.num_query_chunks)

    def scores(self, q_chunk, k_chunk):
        """float32 raw scores `(B, heads, cq, ck)` of one block."""
        if self.score_fn is None:
            raw = ops.matmul(q_chunk, ops.swapaxes(k_chunk, -1, -2))
        else:
            folded_q = ops.reshape(q_chunk, (-1, self.query_chunk, self.depth))
            folded_k = ops.reshape(k_chunk, (-1, self.key_chunk, self.depth))
            raw = self.score_fn(folded_q, folded_k)
            raw = ops.reshape(raw, (-1, self.heads, self.query_chunk, self.key_chunk))
        return ops.cast(raw, "float32")

    def block(self, q_chunk, k_chunk, q_start, k_start):
        """`(scores, mask)` of one block: `scores` with `score_mod` applied."""
        scores = self.scores(q_chunk, k_chunk)
        mask = self.mask(q_start, k_start)
        if self.score_mod is None:
            return scores, mask
        rows = ops.arange(ops.shape(scores)[2], dtype="int32") + q_start
        cols = ops.arange(ops.shape(scores)[3], dtype="int32") + k_start
        scores, extra = self.score_mod(scores, rows[:, None], cols[None, :])
        if extra is not None:
            mask = extra if mask is None else ops.logical_and(mask, extra)
        return scores, mask

    def mask(self, q_start, k_start):
        """Boolean mask of the block, broadcastable to it, or None."""
        parts = []
        if self.key_mask is not None:
            parts.append(_slice_axis(self.key_mask, 3, k_start, self.key_chunk))
        if self.query_mask is not None:
            parts.append(_slice_axis(self.query_mask, 2, q_start, self.query_chunk))
        if self.pair_mask is not None:
            block = self.pair_mask
            if block.shape[2] != 1:
                block = _slice_axis(block, 2, q_start, self.query_chunk)
            if block.shape[3] != 1:
                block = _slice_axis(block, 3, k_start, self.key_chunk)
            parts.append(block)
        if self.causal or self.window is not None:
            rows = ops.arange(self.query_chunk) + q_start + self.offset
            cols = ops.arange(self.key_chunk) + k_start
            distance = rows[:, None] - cols[None, :]
            if self.causal:
                parts.append(ops.greater_equal(distance, 0))
            if self.window is not None:
                parts.append(ops.less(ops.abs(distance), self.window))
        mask = None
        for part in parts:
            mask = part if mask is None else ops.logical_and(mask, part)
        return mask

    def keep(self, batch, q_start, k_start):
        """Dropout keep mask of the block, or None without dropout."""
        if self.rate == 0.0:
            return None
        shape = (batch, self.heads, self.query_chunk, self.key_chunk)
        return dropout_keep_mask(self.seed, shape, self.rate, q_start, k_start)

    def dropout(self, weights, keep):
        if keep is None:
            return weights
        scaled = weights / (1.0 - self.rate)
        return ops.where(keep, scaled, ops.zeros_like(scaled))


def _slice_axis(x, axis, start, size):
    shape = list(ops.shape(x))
    starts = [0] * len(shape)
    starts[axis] = start
    shape[axis] = size
    return ops.slice(x, starts, shape)


def _forward(plan, query, key, value, first_row=0, static_keys=False):
    """Context `(B, heads, Tq', Dv)` (float32) and row log-sum-exp `(..., 1)`.

    `query` holds the rows from position `first_row` on; `static_keys`
    visits every key chunk in a Python loop, which autodiff can go through
    on every backend (XLA cannot differentiate TensorFlow's while loop
    without a bound, JAX a loop of traced length), instead of stopping at
    the causal line.
    """
    batch = ops.shape(query)[0]
    q_size, k_size = plan.query_chunk, plan.key_chunk
    num_query_chunks = query.shape[2] // q_size

    def query_chunk(i, buffers):
        q_start = i * q_size
        q_chunk = plan.rows(query, q_start, q_size)
        row = q_start + first_row

        def key_chunk(j, running):
            k_start = j * k_size
            k_chunk = plan.rows(key, k_start, k_size)
            v_chunk = plan.rows(value, k_start, k_size)
            scores, mask = plan.block(q_chunk, k_chunk, row, k_start)
            if mask is not None:
                scores = ops.where(mask, scores, _NEG)
            maximum = ops.maximum(running.maximum, ops.max(scores, -1, keepdims=True))
            weights = ops.exp(scores - maximum)
            if mask is not None:
                weights = ops.where(mask, weights, ops.zeros_like(weights))
            correction = ops.exp(running.maximum - maximum)
            total = running.total * correction + ops.sum(weights, -1, keepdims=True)
            weights = plan.dropout(weights, plan.keep(batch, row, k_start))
            update = ops.matmul(ops.cast(weights, value.dtype), v_chunk)
            context = running.context * correction + ops.cast(update, "float32")
            return _Running(context, maximum, total)

        rows = (batch, plan.heads, q_size)
        start = _Running(
            ops.zeros((*rows, plan.value_depth), "float32"),
            ops.full((*rows, 1), _NEG, "float32"),
            ops.zeros((*rows, 1), "float32"),
        )
        if static_keys:
            running = start
            for j in range(plan.num_key_chunks):
                running = key_chunk(j, running)
        else:
            running = _fori(0, plan.key_stop(i), key_chunk, start, plan.num_key_chunks)
        valid = ops.greater(running.total, 0.0)
        total = ops.where(valid, running.total, ops.ones_like(running.total))
        context = ops.where(valid, running.context / total, 0.0)
        log_sum = ops.where(valid, running.maximum + ops.log(total), 0.0)
        if buffers is None:
            return context, log_sum
        contexts, log_sums = buffers
        contexts = ops.slice_update(contexts, (0, 0, q_start, 0), context)
        log_sums = ops.slice_update(log_sums, (0, 0, q_start, 0), log_sum)
        return contexts, log_sums

    if num_query_chunks == 1:
        return query_chunk(0, None)
    rows = (batch, plan.heads, ops.shape(query)[2])
    buffers = (
        ops.zeros((*rows, plan.value_depth), "float32"),
        ops.zeros((*rows, 1), "float32"),
    )
    return ops.fori_loop(0, num_query_chunks, query_chunk, buffers)


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
        context, log_sum = _forward(plan, query, key, value)

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
        grad = _fori(0, plan.key_stop(i), key_chunk, start, plan.num_key_chunks)
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
        grads = _fori(
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


def _fori(lower, upper, body, state, count):
    """`ops.fori_loop`, or one direct call when there is a single chunk.

    The bounds only skip blocks that the causal mask hides entirely, so the
    one chunk can always be visited (its mask does the rest).
    """
    if count == 1:
        return body(0, state)
    return ops.fori_loop(lower, upper, body, state)


def _rematerialised(plan, query, key, value):
    """Any `score_fn`: one rematerialised forward per query chunk.

    Autodiff runs through the key loop of one query chunk at a time (its
    residuals, `O(cq Tv)`, live only while that chunk's gradient is
    computed), and through `score_fn`'s weights.
    """
    score_fn = plan.score_fn
    if isinstance(score_fn, keras.layers.Layer) and not score_fn.built:
        score_fn.build(
            (None, plan.query_chunk, plan.depth), (None, plan.key_chunk, plan.depth)
        )
    chunks = []
    for i in range(plan.num_query_chunks):
        first_row = i * plan.query_chunk

        def attend(q_chunk, key, value, first_row=first_row):
            context, _ = _forward(
                plan, q_chunk, key, value, first_row=first_row, static_keys=True
            )
            return ops.cast(context, plan.value_dtype)

        q_chunk = plan.rows(query, first_row, plan.query_chunk)
        chunks.append(keras.remat(attend)(q_chunk, key, value))
    return ops.concatenate(chunks, axis=2) if len(chunks) > 1 else chunks[0]
