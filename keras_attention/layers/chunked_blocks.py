"""The blocks of chunked attention: the plan, the dropout hash, the forward loops.

`keras_attention.layers.chunked.chunked_attention` cuts its queries and keys
into blocks; `Plan` holds the chunk sizes and the padded masks and gives
each block its scores (the score hook applied), mask and dropout;
`forward` runs the online softmax of every block, in loops
(`ops.fori_loop`) or unrolled in Python. The gradient strategies built on
them live in `chunked` (FlashAttention's recomputing custom gradient) and
`chunked_remat` (rematerialised chunks, for a `score_fn` or a hook).
"""

import collections

from keras import ops

# Fill of masked float32 scores: exp(fill - max) underflows to exactly zero
# without the NaNs that -inf gives on a fully masked row.
NEG = -1e30

# The online softmax state of one query chunk: the unnormalised context
# `sum_j exp(s_j - maximum) v_j`, the running row maximum of the scores, and
# the running sum `sum_j exp(s_j - maximum)`.
Running = collections.namedtuple("Running", ["context", "maximum", "total"])


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
    >>> import keras
    >>> keep = dropout_keep_mask(7, (2, 3, 64, 64), rate=0.25)
    >>> kept = float(keras.ops.mean(keras.ops.cast(keep, "float32")))
    >>> abs(kept - 0.75) < 0.01
    True
    """
    batch, heads, rows, cols = shape
    bh = ops.reshape(ops.arange(batch * heads, dtype="int32"), (batch, heads, 1, 1))
    rows = ops.arange(rows, dtype="int32")[:, None] + ops.cast(query_start, "int32")
    cols = ops.arange(cols, dtype="int32")[None, :] + ops.cast(key_start, "int32")
    return keep_block(seed, bh, rows, cols, rate)


def check_options(dropout_rate, seed, score_fn, scale):
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


def keep_block(seed, bh, rows, cols, rate):
    """Keep mask from broadcastable int32 ids; see `dropout_keep_mask`."""
    seed = _mix(ops.cast(seed, "int32"))
    row_hash = _mix(ops.bitwise_xor(_mix(ops.bitwise_xor(bh, seed)), _mix(rows)))
    bits = _mix(ops.bitwise_xor(row_hash, _mix(ops.add(cols, 0x3C6EF372))))
    uniform = ops.cast(ops.bitwise_and(bits, 0xFFFFFF), "float32") / float(2**24)
    return ops.greater_equal(uniform, rate)


class Plan:
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
        mask, shape = four_d_mask(mask, "(Tq, Tv), (B, Tq, Tv) or (B, heads, Tq, Tv)")
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

    def visible(self, q_start, k_start):
        """Whether the causal mask and the window leave any of the block
        from query `q_start` and key `k_start` visible (a boolean scalar),
        or None when every block may be."""
        if not self.causal and self.window is None:
            return None
        first = q_start + self.offset
        last = first + self.query_chunk - 1
        parts = []
        if self.causal:
            parts.append(ops.less_equal(k_start, last))
        if self.window is not None:
            parts.append(ops.less(first - (k_start + self.key_chunk - 1), self.window))
            parts.append(ops.less(k_start - last, self.window))
        visible = parts[0]
        for part in parts[1:]:
            visible = ops.logical_and(visible, part)
        return visible

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
            parts.append(slice_axis(self.key_mask, 3, k_start, self.key_chunk))
        if self.query_mask is not None:
            parts.append(slice_axis(self.query_mask, 2, q_start, self.query_chunk))
        if self.pair_mask is not None:
            block = self.pair_mask
            if block.shape[2] != 1:
                block = slice_axis(block, 2, q_start, self.query_chunk)
            if block.shape[3] != 1:
                block = slice_axis(block, 3, k_start, self.key_chunk)
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


def four_d_mask(mask, forms):
    """A boolean `attention_mask` as `(B, heads, rows, cols)`, and its shape.

    `(rows, cols)` and `(B, rows, cols)` gain their missing axes (size 1);
    another rank raises a `ValueError` naming the accepted `forms`.

    >>> import numpy as np
    >>> mask, shape = four_d_mask(np.ones((3, 5), bool), "(Tq, Tv)")
    >>> tuple(mask.shape), shape
    ((1, 1, 3, 5), (3, 5))
    """
    mask = ops.cast(mask, "bool")
    shape = tuple(mask.shape)
    if len(shape) == 2:
        mask = mask[None, None]
    elif len(shape) == 3:
        mask = mask[:, None]
    elif len(shape) != 4:
        raise ValueError(
            f"`attention_mask` must be {forms}. Received: attention_mask.shape={shape}"
        )
    return mask, shape


def slice_axis(x, axis, start, size):
    shape = list(ops.shape(x))
    starts = [0] * len(shape)
    starts[axis] = start
    shape[axis] = size
    return ops.slice(x, starts, shape)


def forward(plan, query, key, value, first_row=0, static_keys=False):
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
                scores = ops.where(mask, scores, NEG)
            maximum = ops.maximum(running.maximum, ops.max(scores, -1, keepdims=True))
            weights = ops.exp(scores - maximum)
            if mask is not None:
                weights = ops.where(mask, weights, ops.zeros_like(weights))
            correction = ops.exp(running.maximum - maximum)
            total = running.total * correction + ops.sum(weights, -1, keepdims=True)
            weights = plan.dropout(weights, plan.keep(batch, row, k_start))
            update = ops.matmul(ops.cast(weights, value.dtype), v_chunk)
            context = running.context * correction + ops.cast(update, "float32")
            return Running(context, maximum, total)

        rows = (batch, plan.heads, q_size)
        start = Running(
            ops.zeros((*rows, plan.value_depth), "float32"),
            ops.full((*rows, 1), NEG, "float32"),
            ops.zeros((*rows, 1), "float32"),
        )
        if static_keys:
            running = start
            for j in range(plan.num_key_chunks):
                running = key_chunk(j, running)
        else:
            running = fori(0, plan.key_stop(i), key_chunk, start, plan.num_key_chunks)
        context, valid, total = normalised(running.context, running.total)
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


def normalised(context, total):
    """`context / total` per row, zeros for a row with nothing to attend to.

    Returns the context, the rows' validity (`total > 0`) and the total
    with its empty rows set to one (safe to divide by or take the log of).
    """
    valid = ops.greater(total, 0.0)
    total = ops.where(valid, total, ops.ones_like(total))
    return ops.where(valid, context / total, 0.0), valid, total


def fori(lower, upper, body, state, count):
    """`ops.fori_loop`, or one direct call when there is a single chunk.

    The bounds only skip blocks that the causal mask hides entirely, so the
    one chunk can always be visited (its mask does the rest).
    """
    if count == 1:
        return body(0, state)
    return ops.fori_loop(lower, upper, body, state)
