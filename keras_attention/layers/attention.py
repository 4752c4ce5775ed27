"""Soft, hard (stochastic) and local attention over any alignment score."""

import keras
from keras import ops

from keras_attention import scores
from keras_attention.arguments import int_argument
from keras_attention.layers import dispatch, score_mods
from keras_attention.layers.attention_inputs import (
    KERAS_SCORES,  # noqa: F401 (stays importable from here)
    check_choice,
    check_floating,
    check_list_call,
    check_shapes,
    is_static_int,
    keras_score,
    list_call,
    rank3,
    select,
    tensor_call,
    unflatten_batch,
    unpack_list,
)
from keras_attention.layers.attention_modes import hard_weights, local_window
from keras_attention.layers.chunked import chunked_attention
from keras_attention.layers.fused import (
    dot_product_scale,
    fused_attention,
    triton_attention,
)
from keras_attention.layers.masking import masked_softmax, merge_masks
from keras_attention.scores.location import Location

MODES = ("soft", "hard")
LOCAL_MODES = ("monotonic", "predictive")
HARD_ESTIMATORS = ("reinforce", "gumbel")


@keras.saving.register_keras_serializable(package="keras_attention")
class Attention(keras.layers.Layer):
    """Attention layer: score, masked normalisation and weighted sum.

    The score (alignment function) compares each query vector with each key
    vector (`keras_attention.scores`); a masked float32 softmax turns the
    scores into weights over the `Tv` value positions; the output is the
    weighted sum of the values.

    Drop-in for `keras.layers.Attention`: the layer also takes Keras's
    constructor arguments `use_scale`, `score_mode`, `dropout` and `seed`
    (by keyword) and Keras's list call `layer([query, value(, key)],
    mask=[query_mask, value_mask], ...)`; built and called that way it
    gives Keras's outputs, weights and variables (`scale`,
    `concat_score_weight`, in Keras's order, so `set_weights(
    keras_layer.get_weights())` works, though they live in the `score`
    sublayer), and `Attention.from_config(keras_layer.get_config())`
    rebuilds it. `score_mode="dot"` selects `scores.Dot(use_scale)`,
    `"concat"` `scores.TanhSum(use_scale)`. The list call behaves as Keras's
    call: the query mask only zeroes the output rows (the weights of a
    masked query row are still a distribution), the causal mask aligns the
    first query with the first value, a key mask (`mask[2]`) is ignored,
    and inputs may have several batch axes `(..., T, D)`. Differences that
    remain: the default score is `"scaled_dot"` (`s^T h / sqrt(d)`), where
    Keras's default is the unscaled dot product, so pass `score="dot"` or
    `score_mode="dot"` for Keras's numbers; a row with nothing to attend to
    gets zero weights and a zero output (Keras gives near-uniform weights);
    the weights are float32 under mixed precision, and under
    `"mixed_float16"` the `dot`, `scaled_dot` and `general` scores multiply
    query and key in float32 (`keras_attention.scores.precision`), so the
    layer stays finite for inputs far beyond the ~100x unit scale at which
    Keras's float16 scores overflow to NaN.

    `keras.layers.AdditiveAttention` scores `sum_d v_d tanh(s_d + h_d)`:
    the `"additive"` score `v_a^T tanh(W_a s + U_a h)` without `W_a` and
    `U_a` (set both to the identity and `v_a` to Keras's `scale` to get its
    numbers); `score="additive"` learns the projections itself.

    Modes (formulas and estimators in `keras_attention.layers.
    attention_modes`): `mode="soft"` (Bahdanau, Luong), the softmax of the
    scores; `mode="hard"` (Xu et al. 2015), one value position per query,
    sampled while training (REINFORCE or straight-through Gumbel-Softmax);
    `window=D` (Luong et al. 2015, section 3.2), local attention around a
    monotonic (`local="monotonic"`) or predicted (`local="predictive"`)
    position. A `score_mod` (`keras_attention.layers.score_mods`: ALiBi,
    relative position bias, soft-cap, segment mask) changes the scores
    from positions on every path.

    Windows, masks, hooks and modes combine freely (e.g. hard local-p
    attention).

    Soft global attention is routed per call (`_route`, by the rules of
    `keras_attention.layers.dispatch`): with a (scaled) dot product it
    takes the backend's fused `keras.ops.dot_product_attention` where that
    kernel is memory-efficient; above `chunk_threshold` values it takes the
    exact chunked path, `chunked_attention` (JAX's Triton kernel on a GPU),
    in `O(Tq + Tv)` memory; elsewhere, and wherever the weights are needed
    (`window`, hard mode, a `return_*` output, `projected_key`), the
    explicit scores. Every path gives the explicit path's outputs to float
    tolerance, and a row with nothing to attend to gets zeros.

    Args:
        score: str, dict or `keras_attention.scores.Score`. The alignment
            function: a name (see `keras_attention.scores`), a config dict
            or a score layer. Defaults to `"scaled_dot"` (or, when
            `score_mode` or `use_scale` is given, Keras's score).
        mode: str. `"soft"` or `"hard"`. Defaults to `"soft"`.
        window: int or None. Half-width `D` of the local window, or `None`
            for global attention. Defaults to `None`.
        local: str. `"monotonic"` (local-m) or `"predictive"` (local-p);
            used only with `window`. Defaults to `"monotonic"`.
        dropout: float in `[0, 1)`. Dropout rate on the soft weights while
            training. Defaults to `0.0`.
        seed: int or None. Seed of the dropout and of hard-mode sampling.
            Defaults to `None`.
        hard_estimator: str. `"reinforce"` or `"gumbel"` (straight-through
            Gumbel-softmax); used only in hard mode. Defaults to
            `"reinforce"`.
        temperature: float > 0. Gumbel-softmax temperature of the backward
            pass. Defaults to `1.0`.
        local_units: int or None. Hidden size of `W_p` for local-p; `None`
            uses the query's last dimension. Defaults to `None`.
        use_scale: bool or None. Keras's argument: multiply the scores by a
            learned scalar `scale` (dot), or `query + key` by it (concat).
            Giving it (or `score_mode`) selects Keras's score; it cannot be
            combined with `score`. Defaults to `None` (Keras: `False`).
        score_mode: str or None. Keras's argument, `"dot"` (`s^T h`) or
            `"concat"` (`c sum tanh(s + h)`, `scores.TanhSum`). Defaults to
            `None` (Keras: `"dot"`).
        chunk_threshold: `"auto"`, int or None. Above this number of
            values `Tv`, soft attention takes the chunked path; `"auto"`
            decides by backend, device, dtype and mask (`dispatch`), an int
            on any device (`0`: always), `None` never. Defaults to
            `"auto"`.
        chunk_size: `"auto"` or int. Queries and values per chunk
            (`dispatch.chunk_size`). Defaults to `"auto"`.
        score_mod: optional `keras_attention.layers.ScoreMod` (or its
            config), or a list of them (`ScoreMods`): a bias, cap or mask
            of the scores from positions, copied from its config, with one
            head (head 0). Defaults to `None`.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        query: tensor `(batch, Tq, Dq)`, or Keras's list `[query, value]` /
            `[query, value, key]` (then of any rank >= 3, `(..., T, D)`,
            with no other tensor argument than `mask`).
        value: tensor `(batch, Tv, Dv)`.
        key: optional tensor `(batch, Tv, Dk)`; defaults to `value`.
        query_mask: optional boolean `(batch, Tq)`; `False` rows output
            zeros. Filled from the query's Keras mask when not given.
        value_mask: optional boolean `(batch, Tv)`; `False` positions get
            zero weight. Filled from the value's Keras mask when not given.
        attention_mask: optional boolean `(batch, Tq, Tv)` (or
            broadcastable); `False` entries get zero weight.
        use_causal_mask: bool. Query `i` may not attend to value `j > i`.
            When `Tq != Tv` the tensor call aligns the last query with the
            last value (incremental decoding); the list call aligns the
            first ones, as `keras.layers.Attention` does. Defaults to
            `False`.
        return_attention_scores: bool. Also return the attention weights
            (after dropout). Defaults to `False`.
        training: bool or None. Training mode (dropout, hard-mode sampling).
        return_log_prob: bool. Also return the log-probability `(batch, Tq)`
            of the selected positions under the soft distribution (zero for
            rows with nothing to attend to). Hard mode only. Defaults to
            `False`.
        return_distribution: bool. Also return the soft distribution
            `(batch, Tq, Tv)` (rows sum to 1, or 0 when fully masked), before
            dropout, that hard mode samples from. Defaults to `False`.
        key_mask: optional boolean `(batch, Tv)`, combined with
            `value_mask`. Filled from the key's Keras mask when not given.
        query_positions: optional int tensor `(Tq,)` or `(batch, Tq)`, the
            centre `p_t` of each row's window for local-m. Defaults to
            `0, ..., Tq - 1`.
        projected_key: optional `score.project_key(key)`, computed once by
            a caller that attends to the same keys many times (an RNN
            decoder, one query per step); the score then skips projecting
            the keys. `key` is still used for its shape. Defaults to `None`.
        segment_ids: optional int `(batch, Tv)`, the segments that a
            `SegmentMask` hook reads (tensor call only). Defaults to `None`.
        mask: list `[query_mask, value_mask]` (or with a third, ignored,
            key mask), for the list call only: `(..., Tq)` and `(..., Tv)`
            booleans or `None`. Filled from the inputs' Keras masks when not
            given. Defaults to `None`.

    Returns:
        The context `(batch, Tq, Dv)` in the compute dtype, or a tuple that
        starts with it and continues, in this order, with the weights
        `(batch, Tq, Tv)` (float32) if `return_attention_scores`, the
        log-probabilities `(batch, Tq)` (float32) if `return_log_prob` and
        the distribution `(batch, Tq, Tv)` (float32) if
        `return_distribution`. The output carries the query's Keras mask.

    Example:
    >>> import numpy as np
    >>> layer = Attention(score="dot", mode="hard", window=1)
    >>> query, value = np.ones((2, 3, 4)), np.ones((2, 5, 4))
    >>> context, weights = layer(query, value, return_attention_scores=True)
    >>> tuple(context.shape), tuple(weights.shape)
    ((2, 3, 4), (2, 3, 5))

    Keras's arguments and call give Keras's numbers and variables:

    >>> import keras
    >>> query = np.array([[[1.0, 0.0], [0.0, 1.0]]])
    >>> value = np.array([[[1.0, 2.0], [3.0, 4.0]]])
    >>> mask = [np.array([[True, False]]), np.array([[True, True]])]
    >>> ours = Attention(use_scale=True, score_mode="concat")
    >>> theirs = keras.layers.Attention(use_scale=True, score_mode="concat")
    >>> a, b = ours([query, value], mask=mask), theirs([query, value], mask=mask)
    >>> np.round(keras.ops.convert_to_numpy(a).astype(float), 3).tolist()
    [[[2.035, 3.035], [0.0, 0.0]]]
    >>> a, b = keras.ops.convert_to_numpy(a), keras.ops.convert_to_numpy(b)
    >>> bool(np.allclose(a, b)), [w.name for w in ours.weights]
    (True, ['scale', 'concat_score_weight'])

    Reference:
        Bahdanau et al., 2014, "Neural Machine Translation by Jointly
        Learning to Align and Translate".
        Luong et al., 2015, "Effective Approaches to Attention-based Neural
        Machine Translation", sections 3.1-3.2.
        Xu et al., 2015, "Show, Attend and Tell", section 4.1.
        Jang et al., 2017, "Categorical Reparameterization with
        Gumbel-Softmax".
    """

    def __init__(
        self,
        score=None,
        mode="soft",
        window=None,
        local="monotonic",
        dropout=0.0,
        seed=None,
        hard_estimator="reinforce",
        temperature=1.0,
        local_units=None,
        use_scale=None,
        score_mode=None,
        chunk_threshold="auto",
        chunk_size="auto",
        score_mod=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        chunk_threshold, chunk_size = dispatch.check(chunk_threshold, chunk_size)
        check_choice("mode", mode, MODES)
        check_choice("local", local, LOCAL_MODES)
        check_choice("hard_estimator", hard_estimator, HARD_ESTIMATORS)
        window = int_argument("window", window, allowed=(None,))
        local_units = int_argument("local_units", local_units, allowed=(None,))
        if not isinstance(dropout, (int, float)) or not 0 <= dropout < 1:
            raise ValueError(
                f"`dropout` must be a float in [0, 1). Received: dropout={dropout!r}"
            )
        if not isinstance(temperature, (int, float)) or temperature <= 0:
            raise ValueError(
                "`temperature` must be a positive float. "
                f"Received: temperature={temperature!r}"
            )
        score, score_mode, use_scale = keras_score(score, score_mode, use_scale)
        # A given score layer is tracked under one name only, `score_layer`,
        # so that saved weights are found at the same path when reloading.
        self.score_layer = None
        self._score_identifier = dict(score) if isinstance(score, dict) else score
        if isinstance(score, scores.Score):
            self.score_layer = score
            self._score_identifier = None
        self.use_scale = use_scale
        self.score_mode = score_mode
        self.mode = mode
        self.window = window
        self.local = local
        self.dropout = float(dropout)
        self.seed = seed
        self.hard_estimator = hard_estimator
        self.temperature = float(temperature)
        self.local_units = local_units
        self.chunk_threshold = chunk_threshold
        self.chunk_size = chunk_size
        # Kept as a config: `build()` makes the hook (one head).
        self.score_mod = score_mods.serialize(score_mods.get(score_mod))
        self._score_mod = None
        self.supports_masking = True
        self.seed_generator = None
        if mode == "hard" or dropout > 0:
            self.seed_generator = keras.random.SeedGenerator(seed)

    def build(self, query_shape, value_shape=None, key_shape=None):
        if value_shape is None:  # Keras's form: a list of shapes
            query_shape, value_shape, key_shape = unpack_list(
                "input_shape", query_shape
            )
        key_shape = value_shape if key_shape is None else key_shape
        check_shapes(query_shape, value_shape, key_shape, any_rank=True)
        if self.score_layer is None:
            self.score_layer = self._make_score()
        if not self.score_layer.built:
            self.score_layer.build(rank3(query_shape), rank3(key_shape))
        self._score_mod = score_mods.built_copy(self.score_mod, 1)
        self.position_kernel = None
        self.position_scale = None
        if self.window is not None and self.local == "predictive":
            units = self.local_units or query_shape[-1]
            self.position_kernel = self.add_weight(
                name="position_kernel",
                shape=(query_shape[-1], units),
                initializer="glorot_uniform",
                autocast=False,
            )
            self.position_scale = self.add_weight(
                name="position_scale",
                shape=(units,),
                initializer="glorot_uniform",
                autocast=False,
            )

    def _make_score(self):
        """Creates the score sublayer from a name or a config dict."""
        if isinstance(self._score_identifier, str):
            identifier = {"class_name": self._score_identifier, "config": {}}
        else:
            identifier = dict(self._score_identifier)
            identifier["config"] = dict(identifier.get("config") or {})
        identifier["config"].setdefault("dtype", self.dtype_policy)
        identifier["config"].setdefault("name", "score")
        return scores.get(identifier)

    def call(
        self,
        query,
        value=None,
        key=None,
        query_mask=None,
        value_mask=None,
        attention_mask=None,
        use_causal_mask=False,
        return_attention_scores=False,
        training=None,
        return_log_prob=False,
        return_distribution=False,
        key_mask=None,
        query_positions=None,
        projected_key=None,
        segment_ids=None,
        mask=None,
    ):
        returns = (return_attention_scores, return_log_prob, return_distribution)
        self._check_call_arguments(return_log_prob, query_positions)
        if isinstance(query, (list, tuple)):
            if isinstance(query_mask, (list, tuple)):
                # Keras fills `query_mask` with the list's own Keras masks
                # when another tensor (`mask`) is passed: not the user's.
                query_mask = None
            check_list_call(
                value=value,
                key=key,
                query_mask=query_mask,
                value_mask=value_mask,
                key_mask=key_mask,
                attention_mask=attention_mask,
                query_positions=query_positions,
                projected_key=projected_key,
                segment_ids=segment_ids,
            )
            call = list_call(query, mask, use_causal_mask)
        else:
            call = tensor_call(
                query, value, key, query_mask, value_mask, key_mask, mask
            )
            call.attention_mask, call.use_causal_mask = attention_mask, use_causal_mask
            call.query_positions, call.projected_key = query_positions, projected_key
        call.training, call.returns = training, returns
        call.score_mod = self._bound_score_mod(call, segment_ids)
        path = self._route(call)
        context, *others = path(call)
        if call.batch_shape is not None:
            context = unflatten_batch(context, call.batch_shape)
            others = [unflatten_batch(x, call.batch_shape) for x in others]
        if call.row_mask is not None:
            row = ops.expand_dims(call.row_mask, -1)
            context = ops.where(row, context, ops.zeros_like(context))
        return select((context, *others), returns)

    def _bound_score_mod(self, call, segment_ids):
        """The call's `score_mods.Bound` hook (one head), or None.

        Query `i` is at position `i`, or `i + Tv - Tq` where the causal
        mask aligns the last query with the last value (the tensor call).
        """
        offset = 0
        if self._score_mod is not None and not call.causal_from_start:
            offset = ops.shape(call.value)[1] - ops.shape(call.query)[1]
        heads = ops.zeros((1,), "int32")
        return score_mods.bind(self._score_mod, heads, segment_ids, offset)

    def _route(self, call):
        """The path method that computes this call's context.

        The one place a path is chosen, on static shapes and Python flags,
        by the rules of `keras_attention.layers.dispatch`. Each path takes
        the `Call` and returns `(context, weights, log_prob,
        distribution)`, None where not computed.
        """
        # The tensor call's causal mask aligns the last query with the last
        # value: with `Tq != Tv` that is no kernel's own causal mask.
        aligned = call.causal_from_start or call.query.shape[1] == call.value.shape[1]
        call.kind = dispatch.mask_kind(
            causal=call.use_causal_mask,
            padding=call.query_mask is not None or call.value_mask is not None,
            pairwise=call.attention_mask is not None
            or (call.use_causal_mask and not aligned),
        )
        call.scale = self._fused_scale(
            call.query,
            call.value,
            call.key,
            call.returns,
            call.training,
            call.attention_mask,
            call.projected_key,
        )
        if self._takes_chunked_path(
            call.query,
            call.value,
            call.returns,
            call.attention_mask,
            call.projected_key,
            call.scale,
            call.kind,
            hooked=call.score_mod is not None,
        ):
            return self._chunked_path
        if self._takes_fused_path(call.scale, call.kind, call.query):
            if call.kind == "pairwise":
                return self._fused_masked_path
            return self._fused_path
        return self._explicit_path

    def _chunked_path(self, call):
        """The context from `chunked_attention`, masks kept 1-D.

        A fusable call (`call.scale`, `_fused_scale`) with
        `chunk_size="auto"`, no dropout and no `attention_mask` runs JAX's
        Triton flash kernel where it applies (`fused.triton_attention`).
        """
        query, value, key = call.query, call.value, call.key
        query_mask, value_mask = call.query_mask, call.value_mask
        attention_mask, use_causal_mask = call.attention_mask, call.use_causal_mask
        scale, padding, training = call.scale, call.padding, call.training
        if query_mask is None and padding == "shared":
            # Keras's list call zeroes masked query rows after; the
            # chunked path takes its query mask where it is the values'.
            query_mask = value_mask
        causal_offset = 0
        if not call.causal_from_start:
            causal_offset = value.shape[1] - query.shape[1]
        rate = self.dropout if training and self.dropout > 0 else 0.0
        if (
            self.chunk_size == dispatch.AUTO
            and scale is not None
            and not rate
            and attention_mask is None
            and call.score_mod is None
            and not (use_causal_mask and causal_offset)
        ):
            context = triton_attention(
                query, key, value, scale, padding, query_mask, use_causal_mask
            )
            if context is not None:
                return context, None, None, None
        seed = None
        if rate:
            seed = keras.random.randint((), 0, 2**31 - 1, seed=self.seed_generator)
        size = dispatch.chunk_size(self.chunk_size, query.shape[0], query)
        context = chunked_attention(
            query,
            key,
            value,
            key_mask=value_mask,
            query_mask=query_mask,
            attention_mask=attention_mask,
            use_causal_mask=use_causal_mask,
            causal_offset=causal_offset,
            score_fn=self.score_layer,
            dropout_rate=rate,
            seed=seed,
            query_chunk_size=size,
            key_chunk_size=size,
            score_mod=call.score_mod,
        )
        return context, None, None, None

    def _fused_path(self, call):
        """The fused kernel with 1-D masks and its own causal mask."""
        context = fused_attention(
            call.query,
            call.key,
            call.value,
            call.scale,
            key_mask=call.value_mask,
            query_mask=call.query_mask,
            use_causal_mask=call.use_causal_mask,
        )
        return context, None, None, None

    def _fused_masked_path(self, call):
        """The fused kernel with every mask merged into one `(B, Tq, Tv)`."""
        mask = self._score_mask(call)
        context = fused_attention(
            call.query, call.key, call.value, call.scale, attention_mask=mask
        )
        return context, None, None, None

    def _explicit_path(self, call):
        """Scores, masked normalisation, weighted sum (`_attend`)."""
        return self._attend(
            call.query,
            call.value,
            call.key,
            self._score_mask(call),
            value_mask=call.value_mask,
            training=call.training,
            query_positions=call.query_positions,
            projected_key=call.projected_key,
            score_mod=call.score_mod,
        )

    def _score_mask(self, call):
        """Every mask of the call merged, broadcastable to `(B, Tq, Tv)`."""
        if not call.causal_from_start:
            return merge_masks(
                call.query,
                call.value,
                call.query_mask,
                call.value_mask,
                call.attention_mask,
                call.use_causal_mask,
            )
        causal = None
        if call.use_causal_mask:
            rows = ops.expand_dims(ops.arange(ops.shape(call.query)[1]), -1)
            cols = ops.expand_dims(ops.arange(ops.shape(call.value)[1]), 0)
            causal = ops.expand_dims(rows >= cols, 0)
        return merge_masks(call.query, call.value, None, call.value_mask, causal)

    def _fused_scale(
        self,
        query,
        value,
        key,
        returns,
        training,
        attention_mask=None,
        projected_key=None,
    ):
        """The dot product's scale where the call can be fused, else None.

        A fused kernel computes global soft attention of a (scaled) dot
        product (`fused.dot_product_scale`) and nothing else: no window, no
        weights or other `return_*` output, no `projected_key`, no dropout
        while training, a mask of rank <= 3, known non-zero lengths, and
        not under float16, where the explicit path scores in float32
        (`scores.precision`) and the kernels would overflow.
        """
        q_len, v_len = query.shape[1], value.shape[1]
        float16 = keras.backend.standardize_dtype(self.compute_dtype) == "float16"
        if (
            self.mode != "soft"
            or self.window is not None
            or any(returns)
            or projected_key is not None
            or (training and self.dropout > 0)
            or self.score_mod is not None
            or float16
            or not (is_static_int(q_len) and q_len > 0)
            or not (is_static_int(v_len) and v_len > 0)
            or (attention_mask is not None and len(attention_mask.shape) > 3)
        ):
            return None
        return dot_product_scale(self.score_layer, key.shape[-1])

    def _takes_fused_path(self, scale, mask, tensor):
        """Whether a call that can be fused (`scale`) takes the fused kernel:
        where the backend's is memory-efficient for the device, compute
        dtype and `mask` (a `dispatch.mask_kind`)."""
        return scale is not None and dispatch.fused_is_memory_efficient_here(
            self.compute_dtype, mask, tensor
        )

    def _takes_chunked_path(
        self,
        query,
        value,
        returns,
        attention_mask=None,
        projected_key=None,
        fused_scale=None,
        mask="none",
        hooked=False,
    ):
        """Whether the call uses `chunked_attention` (static shapes, flags).

        The decision reads the lengths known when the layer is called: an
        eager or jitted call sees concrete ints and chooses on them. A
        length unknown then (`None` in a TensorFlow graph, a JAX symbolic
        dimension while Keras infers a functional model's shapes) cannot
        be compared with `chunk_threshold`, so the call takes the full
        path; its outputs have the same shapes and values. With
        `chunk_threshold="auto"`, a call that can be fused (`fused_scale`)
        does not chunk where the fused kernel is memory-efficient for
        `mask` (a `dispatch.mask_kind`).
        """
        q_len, v_len = query.shape[1], value.shape[1]
        if (
            self.chunk_threshold is None
            or not is_static_int(q_len)
            or not is_static_int(v_len)
            or self.mode != "soft"
            or self.window is not None
            or any(returns)
            or projected_key is not None
            or isinstance(self.score_layer, Location)
        ):
            return False
        # `chunked_attention` reads `(Tq, Tv)` and `(B, Tq, Tv)` masks.
        if attention_mask is not None and len(
            ops.convert_to_tensor(attention_mask).shape
        ) not in (2, 3):
            return False
        return dispatch.takes_chunked_path(
            self.chunk_threshold,
            v_len,
            fused_scale is not None,
            self.compute_dtype,
            mask,
            query,
            hooked=hooked,
        )

    def _attend(
        self,
        query,
        value,
        key,
        mask,
        value_mask=None,
        training=None,
        query_positions=None,
        projected_key=None,
        score_mod=None,
    ):
        """Score, masked normalisation and weighted sum on rank-3 tensors.

        `score_mod` is the call's `score_mods.Bound` hook, or None.

        Returns `(context, weights, log_prob, distribution)`; `log_prob` is
        `None` in soft mode.
        """
        if projected_key is None:
            logits = self.score_layer(query, key)
        else:
            logits = self.score_layer.score_projected(query, projected_key)
        logits = ops.cast(logits, "float32")
        if score_mod is not None:
            logits, mask = score_mods.modify_scores(
                ops.expand_dims(logits, 1), mask, score_mod
            )
            logits = ops.squeeze(logits, 1)
            if mask is not None and len(mask.shape) == 4:
                mask = ops.squeeze(mask, 1)
        log_prior = None
        if self.window is not None:
            window_mask, log_prior = local_window(
                query,
                value,
                value_mask,
                query_positions,
                self.window,
                self.local,
                self.position_kernel,
                self.position_scale,
            )
            mask = window_mask if mask is None else ops.logical_and(mask, window_mask)
        if mask is not None:
            mask = ops.broadcast_to(mask, ops.shape(logits))

        if log_prior is None:
            distribution = masked_softmax(logits, mask)
        else:
            distribution = masked_softmax(logits + log_prior, mask)
        log_prob = None
        if self.mode == "soft":
            weights = distribution
            if log_prior is not None:
                # Luong eq. 10: softmax inside the window times the Gaussian.
                weights = masked_softmax(logits, mask) * ops.exp(log_prior)
            if training and self.dropout > 0:
                weights = keras.random.dropout(
                    weights, self.dropout, seed=self.seed_generator
                )
        else:
            logits = logits if log_prior is None else logits + log_prior
            weights, log_prob = hard_weights(
                logits,
                mask,
                training,
                self.hard_estimator,
                self.temperature,
                self.seed_generator,
            )

        context = ops.matmul(ops.cast(weights, value.dtype), value)
        return context, weights, log_prob, distribution

    def _check_call_arguments(self, return_log_prob, query_positions):
        if return_log_prob and self.mode != "hard":
            raise ValueError(
                "`return_log_prob=True` needs mode='hard'. "
                f"Received: mode={self.mode!r}"
            )
        if query_positions is not None and (
            self.window is None or self.local != "monotonic"
        ):
            raise ValueError(
                "`query_positions` only applies to local-m attention "
                "(window set, local='monotonic'). Received: "
                f"window={self.window}, local={self.local!r}"
            )

    def compute_mask(self, query, previous_mask=None):
        if isinstance(query, (list, tuple)):  # Keras's form: the query's mask
            if not previous_mask or previous_mask[0] is None:
                return None
            return ops.convert_to_tensor(previous_mask[0])
        return previous_mask

    def compute_output_shape(self, query_shape, value_shape=None, key_shape=None):
        if value_shape is None:  # Keras's form: a list of shapes
            query_shape, value_shape, _ = unpack_list("input_shape", query_shape)
        return (*query_shape[:-1], value_shape[-1])

    def compute_output_spec(
        self,
        query,
        value=None,
        key=None,
        return_attention_scores=False,
        return_log_prob=False,
        return_distribution=False,
        query_positions=None,
        **kwargs,
    ):
        self._check_call_arguments(return_log_prob, query_positions)
        if isinstance(query, (list, tuple)):
            query, value, key = unpack_list("inputs", query)
        key = value if key is None else key
        check_shapes(query.shape, value.shape, key.shape, any_rank=True)
        check_floating(query=query, value=value, key=key)
        weights_shape = (*query.shape[:-1], value.shape[-2])
        outputs = (
            keras.KerasTensor(
                self.compute_output_shape(query.shape, value.shape),
                dtype=self.compute_dtype,
            ),
            keras.KerasTensor(weights_shape, dtype="float32"),
            keras.KerasTensor(query.shape[:-1], dtype="float32"),
            keras.KerasTensor(weights_shape, dtype="float32"),
        )
        returns = (return_attention_scores, return_log_prob, return_distribution)
        return select(outputs, returns)

    def get_config(self):
        config = super().get_config()
        score = self._score_identifier
        if score is None:  # a score layer was given: save its config
            score = self.score_layer
        if self.score_mode is not None:  # built from Keras's arguments
            score = None
        else:
            score = keras.saving.serialize_keras_object(score)
        config.update(
            score=score,
            mode=self.mode,
            window=self.window,
            local=self.local,
            dropout=self.dropout,
            seed=self.seed,
            hard_estimator=self.hard_estimator,
            temperature=self.temperature,
            local_units=self.local_units,
            use_scale=self.use_scale,
            score_mode=self.score_mode,
            chunk_threshold=self.chunk_threshold,
            chunk_size=self.chunk_size,
        )
        if self.score_mod is not None:
            config["score_mod"] = self.score_mod
        return config
