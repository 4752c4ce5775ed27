"""Multi-head attention with any alignment function and a decoding cache."""

import math

import keras
from keras import ops, tree
from keras.src.backend import get_keras_mask, set_keras_mask

from keras_attention import scores
from keras_attention.layers import dispatch, head_masks, kv_cache, score_mods
from keras_attention.layers.kv_cache import (
    MAX_BLOCK_HEADS,
    CachedProjections,
    cache_length,
)
from keras_attention.layers.masking import masked_softmax
from keras_attention.layers.multi_head_paths import (
    BlockwisePaths,
    Call,
    check_batch,
    check_window_arguments,
    check_window_lengths,
)
from keras_attention.scores.location import Location
from keras_attention.scores.scaled_dot import ScaledDot


@keras.saving.register_keras_serializable(package="keras_attention")
class MultiHeadAttention(
    CachedProjections, BlockwisePaths, keras.layers.MultiHeadAttention
):
    """Multi-head attention with a pluggable score and a key/value cache.

    A drop-in for `keras.layers.MultiHeadAttention`: the same constructor
    arguments, call signature, weights and variable names, so
    `ours.set_weights(keras_mha.get_weights())` reproduces Keras's outputs
    (a fully masked query row gets a zero context, i.e. the output
    projection's bias, where Keras's fused path averages every value).
    `_compute_attention` and `_masked_softmax` stay the override points:
    a subclass overriding either gets the full weights, as on Keras's class.
    What the layer adds:

    - `score`: any alignment function of `keras_attention.scores`, one
      layer shared by every head (its weights come after the projections'
      in `weights`); the weights are a float32 masked softmax (a fully
      masked row is zeros, never NaN).
    - `cache` / `cache_update_index` for incremental decoding, as in
      keras-hub's `CachedMultiHeadAttention` (`keras_attention.layers.
      kv_cache`).
    - `window`: restricted self-attention (Vaswani et al., section 4),
      computed blockwise in `O(r T d)`; `|i - j| <= window` (Keras's
      `sliding_window=s` is the same band as a mask, `window = s - 1`).
    - Exact attention in memory linear in the length (`chunk_threshold`,
      `chunk_size`), where the backend's fused kernel is not.
    - `score_mod`: a hook on the scores from positions and heads (ALiBi,
      T5's relative bias, soft-capping, a segment mask:
      `keras_attention.layers.score_mods`), on every path, blockwise on
      the chunked and windowed ones.

    `call` projects, then `_route` picks the one path that computes the
    context: windowed, chunked (or JAX's Triton kernel), the explicit path
    on a split cache, or Keras's hook `_compute_attention` (the fused
    `keras.ops.dot_product_attention` or the explicit scores). The rules
    are those of `keras_attention.layers.dispatch`; every path gives the
    explicit path's outputs to float tolerance. Inputs of rank other than
    3 or another `attention_axes` go to Keras's implementation (scaled dot
    only, no cache).

    Args:
        num_heads, key_dim, value_dim, dropout, use_bias, output_shape,
            attention_axes, sliding_window, flash_attention,
            kernel_initializer, bias_initializer, kernel_regularizer,
            bias_regularizer, activity_regularizer, kernel_constraint,
            bias_constraint, use_gate, seed: as in
            `keras.layers.MultiHeadAttention`, with its defaults.
        score: str, dict or `keras_attention.scores.Score`. Alignment
            function (`keras_attention.scores.get`); a `Score` instance is
            copied from its config in this layer's dtype policy. Defaults
            to `"scaled_dot"`, Keras's `q k^T / sqrt(key_dim)`.
        chunk_threshold: `"auto"`, int or None. Above this number of keys
            the chunked path is taken; `"auto"` decides by backend, device,
            dtype and mask (`dispatch`), an int on any device (`0`:
            always), `None` never. Defaults to `"auto"`.
        chunk_size: `"auto"` or int. Queries and keys per chunk
            (`dispatch.chunk_size`). Defaults to `"auto"`.
        window: int or None. Restricted self-attention radius `r >= 1`:
            query `i` sees keys `j` with `|i - j| <= r` (`i - r <= j <= i`
            when causal); `Tq != Tv` raises a `ValueError`. Defaults to
            `None`.
        score_mod: optional `keras_attention.layers.ScoreMod` (or its
            config), or a list of them (`ScoreMods`: in order, masks
            ANDed), copied from its config and built with `num_heads`.
            Defaults to `None`.
        rotary: number or None. Rotary positions (Su et al., RoFormer) of
            this maximum wavelength on the projected queries and keys,
            by `keras_hub.layers.RotaryEmbedding`, from the cache index in
            a decoding step (the cache holds rotated keys); `key_dim` must
            be even. Defaults to `None`.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        query, value, key, value_mask, key_mask, return_attention_scores,
            training: as in Keras. With a cache, masks and `Tv` cover its
            `max_length`, and `value` is ignored without
            `cache_update_index`.
        query_mask: optional boolean `(batch, Tq)`, honoured (Keras's
            layer ignores an explicit one). Defaults to the query's mask.
        attention_mask: optional boolean `(Tq, Tv)`, `(batch, Tq, Tv)` or
            `(batch, num_heads, Tq, Tv)`, `True` = attend; any dimension
            may be 1. Another shape raises a `ValueError`.
        use_causal_mask: bool. Query `i` attends to keys `j <= i` (with
            `cache_update_index`, `j <= cache_update_index + i`).
            Defaults to `False`.
        cache: optional tensor `(batch, 2, max_length, num_heads,
            key_dim)` (keys at `[:, 0]`, values at `[:, 1]`; keras-hub's
            layout, `value_dim == key_dim`), or a pair `(keys, values)` of
            heads-first `(batch, num_heads, max_length, dim)` tensors,
            returned as a pair: what a decoding loop should carry (no
            re-stacking or transposing of the whole cache per step).
        cache_update_index: optional int or int tensor. Where to write the
            new key/value projections into `cache`; `None` with a cache
            reads it as is (precomputed cross-attention keys). The query
            positions a `score_mod` sees start there.
        segment_ids: optional int `(batch, Tv)` (the cache's `max_length`
            with a cache), read by a `SegmentMask` hook. Defaults to `None`.

    Returns:
        `output` `(batch, Tq, dim)`; `(output, scores)` with
        `return_attention_scores`; `(output, cache)` with a cache;
        `(output, scores, cache)` with both.

    Example:
    >>> import numpy as np
    >>> layer = MultiHeadAttention(num_heads=2, key_dim=4, score="general")
    >>> x = np.ones((1, 3, 8), "float32")
    >>> tuple(layer(x, x, use_causal_mask=True).shape)
    (1, 3, 8)
    >>> cache = np.zeros((1, 2, 3, 2, 4), "float32")
    >>> out, cache = layer(x[:, :1], x[:, :1], cache=cache, cache_update_index=0)
    >>> tuple(out.shape), tuple(cache.shape)
    ((1, 1, 8), (1, 2, 3, 2, 4))
    >>> pair = (np.zeros((1, 2, 3, 4), "float32"),) * 2  # heads first
    >>> out, (keys, values) = layer(
    ...     x[:, :1], x[:, :1], cache=pair, cache_update_index=0)
    >>> tuple(keys.shape), tuple(values.shape)
    ((1, 2, 3, 4), (1, 2, 3, 4))

    A mask may also be per head, `(batch, num_heads, Tq, Tv)`:

    >>> heads_mask = np.ones((1, 2, 3, 3), bool)
    >>> out, weights = layer(
    ...     x, x, attention_mask=heads_mask, return_attention_scores=True)
    >>> tuple(weights.shape)
    (1, 2, 3, 3)

    Restricted self-attention: each position sees the keys at most 1 away.

    >>> local = MultiHeadAttention(num_heads=2, key_dim=4, window=1)
    >>> out, weights = local(x, x, return_attention_scores=True)
    >>> keras.ops.convert_to_numpy(weights)[0, 0] > 0
    array([[ True,  True, False],
           [ True,  True,  True],
           [False,  True,  True]])

    Reference:
        Vaswani et al., 2017, "Attention Is All You Need", sections 3.2.2
        and 4 (restricted self-attention).
    """

    def __init__(
        self,
        num_heads,
        key_dim,
        value_dim=None,
        dropout=0.0,
        use_bias=True,
        output_shape=None,
        attention_axes=None,
        sliding_window=None,
        flash_attention=None,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        kernel_regularizer=None,
        bias_regularizer=None,
        activity_regularizer=None,
        kernel_constraint=None,
        bias_constraint=None,
        use_gate=False,
        seed=None,
        score="scaled_dot",
        chunk_threshold="auto",
        chunk_size="auto",
        window=None,
        score_mod=None,
        rotary=None,
        **kwargs,
    ):
        chunk_threshold, chunk_size = dispatch.check(chunk_threshold, chunk_size)
        rotary = check_rotary(rotary, key_dim)
        window = check_window_arguments(window, sliding_window, flash_attention)
        super().__init__(
            num_heads=num_heads,
            key_dim=key_dim,
            value_dim=value_dim,
            dropout=dropout,
            use_bias=use_bias,
            output_shape=output_shape,
            attention_axes=attention_axes,
            sliding_window=sliding_window,
            flash_attention=flash_attention,
            kernel_initializer=kernel_initializer,
            bias_initializer=bias_initializer,
            kernel_regularizer=kernel_regularizer,
            bias_regularizer=bias_regularizer,
            activity_regularizer=activity_regularizer,
            kernel_constraint=kernel_constraint,
            bias_constraint=bias_constraint,
            use_gate=use_gate,
            seed=seed,
            **kwargs,
        )
        if isinstance(score, scores.Score):
            # Kept as a config: `build()` makes the layer, in this layer's
            # dtype policy, so that its weights follow the projections'.
            score = scores.serialize(score)
        # Fails early, with the registry's message, on an unknown score.
        score_layer = scores.get(score)
        self._fused_score = isinstance(score_layer, ScaledDot)
        if window is not None and isinstance(score_layer, Location):
            raise ValueError(
                "A 'location' score scores every key position at once and "
                "cannot be computed on windows. Received: "
                f"window={window!r}, score={score!r}"
            )
        self.score = score
        self.window = window
        self.chunk_threshold = chunk_threshold
        self.chunk_size = chunk_size
        # Kept as a config, as `score`: `build()` makes the hook.
        self.score_mod = score_mods.serialize(score_mods.get(score_mod))
        self._score_mod = None
        self.rotary = rotary
        self._rotary = None
        self._score_layer = None
        self._keras_path = False

    def build(self, query_shape, value_shape, key_shape=None):
        query_shape = tuple(query_shape)
        value_shape = tuple(value_shape)
        key_shape = value_shape if key_shape is None else tuple(key_shape)
        check_batch(query_shape, value_shape, key_shape)
        self._build_projections(query_shape, value_shape, key_shape)
        self._keras_path = len(query_shape) != 3 or self.attention_axes != (1,)
        own = not self._fused_score or self.score_mod is not None or self.rotary
        if self._keras_path and own:
            raise ValueError(
                "A score other than 'scaled_dot', a `score_mod` or `rotary` "
                "needs inputs of rank 3 (batch, T, dim) and the default "
                f"`attention_axes`. Received: query_shape={query_shape}, "
                f"attention_axes={self.attention_axes}, score={self.score!r}"
            )
        if self.window is not None:
            if self._keras_path:
                raise ValueError(
                    "`window` needs inputs of rank 3 (batch, T, dim) and the "
                    f"default `attention_axes`. Received: window={self.window}, "
                    f"query_shape={query_shape}, attention_axes="
                    f"{self.attention_axes}"
                )
            check_window_lengths(self.window, query_shape, key_shape)
        if self._keras_path:
            return
        score = scores.get(self.score)
        config = {**score.get_config(), "dtype": self.dtype_policy, "name": "score"}
        self._score_layer = type(score).from_config(config)
        head_query = (None, query_shape[1], self.key_dim)
        head_key = (None, key_shape[1], self.key_dim)
        self._score_layer.build(head_query, head_key)
        self._score_mod = score_mods.built_copy(self.score_mod, self.num_heads)
        if self.rotary is not None:
            # keras-hub's layer (imported here: keras-hub takes seconds to
            # import, and only a rotary layer needs it).
            from keras_hub.layers import RotaryEmbedding

            self._rotary = RotaryEmbedding(
                max_wavelength=self.rotary, dtype=self.dtype_policy, name="rotary"
            )

    def _build_projections(self, query_shape, value_shape, key_shape):
        """Keras's projections (and dropout): `num_heads` key/value heads."""
        super().build(query_shape, value_shape, key_shape)

    def _key_value_heads(self):
        """The number of key/value heads: `num_heads` (one per query head)."""
        return self.num_heads

    def call(
        self,
        query,
        value,
        key=None,
        query_mask=None,
        value_mask=None,
        key_mask=None,
        attention_mask=None,
        return_attention_scores=False,
        training=None,
        use_causal_mask=False,
        cache=None,
        cache_update_index=None,
        segment_ids=None,
    ):
        call = Call(
            query,
            value,
            value if key is None else key,
            query_mask,
            value_mask,
            key_mask,
            attention_mask,
            return_attention_scores,
            training,
            use_causal_mask,
            cache,
            cache_update_index,
        )
        if self._keras_path:
            return self._keras_call(call, key)
        call.score_mod = self._bound_score_mod(segment_ids, cache_update_index)
        check_batch(query.shape, value.shape, call.key.shape)
        # `Layer.__call__` already filled the masks from the inputs' Keras
        # masks; drop those while projecting so the projection layers do not
        # warn, then give the caller's tensors their masks back.
        keras_masks = [(x, get_keras_mask(x)) for x in (query, value, call.key)]
        for tensor, _ in keras_masks:
            set_keras_mask(tensor, None)
        gate = self._gate_dense(query) if self._use_gate else None
        self._project(call)
        for tensor, mask in keras_masks:
            set_keras_mask(tensor, mask)
        prefix, cache_size = self._read_visible_cache(call)
        path = self._route(call)
        output, weights, row_valid = path(call)
        if gate is not None:
            output = ops.multiply(output, gate)
        output = self.output_dense(output)
        if row_valid is not None:
            output = self._empty_rows_to_bias(output, row_valid)
        if prefix is not None and weights is not None:
            # The masked keys after the prefix have weight exactly 0.
            weights = ops.pad(weights, [[0, 0]] * 3 + [[0, cache_size - prefix]])
        outputs = (output, weights) if return_attention_scores else (output,)
        if call.cache is not None:
            outputs += (call.cache,)
        return outputs if len(outputs) > 1 else output

    def _bound_score_mod(self, segment_ids, cache_update_index):
        """The call's `score_mods.Bound` hook (query positions start at the
        cache index in a decoding step), or None without a `score_mod`."""
        if self._score_mod is not None and self._overrides_hooks():
            raise ValueError(
                "A `score_mod` runs on this layer's own attention paths; a "
                "subclass overriding `_compute_attention` or `_masked_softmax` "
                f"cannot take one. Received: score_mod={self.score_mod!r}"
            )
        offset = 0 if cache_update_index is None else cache_update_index
        heads = ops.arange(self.num_heads, dtype="int32")
        return score_mods.bind(self._score_mod, heads, segment_ids, offset)

    def _keras_call(self, call, key):
        """Keras's own call: inputs of another rank or `attention_axes`."""
        if call.cache is not None or call.cache_update_index is not None:
            raise ValueError(
                "The cache needs inputs of rank 3 and the default "
                f"`attention_axes`. Received: query.shape={call.query.shape}"
            )
        return super().call(
            call.query,
            call.value,
            key=key,
            query_mask=call.query_mask,
            value_mask=call.value_mask,
            key_mask=call.key_mask,
            attention_mask=call.attention_mask,
            return_attention_scores=call.return_attention_scores,
            training=call.training,
            use_causal_mask=call.use_causal_mask,
        )

    def _route(self, call):
        """The path method that computes this call's context.

        The one place a path is chosen, on static shapes and Python flags,
        by the rules of `keras_attention.layers.dispatch`. Each path takes
        the `Call` and returns `(context (B, Tq, num_heads, value_dim),
        weights or None, row_valid or None)`; `row_valid` marks the query
        rows that have a key, for `call` to give the others the output
        projection's bias.
        """
        call.fused = self._takes_fused_path(
            call.return_attention_scores, call.training, call.query.shape[1]
        )
        if self._takes_windowed_path(call):
            return self._windowed_path
        if self._takes_chunked_path(call):
            return self._chunked_path
        if self._takes_grouped_cache_path(call):
            return self._grouped_cache_path
        if call.heads_first:
            return self._heads_first_path
        return self._hook_path

    def _takes_fused_path(self, return_attention_scores, training, query_length=None):
        """Whether `_compute_attention` uses `ops.dot_product_attention`."""
        # Under float16 the backend kernels multiply q k^T in float16 and
        # overflow to NaN from ~300x unit-scale inputs (Keras's layer does);
        # the explicit path scores in float32 (`scores.precision`). A flash
        # kernel asked for explicitly still gets the fused path. So does one
        # query (a decoding step) only then: the explicit path reads the
        # keys and values in place (`MAX_BLOCK_HEADS`), where the backend
        # kernel transposes them (the whole cache) at every step.
        float16 = keras.backend.standardize_dtype(self.compute_dtype) == "float16"
        one_query = query_length == 1 and self.num_heads <= MAX_BLOCK_HEADS
        return (
            self._fused_score
            and self.score_mod is None
            and self.value_dim == self.key_dim
            and not return_attention_scores
            and not (self.dropout > 0.0 and bool(training))
            and (not float16 or self._flash_attention is True)
            and (not one_query or self._flash_attention is True)
        )

    def _overrides_hooks(self):
        """Whether a subclass overrides Keras's hooks (they need full weights)."""
        return (
            self._overrides_compute_attention()
            or type(self)._masked_softmax is not MultiHeadAttention._masked_softmax
        )

    def _overrides_compute_attention(self):
        """Whether a subclass overrides Keras's hook `_compute_attention`."""
        return (
            type(self)._compute_attention is not MultiHeadAttention._compute_attention
        )

    def _repeated_key_value(self, call):
        """Keys and values with one head per query head, as Keras's hook takes them.

        `(B, Tv, num_heads, dim)` (`(B, num_heads, Tv, dim)` heads first):
        each key/value head repeated `group` times, as
        `keras.layers.GroupQueryAttention` does before `_compute_attention`;
        the keys and values as they are for `MultiHeadAttention`.
        """
        group = self.num_heads // self._key_value_heads()
        if group == 1:
            return call.key, call.value
        axis = 1 if call.heads_first else 2
        return (
            ops.repeat(call.key, group, axis=axis),
            ops.repeat(call.value, group, axis=axis),
        )

    def _hook_path(self, call):
        """Keras's documented hook, `_compute_attention`: fused or explicit.

        A subclass overriding the hook gets what Keras gives it: the merged
        mask, and no repair of fully masked rows.
        """
        key, value = self._repeated_key_value(call)
        if call.score_mod is not None:
            mask, _, _ = self._attention_mask(call, key, fused=False)
            context, weights = self._explicit_attention(
                call.query, key, value, mask, call.training, call.score_mod
            )
            return context, weights, None
        mask, causal_only, row_valid = self._attention_mask(
            call, key, fused=call.fused and not self._overrides_compute_attention()
        )
        # As in Keras: `use_causal_mask` reaches the hook only when the
        # backend's causal kernel can apply it alone.
        causal_kwargs = {"use_causal_mask": True} if causal_only else {}
        context, weights = self._call_hook(
            call.query,
            key,
            value,
            mask,
            call.training,
            call.return_attention_scores,
            **causal_kwargs,
        )
        if row_valid is not None and len(row_valid.shape) == 4:
            # A 4-D mask can empty a row in some heads only: zero those
            # heads' context, as the explicit path's all-zero weights do.
            valid = ops.transpose(row_valid, (0, 2, 1, 3))
            context = ops.where(valid, context, ops.zeros_like(context))
            row_valid = None
        return context, weights, row_valid

    def _call_hook(self, query, key, value, mask, training, return_scores, **causal):
        """Calls `_compute_attention` with Keras's `MultiHeadAttention` arguments."""
        return self._compute_attention(
            query, key, value, mask, training, return_scores, **causal
        )

    def _attention_mask(self, call, key, fused):
        """`head_masks.merge_head_masks` of the call's masks, with this layer's bands."""
        return head_masks.merge_head_masks(
            call.query,
            key,
            self.num_heads,
            call.query_mask,
            call.value_mask,
            call.key_mask,
            call.attention_mask,
            call.use_causal_mask,
            call.cache_update_index,
            self._sliding_window,
            self.window,
            fused,
        )

    def _check_attention_mask(self, attention_mask, query, key):
        """`head_masks.check_attention_mask` with this layer's heads."""
        return head_masks.check_attention_mask(
            attention_mask, query, key, self.num_heads
        )

    def _compute_attention(
        self,
        query,
        key,
        value,
        attention_mask=None,
        training=None,
        return_attention_scores=False,
        use_causal_mask=False,
    ):
        """Attention of projected heads: Keras's documented override point.

        Scores each head with the `score` layer, normalises with
        `_masked_softmax`, applies dropout and sums the values; or, where
        `_takes_fused_path`, calls `keras.ops.dot_product_attention`.

        Args:
            query: projected query `(B, Tq, num_heads, key_dim)`.
            key: projected key `(B, Tv, num_heads, key_dim)`.
            value: projected value `(B, Tv, num_heads, value_dim)`.
            attention_mask: optional boolean, `(B, Tq, Tv)` or `(B,
                num_heads, Tq, Tv)` (or broadcastable), `True` = attend.
            training: bool. Dropout only in training mode.
            return_attention_scores: bool. Whether the weights are needed.
            use_causal_mask: bool. Also hide keys `j > i` from query `i`.

        Returns:
            `(context, weights)`: the context `(B, Tq, num_heads,
            value_dim)` and the weights `(B, num_heads, Tq, Tv)`, or None on
            the fused path.
        """
        if self._keras_path:
            return super()._compute_attention(
                query,
                key,
                value,
                attention_mask,
                training,
                return_attention_scores,
                use_causal_mask=use_causal_mask,
            )
        if self._flash_attention and return_attention_scores:
            raise ValueError(
                "Returning attention scores is not supported when flash "
                "attention is enabled. Please disable flash attention to access"
                " attention scores."
            )
        if use_causal_mask and attention_mask is not None:
            causal = head_masks.causal_mask(ops.shape(query)[1], ops.shape(key)[1])
            if len(attention_mask.shape) == 4:
                causal = ops.expand_dims(causal, 0)
            attention_mask = ops.logical_and(ops.cast(attention_mask, "bool"), causal)
            use_causal_mask = False
        if self._takes_fused_path(return_attention_scores, training, query.shape[1]):
            return self._fused_attention(
                query, key, value, attention_mask, use_causal_mask
            )
        if use_causal_mask:
            attention_mask = head_masks.causal_mask(
                ops.shape(query)[1], ops.shape(key)[1]
            )
        return self._explicit_attention(query, key, value, attention_mask, training)

    def _fused_attention(self, query, key, value, attention_mask, use_causal_mask):
        """`_compute_attention`'s fused path: `keras.ops.dot_product_attention`.

        Returns `(context (B, Tq, num_heads, value_dim), None)`.
        """
        if attention_mask is not None:
            attention_mask = ops.cast(attention_mask, "bool")
            while len(attention_mask.shape) < 4:
                attention_mask = ops.expand_dims(attention_mask, -3)
        output = ops.dot_product_attention(
            query,
            key,
            value,
            mask=attention_mask,
            scale=1.0 / math.sqrt(self.key_dim),
            is_causal=use_causal_mask,
            flash_attention=self._flash_attention,
        )
        return output, None

    def _explicit_attention(
        self, query, key, value, attention_mask, training, score_mod=None
    ):
        """`_compute_attention`'s explicit path: scores, `_masked_softmax`, sum.

        One query with at most `kv_cache.MAX_BLOCK_HEADS` heads (a decoding
        step) reads the keys and values `(B, Tv, heads, dim)` in place.

        `score_mod`: the call's `score_mods.Bound` hook, or None.

        Returns `(context (B, Tq, num_heads, value_dim), weights (B,
        num_heads, Tq, Tv))`.
        """
        one_query = query.shape[1] == 1 and self.num_heads <= MAX_BLOCK_HEADS
        raw = None
        if one_query:
            raw = kv_cache.one_query_dot_scores(self._score_layer, query, key)
        if raw is None:
            heads_k = ops.transpose(key, (0, 2, 1, 3))
            raw = self._head_scores(query, heads_k)
        raw, attention_mask = score_mods.modify_scores(raw, attention_mask, score_mod)
        weights = self._masked_softmax(raw, attention_mask)
        dropped = self._weights_dropout(weights, training)
        if one_query:
            return kv_cache.one_query_context(dropped, value), weights
        output = ops.einsum("bhqk,bkhd->bqhd", dropped, value)
        return output, weights

    def _head_scores(self, query, key):
        """Raw scores `(B, num_heads, Tq, Tv)` of the score layer, per head.

        Args:
            query: projected query `(B, Tq, num_heads, key_dim)`.
            key: heads-first keys `(B, num_heads, Tv, key_dim)`.
        """
        batch = ops.shape(query)[0]
        q_len, k_len = ops.shape(query)[1], ops.shape(key)[2]
        # Explicit sizes, not -1: a zero-length sequence has no -1 to infer.
        rows = batch * self.num_heads
        heads_q = ops.reshape(
            ops.transpose(query, (0, 2, 1, 3)), (rows, q_len, self.key_dim)
        )
        heads_k = ops.reshape(key, (rows, k_len, self.key_dim))
        raw = self._score_layer(heads_q, heads_k)
        return ops.reshape(raw, (batch, self.num_heads, q_len, k_len))

    def _weights_dropout(self, weights, training):
        """The dropout on the attention weights, called only where it acts.

        `Dropout` is the identity unless `training and rate > 0`; not
        calling it then saves a layer call per attention (a decoding step
        makes many).
        """
        if training and self.dropout > 0:
            return self._dropout_layer(weights, training=training)
        return weights

    def _masked_softmax(self, attention_scores, attention_mask=None):
        """Keras's hook: attention weights from raw scores and a mask.

        A float32 `masked_softmax` (masked entries exactly 0, a fully
        masked row all zeros), cast to the compute dtype.

        Args:
            attention_scores: raw scores `(B, num_heads, Tq, Tv)`.
            attention_mask: optional boolean of rank 2 to 4, broadcast
                from the right after a heads axis is added, as in Keras.

        Returns:
            The weights, of the shape of `attention_scores`.
        """
        if self._keras_path:
            return super()._masked_softmax(attention_scores, attention_mask)
        if attention_mask is not None:
            attention_mask = ops.cast(attention_mask, "bool")
            while len(attention_mask.shape) < len(attention_scores.shape):
                attention_mask = ops.expand_dims(attention_mask, -3)
        weights = masked_softmax(attention_scores, attention_mask)
        return ops.cast(weights, self.compute_dtype)

    def _empty_rows_to_bias(self, output, row_valid):
        """Rows where `row_valid` `(B, Tq, 1)` (or broadcastable) is False get the bias.

        That is the projection of a zero context, what the explicit path
        gives a fully masked row; selecting after the projection (instead
        of zeroing the `(B, Tq, heads, dim)` context before it) fuses into
        the bias add under XLA.
        """
        for _ in range(len(output.shape) - len(row_valid.shape)):
            row_valid = ops.expand_dims(row_valid, -1)  # a tuple `output_shape`
        bias = getattr(self.output_dense, "bias", None)
        fill = 0.0 if bias is None else bias.value  # autocast, scoped
        dtype = keras.backend.standardize_dtype(output.dtype)
        if bias is not None and keras.backend.standardize_dtype(fill.dtype) != dtype:
            fill = ops.cast(fill, dtype)
        return ops.where(row_valid, output, fill)

    def compute_output_spec(
        self,
        query,
        value,
        key=None,
        query_mask=None,
        value_mask=None,
        key_mask=None,
        attention_mask=None,
        return_attention_scores=False,
        training=None,
        use_causal_mask=False,
        cache=None,
        cache_update_index=None,
        segment_ids=None,
    ):
        key_shape = None if key is None else key.shape
        output_shape = self.compute_output_shape(query.shape, value.shape, key_shape)
        outputs = [keras.KerasTensor(output_shape, dtype=self.compute_dtype)]
        if return_attention_scores:
            length = value.shape[1] if cache is None else cache_length(cache)
            scores_shape = (query.shape[0], self.num_heads, query.shape[1], length)
            outputs.append(keras.KerasTensor(scores_shape, dtype=self.compute_dtype))
        if cache is not None:
            outputs.append(
                tree.map_structure(
                    lambda c: keras.KerasTensor(c.shape, dtype=c.dtype), cache
                )
            )
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def get_config(self):
        config = super().get_config()
        config.update(
            score=self.score,
            chunk_threshold=self.chunk_threshold,
            chunk_size=self.chunk_size,
            window=self.window,
        )
        if self.score_mod is not None:
            config["score_mod"] = self.score_mod
        if self.rotary is not None:
            config["rotary"] = self.rotary
        return config


def check_rotary(rotary, key_dim=None):
    """Checks `rotary` (a positive max wavelength or None) against `key_dim`."""
    if rotary is None:
        return None
    if isinstance(rotary, bool) or not isinstance(rotary, (int, float)) or rotary <= 0:
        raise ValueError(
            "`rotary` is the rotary positions' maximum wavelength, a positive "
            f"number, or None. Received: rotary={rotary!r}"
        )
    if key_dim is not None and key_dim % 2:
        raise ValueError(
            "Rotary positions rotate pairs of features: `key_dim` must be even. "
            f"Received: key_dim={key_dim}, rotary={rotary!r}"
        )
    return rotary
