"""The paths of `MultiHeadAttention` that do not go through Keras's hook.

`MultiHeadAttention._route` picks one path per call; the windowed, chunked
and heads-first (split cache) paths live here, as a mixin of the layer,
with the `Call` record every path reads and the argument checks they
share. Keras's hook `_compute_attention` (fused or explicit) stays in
`multi_head_attention.py`.
"""

import dataclasses
import math

import keras
from keras import ops

from keras_attention.layers import dispatch, head_masks, score_mods
from keras_attention.layers.chunked import chunked_attention
from keras_attention.layers.windowed import check_window, windowed_attention
from keras_attention.scores.location import Location
from keras_attention.scores.precision import widen
from keras_attention.scores.scaled_dot import ScaledDot


@dataclasses.dataclass
class Call:
    """One call of `MultiHeadAttention`, as its route and paths read it.

    `call` fills it with the call's arguments, `_project` replaces query,
    key and value by their projected heads (the cache's, with one), and
    `_read_visible_cache` cuts a decoding step to what it can see.
    `heads_first`: key and value are `(B, num_heads, Tv, dim)` (a split
    cache); `fused`: `_takes_fused_path` of the call; `score_mod`: the
    layer's hook bound to the call (`score_mods.Bound`), or None.
    """

    query: object
    value: object
    key: object
    query_mask: object
    value_mask: object
    key_mask: object
    attention_mask: object
    return_attention_scores: bool
    training: object
    use_causal_mask: bool
    cache: object
    cache_update_index: object
    heads_first: bool = False
    fused: bool = False
    score_mod: object = None


def check_batch(query_shape, value_shape, key_shape):
    sizes = {query_shape[0], value_shape[0], key_shape[0]} - {None}
    if len(sizes) > 1:
        raise ValueError(
            "query, value and key must have the same batch size. Received: "
            f"query.shape={tuple(query_shape)}, value.shape="
            f"{tuple(value_shape)}, key.shape={tuple(key_shape)}"
        )


def check_window_arguments(window, sliding_window, flash_attention):
    """Checks `window` against the other band arguments; returns it."""
    window = check_window(window)
    if window is None:
        return None
    if sliding_window is not None:
        raise ValueError(
            "`window` (blockwise, |i - j| <= window) and Keras's `sliding_window` "
            "(a mask, |i - j| < sliding_window) restrict the same band; set one. "
            f"Received: window={window}, sliding_window={sliding_window}"
        )
    if flash_attention is True:
        raise ValueError(
            "`window` computes its own blocks and cannot use a flash kernel. "
            f"Received: window={window}, flash_attention=True"
        )
    return window


def check_window_lengths(window, query_shape, key_shape):
    q_len, k_len = query_shape[1], key_shape[1]
    if q_len is not None and k_len is not None and q_len != k_len:
        raise ValueError(
            "`window` is restricted self-attention: the query and the key need "
            f"the same length. Received: window={window}, query length {q_len}, "
            f"key length {k_len}"
        )


class BlockwisePaths:
    """The windowed, chunked and heads-first paths of `MultiHeadAttention`.

    A mixin: it reads the layer's arguments (`num_heads`, `key_dim`,
    `window`, `chunk_threshold`, ...) and its hooks (`_key_value_heads`,
    `_overrides_hooks`, `_attention_mask`, `_masked_softmax`, ...). Each
    path takes the `Call` and returns `(context (B, Tq, num_heads,
    value_dim), weights or None, row_valid or None)`.
    """

    def _takes_windowed_path(self, call):
        """Whether `call` uses `windowed_attention` (static shapes, Python flags)."""
        if (
            self.window is None
            or call.cache is not None
            or call.cache_update_index is not None
        ):
            return False
        check_window_lengths(self.window, call.query.shape, call.key.shape)
        return (
            not call.return_attention_scores
            and not self._overrides_hooks()
            and call.query.shape[1] is not None
            and call.key.shape[1] is not None
        )

    def _takes_chunked_path(self, call):
        """Whether `call` uses `chunked_attention` (static shapes, Python flags).

        With `chunk_threshold="auto"`, `dispatch.takes_chunked_path` keeps
        the fused path where the backend's kernel is memory-efficient for
        the call's `dispatch.mask_kind`.
        """
        if (
            self.chunk_threshold is None
            or self.window is not None
            or call.cache is not None
            or call.cache_update_index is not None
            or call.return_attention_scores
            or self._flash_attention is True
            or isinstance(self._score_layer, Location)
        ):
            return False
        # Keras's hooks see the full weights: an override keeps that path.
        if self._overrides_hooks():
            return False
        q_len, k_len = call.query.shape[1], call.key.shape[1]
        if None in (q_len, k_len):
            return False
        mask = dispatch.mask_kind(
            causal=call.use_causal_mask,
            padding=call.query_mask is not None
            or call.value_mask is not None
            or call.key_mask is not None,
            pairwise=call.attention_mask is not None
            or self._sliding_window is not None,
        )
        return dispatch.takes_chunked_path(
            self.chunk_threshold,
            k_len,
            call.fused,
            self.compute_dtype,
            mask,
            call.query,
            hooked=call.score_mod is not None,
        )

    def _chunked_path(self, call):
        """Context from `chunked_attention` (or JAX's Triton kernel).

        The padding masks stay 1-D and the attention mask as given: no
        `(B, Tq, Tv)` mask is built. A row with nothing to attend to gets a
        zero context, so its output is the projection's bias, as on the
        explicit path. Grouped heads go through `_by_group`.
        """
        query_mask, keys, attention_mask = self._blockwise_masks(call)
        score_fn, rate, seed = self._blockwise_options(call.training)

        def attend(query, attention_mask, seed, score_mod):
            if (
                self.chunk_size == dispatch.AUTO
                and score_fn is None
                and score_mod is None
                and rate == 0.0
                and attention_mask is None
                and self._sliding_window is None
                and self.key_dim == self.value_dim
            ):
                # The masks as given: `triton_padding` compares the objects.
                padding = dispatch.triton_padding(
                    call.query_mask, (call.value_mask, call.key_mask)
                )
                if dispatch.triton_flash_applies_here(
                    query, call.key, self.key_dim, call.use_causal_mask, padding
                ):
                    return dispatch.triton_flash_attention(
                        query,
                        call.key,
                        call.value,
                        call.use_causal_mask,
                        1.0 / math.sqrt(self.key_dim),
                        call.query_mask,
                        shared_mask=padding == "shared",
                    )
            rows = query.shape[0] and query.shape[0] * query.shape[2]
            size = dispatch.chunk_size(self.chunk_size, rows, query)
            return chunked_attention(
                query,
                call.key,
                call.value,
                key_mask=keys,
                query_mask=query_mask,
                attention_mask=attention_mask,
                use_causal_mask=call.use_causal_mask,
                causal_offset=0,
                sliding_window=self._sliding_window,
                score_fn=score_fn,
                dropout_rate=rate,
                seed=seed,
                query_chunk_size=size,
                key_chunk_size=size,
                score_mod=score_mod,
            )

        return (
            self._by_group(attend, call.query, attention_mask, seed, call.score_mod),
            None,
            None,
        )

    def _windowed_path(self, call):
        """Context from `windowed_attention`.

        As `_chunked_path`: 1-D padding masks, the attention mask as given
        (only its band is read), zeros for a row with nothing to attend to.
        """
        query_mask, keys, attention_mask = self._blockwise_masks(call)
        score_fn, rate, seed = self._blockwise_options(call.training)

        def attend(query, attention_mask, seed, score_mod):
            return windowed_attention(
                query,
                call.key,
                call.value,
                self.window,
                causal=call.use_causal_mask,
                key_mask=keys,
                query_mask=query_mask,
                attention_mask=attention_mask,
                score_fn=score_fn,
                dropout_rate=rate,
                seed=seed,
                score_mod=score_mod,
            )

        return (
            self._by_group(attend, call.query, attention_mask, seed, call.score_mod),
            None,
            None,
        )

    def _by_group(self, attend, query, attention_mask, seed, score_mod):
        """`attend(query, attention_mask, seed, score_mod)` per group of query heads.

        Query head `h` reads key/value head `h // group` (Keras's
        `ops.repeat` order), `group = num_heads // key/value heads`. The
        keys and values are never repeated: the query `(B, Tq, num_heads,
        key_dim)` is read as `(B, Tq, kv_heads, group, key_dim)` and
        `attend` runs once per position in the group on the `kv_heads`
        key/value heads as they lie (once, on everything, for
        `MultiHeadAttention`). A per-head attention mask is split the same
        way; each call's dropout gets its own seed, and the score hook
        (`score_mods.Bound`, or None) its own query heads.

        Returns the context `(B, Tq, num_heads, value_dim)`.
        """
        kv_heads = self._key_value_heads()
        group = self.num_heads // kv_heads
        if group == 1:
            return attend(query, attention_mask, seed, score_mod)
        batch, q_len = ops.shape(query)[0], query.shape[1]
        query = ops.reshape(query, (batch, q_len, kv_heads, group, self.key_dim))
        per_head = attention_mask is not None and len(attention_mask.shape) == 4
        if per_head and attention_mask.shape[1] != 1:
            mask_shape = ops.shape(attention_mask)
            attention_mask = ops.reshape(
                attention_mask,
                (mask_shape[0], kv_heads, group, mask_shape[2], mask_shape[3]),
            )
        else:
            per_head = False
        contexts = []
        for member in range(group):
            contexts.append(
                attend(
                    query[:, :, :, member],
                    attention_mask[:, :, member] if per_head else attention_mask,
                    None if seed is None else seed + member,
                    None
                    if score_mod is None
                    else score_mod.with_heads(
                        ops.arange(kv_heads, dtype="int32") * group + member
                    ),
                )
            )
        context = ops.stack(contexts, axis=3)
        return ops.reshape(context, (batch, q_len, self.num_heads, self.value_dim))

    def _blockwise_masks(self, call):
        """`(query_mask, key_mask, attention_mask)` of the blockwise paths.

        The padding masks stay 1-D (bool, `value_mask` and `key_mask`
        merged) and the attention mask as given, checked: no `(B, Tq, Tv)`
        mask is built.
        """
        keys = head_masks.key_padding_mask(call.value_mask, call.key_mask, call.key)
        attention_mask = call.attention_mask
        if attention_mask is not None:
            attention_mask = self._check_attention_mask(
                attention_mask, call.query, call.key
            )
        query_mask = call.query_mask
        if query_mask is not None:
            query_mask = ops.cast(query_mask, "bool")
        return query_mask, keys, attention_mask

    def _blockwise_options(self, training):
        """`(score_fn, dropout_rate, seed)` of the chunked and windowed paths.

        The score is the fused kernel's dot product (`score_fn=None`)
        unless float16 needs the score layer's float32 product
        (`scores.precision`) or the score is another function. The dropout
        seed is drawn from the layer's seed generator at each call.
        """
        float16 = keras.backend.standardize_dtype(self.compute_dtype) == "float16"
        score_fn = None if self._fused_score and not float16 else self._score_layer
        rate = self.dropout if training and self.dropout > 0.0 else 0.0
        seed = None
        if rate:
            seed = keras.random.randint(
                (), 0, 2**31 - 1, seed=self._dropout_layer.seed_generator
            )
        return score_fn, rate, seed

    def _takes_grouped_cache_path(self, call):
        """Whether a cached call of grouped heads takes `_grouped_cache_path`.

        A call of `GroupedQueryAttention` on a cache (a decoding step or a
        prefix), with the scaled dot score, no flash kernel asked for and no
        hook overridden (Keras's hook takes the keys repeated to one head
        per query head).
        """
        return (
            call.cache is not None
            and self.num_heads != self._key_value_heads()
            and type(self._score_layer) is ScaledDot
            and not self._overrides_hooks()
            and self._flash_attention is not True
        )

    def _grouped_cache_path(self, call):
        """The explicit path on a cache of `kv_heads` heads, never repeated.

        The query `(B, Tq, num_heads, d)` is read as `(B, Tq, kv_heads,
        group, d)`: each key/value head scores and sums its group's queries
        in one batched product over the cache as it lies (query head `h`
        reads key/value head `h // group`, Keras's `ops.repeat` order), so
        a decoding step reads `kv_heads` heads of cache, not `num_heads`.
        """
        kv_heads = self._key_value_heads()
        group = self.num_heads // kv_heads
        batch, q_len = ops.shape(call.query)[0], call.query.shape[1]
        query = ops.reshape(
            widen(call.query), (batch, q_len, kv_heads, group, self.key_dim)
        )
        query = query * ops.cast(1.0 / math.sqrt(self.key_dim), query.dtype)
        key = widen(call.key)
        keys = "bkvd" if call.heads_first else "bvkd"
        raw = ops.einsum(f"bqkgd,{keys}->bkgqv", query, ops.cast(key, query.dtype))
        k_len = ops.shape(raw)[-1]
        raw = ops.reshape(raw, (batch, self.num_heads, q_len, k_len))
        lengths = call.key[:, 0, :, :1] if call.heads_first else call.key
        mask, _, _ = self._attention_mask(call, lengths, fused=False)
        raw, mask = score_mods.modify_scores(raw, mask, call.score_mod)
        weights = self._masked_softmax(raw, mask)
        dropped = self._weights_dropout(weights, call.training)
        dropped = ops.reshape(
            ops.cast(dropped, call.value.dtype), (batch, kv_heads, group, q_len, k_len)
        )
        values = "bkvd" if call.heads_first else "bvkd"
        context = ops.einsum(f"bkgqv,{values}->bqkgd", dropped, call.value)
        context = ops.reshape(context, (batch, q_len, self.num_heads, self.value_dim))
        return context, weights, None

    def _heads_first_path(self, call):
        """The explicit path on a split cache's heads-first keys and values."""
        key, value = self._repeated_key_value(call)
        mask, _, _ = self._attention_mask(
            call,
            # The masks read the number of keys only.
            key[:, 0, :, :1],
            fused=False,
        )
        context, weights = self._heads_first_attention(
            call.query, key, value, mask, call.training, call.score_mod
        )
        return context, weights, None

    def _heads_first_attention(
        self, query, key, value, attention_mask, training, score_mod=None
    ):
        """`_compute_attention`'s explicit path on heads-first keys and values.

        Args:
            query: projected query `(B, Tq, num_heads, key_dim)`.
            key: `(B, num_heads, Tv, key_dim)`, as a split cache holds it.
            value: `(B, num_heads, Tv, value_dim)`.
            attention_mask: optional boolean mask, as `_compute_attention`
                takes it.
            training: bool. Dropout only in training mode.
            score_mod: the call's `score_mods.Bound` hook, or None.

        Returns:
            `(context (B, Tq, num_heads, value_dim), weights (B, num_heads,
            Tq, Tv))`: batched matmuls over `B * num_heads` rows that read
            the keys and values where they lie.
        """
        batch = ops.shape(query)[0]
        q_len, k_len = ops.shape(query)[1], ops.shape(key)[2]
        rows = batch * self.num_heads
        raw, attention_mask = score_mods.modify_scores(
            self._head_scores(query, key), attention_mask, score_mod
        )
        weights = self._masked_softmax(raw, attention_mask)
        dropped = self._weights_dropout(weights, training)
        heads_v = ops.reshape(value, (rows, k_len, self.value_dim))
        context = ops.matmul(
            ops.reshape(ops.cast(dropped, heads_v.dtype), (rows, q_len, k_len)),
            heads_v,
        )
        context = ops.reshape(context, (batch, self.num_heads, q_len, self.value_dim))
        return ops.transpose(context, (0, 2, 1, 3)), weights
