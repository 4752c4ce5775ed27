"""Soft, hard (stochastic) and local attention over any alignment score."""

import dataclasses

import keras
from keras import ops

from keras_attention import scores
from keras_attention.arguments import int_argument
from keras_attention.layers import dispatch
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
# `keras.layers.Attention(score_mode=...)` -> the score with Keras's variables.
KERAS_SCORES = {"dot": "dot", "concat": "tanh_sum"}


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

    Modes:

    - `mode="soft"` (Bahdanau, Luong): the weights are the softmax of the
      scores, with optional dropout on the weights while training.
    - `mode="hard"` (Xu et al. 2015, stochastic hard attention): each query
      attends to a single value position. While training the position is
      sampled from the soft distribution; with `hard_estimator="reinforce"`
      no gradient flows through the sample, and the model trains the score
      with REINFORCE using the log-probability of the sampled positions
      (`return_log_prob=True`). With `hard_estimator="gumbel"` the position
      is `argmax(logits + Gumbel noise)` and the weights are the
      straight-through estimator `one_hot + y - stop_gradient(y)` where
      `y = softmax((logits + noise) / temperature)`: the forward pass uses
      the one-hot weights, the backward pass the gradient of `y`. At
      inference (`training` falsy) the position is the argmax of the soft
      distribution. The returned attention weights are the one-hot
      selections (zeros for a row with nothing to attend to); the soft
      distribution they were drawn from is returned with
      `return_distribution=True`. `dropout` is not used in hard mode. With
      no value position at all (`Tv = 0`) both modes return a zero context,
      empty weights and a log-probability of 0.

    Local attention (Luong et al. 2015, section 3.2), with `window=D`: the
    query at row `t` attends only to value positions `s` with
    `|s - p_t| <= D`, where positions count from 0 and `S` is the source
    length, the number of valid value positions of each sequence (the sum
    of the value mask, assuming padding at the end) or `Tv` without a mask.

    - `local="monotonic"` (local-m): `p_t = min(t, S - 1)`. The query rows
      are aligned with the start of the value sequence (row `t` is centred
      on value position `t`, as in Luong's `p_t = t`) whatever `Tq` and `Tv`
      are; rows past the end of the source attend to its last `D + 1`
      positions instead of nothing. Pass `query_positions` to centre rows
      elsewhere, e.g. the step index when decoding one query at a time
      (they are clipped to `S - 1` in the same way).
    - `local="predictive"` (local-p): `p_t = (S - 1) sigmoid(v_p^T tanh(W_p
      q_t))`, Luong's eq. 9 with 0-based positions, so that `p_t` spans
      exactly the valid positions `[0, S - 1]` (Luong writes `S sigmoid(.)`
      for 1-based positions). The softmax weights inside the window are
      multiplied by the Gaussian `exp(-(s - p_t)^2 / (2 sigma^2))` with
      `sigma = D / 2` (eq. 10) and, as in the paper, not renormalised, so
      rows sum to less than 1. `W_p` (`position_kernel`, shape
      `(Dq, local_units)`) and `v_p` (`position_scale`, `(local_units,)`)
      are weights of this layer. Hard mode samples from the renormalised
      product, i.e. the softmax of `score - (s - p_t)^2 / (2 sigma^2)`,
      which is also what `return_distribution` gives in both modes.

    Windows, masks and modes combine freely (e.g. hard local-p attention).

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
        **kwargs,
    ):
        super().__init__(**kwargs)
        chunk_threshold, chunk_size = dispatch.check(chunk_threshold, chunk_size)
        _check_choice("mode", mode, MODES)
        _check_choice("local", local, LOCAL_MODES)
        _check_choice("hard_estimator", hard_estimator, HARD_ESTIMATORS)
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
        if use_scale is not None and not isinstance(use_scale, bool):
            raise ValueError(
                f"`use_scale` must be a bool. Received: use_scale={use_scale!r}"
            )
        if score_mode is not None:
            _check_choice("score_mode", score_mode, tuple(KERAS_SCORES))
        if use_scale is not None or score_mode is not None:
            if score is not None:
                raise ValueError(
                    "Pass either `score` or Keras's `score_mode` / `use_scale`, "
                    f"not both. Received: score={score!r}, "
                    f"score_mode={score_mode!r}, use_scale={use_scale!r}"
                )
            score_mode = score_mode or "dot"
            use_scale = bool(use_scale)
            score = {
                "class_name": KERAS_SCORES[score_mode],
                "config": {"use_scale": use_scale},
            }
        elif score is None:
            score = "scaled_dot"
        _check_score(score)
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
        self.supports_masking = True
        self.seed_generator = None
        if mode == "hard" or dropout > 0:
            self.seed_generator = keras.random.SeedGenerator(seed)

    def build(self, query_shape, value_shape=None, key_shape=None):
        if value_shape is None:  # Keras's form: a list of shapes
            query_shape, value_shape, key_shape = _unpack_list(
                "input_shape", query_shape
            )
        key_shape = value_shape if key_shape is None else key_shape
        _check_shapes(query_shape, value_shape, key_shape, any_rank=True)
        if self.score_layer is None:
            self.score_layer = self._make_score()
        if not self.score_layer.built:
            self.score_layer.build(_rank3(query_shape), _rank3(key_shape))
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
        mask=None,
    ):
        returns = (return_attention_scores, return_log_prob, return_distribution)
        self._check_call_arguments(return_log_prob, query_positions)
        if isinstance(query, (list, tuple)):
            if isinstance(query_mask, (list, tuple)):
                # Keras fills `query_mask` with the list's own Keras masks
                # when another tensor (`mask`) is passed: not the user's.
                query_mask = None
            _check_list_call(
                value=value,
                key=key,
                query_mask=query_mask,
                value_mask=value_mask,
                key_mask=key_mask,
                attention_mask=attention_mask,
                query_positions=query_positions,
                projected_key=projected_key,
            )
            call = _list_call(query, mask, use_causal_mask)
        else:
            call = _tensor_call(
                query, value, key, query_mask, value_mask, key_mask, mask
            )
            call.attention_mask, call.use_causal_mask = attention_mask, use_causal_mask
            call.query_positions, call.projected_key = query_positions, projected_key
        call.training, call.returns = training, returns
        path = self._route(call)
        context, *others = path(call)
        if call.batch_shape is not None:
            context = _unflatten_batch(context, call.batch_shape)
            others = [_unflatten_batch(x, call.batch_shape) for x in others]
        if call.row_mask is not None:
            row = ops.expand_dims(call.row_mask, -1)
            context = ops.where(row, context, ops.zeros_like(context))
        return _select((context, *others), returns)

    def _route(self, call):
        """The path method that computes this call's context.

        The one place a path is chosen, on static shapes and Python flags,
        by the rules of `keras_attention.layers.dispatch`. Each path takes
        the `_Call` and returns `(context, weights, log_prob,
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
            or float16
            or not (_is_static_int(q_len) and q_len > 0)
            or not (_is_static_int(v_len) and v_len > 0)
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
            or not _is_static_int(q_len)
            or not _is_static_int(v_len)
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
    ):
        """Score, masked normalisation and weighted sum on rank-3 tensors.

        Returns `(context, weights, log_prob, distribution)`; `log_prob` is
        `None` in soft mode.
        """
        if projected_key is None:
            logits = self.score_layer(query, key)
        else:
            logits = self.score_layer.score_projected(query, projected_key)
        logits = ops.cast(logits, "float32")
        log_prior = None
        if self.window is not None:
            window_mask, log_prior = self._local_window(
                query, value, value_mask, query_positions
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
            weights, log_prob = self._hard_weights(logits, mask, training)

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

    def _local_window(self, query, value, value_mask, query_positions):
        """Returns the window mask `(B|1, Tq, Tv)` and the local-p log prior.

        The log prior is `-(s - p_t)^2 / (2 sigma^2)` (float32), or `None`
        for local-m.
        """
        value_length = ops.shape(value)[1]
        if value_mask is None:
            length = ops.cast(value_length, "float32")
        else:
            length = ops.sum(ops.cast(value_mask, "float32"), axis=-1, keepdims=True)
        if self.local == "monotonic":
            if query_positions is None:
                centre = ops.arange(ops.shape(query)[1])
            else:
                centre = ops.convert_to_tensor(query_positions)
            centre = ops.cast(centre, "float32")
            if len(centre.shape) == 1:
                centre = ops.expand_dims(centre, 0)
            centre = ops.minimum(centre, length - 1.0)
        else:
            query = ops.cast(query, "float32")
            hidden = ops.tanh(ops.matmul(query, self.position_kernel))
            gate = ops.sigmoid(ops.einsum("btu,u->bt", hidden, self.position_scale))
            centre = (length - 1.0) * gate
        positions = ops.cast(ops.arange(value_length), "float32")
        distance = positions[None, None, :] - ops.expand_dims(centre, -1)
        window_mask = ops.less_equal(ops.abs(distance), float(self.window))
        log_prior = None
        if self.local == "predictive":
            sigma = self.window / 2.0
            log_prior = -ops.square(distance) / (2.0 * sigma**2)
        return window_mask, log_prior

    def _hard_weights(self, logits, mask, training):
        """One-hot weights and log-probabilities of the selected positions.

        The position is chosen among `0, ..., Tv`, where `Tv` is an extra
        candidate at `-3e38`: never chosen while a real position exists, the
        only one when `Tv = 0` (also when that is known only at run time),
        and its one-hot over the `Tv` real positions is empty: a zero
        context and a log-probability of 0, as soft attention gives.
        """
        value_length = ops.shape(logits)[-1]
        filled = logits
        if mask is not None:
            filled = ops.where(mask, logits, ops.full_like(logits, -1e30))
        log_distribution = ops.log_softmax(filled, axis=-1)
        soft_sample = None
        if training and self.hard_estimator == "gumbel":
            uniform = keras.random.uniform(
                ops.shape(logits), minval=1e-20, maxval=1.0, seed=self.seed_generator
            )
            filled = filled - ops.log(-ops.log(uniform))
            soft_sample = masked_softmax(filled / self.temperature, mask)
        # The extra candidate is finite (below the -1e30 fill of masked
        # positions): a row of only -inf has no distribution to sample
        # (PyTorch's `multinomial` rejects it).
        candidates = ops.pad(
            ops.cast(filled, "float32"),
            ((0, 0), (0, 0), (0, 1)),
            constant_values=-3e38,
        )
        if training and self.hard_estimator == "reinforce":
            flat = ops.reshape(candidates, (-1, value_length + 1))
            index = keras.random.categorical(flat, 1, seed=self.seed_generator)
            index = ops.reshape(index, ops.shape(logits)[:-1])
        else:
            index = ops.argmax(candidates, axis=-1)
        positions = ops.arange(value_length, dtype=index.dtype)
        one_hot = ops.cast(ops.equal(ops.expand_dims(index, -1), positions), "float32")
        if mask is not None:  # a row with nothing to attend to selects nothing
            row_valid = ops.any(mask, axis=-1, keepdims=True)
            one_hot = one_hot * ops.cast(row_valid, "float32")
        one_hot = ops.stop_gradient(one_hot)
        log_prob = ops.sum(one_hot * log_distribution, axis=-1)
        weights = one_hot
        if soft_sample is not None:
            # Straight through: forward value `one_hot`, gradient of `soft_sample`.
            weights = one_hot + (soft_sample - ops.stop_gradient(soft_sample))
        return weights, log_prob

    def compute_mask(self, query, previous_mask=None):
        if isinstance(query, (list, tuple)):  # Keras's form: the query's mask
            if not previous_mask or previous_mask[0] is None:
                return None
            return ops.convert_to_tensor(previous_mask[0])
        return previous_mask

    def compute_output_shape(self, query_shape, value_shape=None, key_shape=None):
        if value_shape is None:  # Keras's form: a list of shapes
            query_shape, value_shape, _ = _unpack_list("input_shape", query_shape)
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
            query, value, key = _unpack_list("inputs", query)
        key = value if key is None else key
        _check_shapes(query.shape, value.shape, key.shape, any_rank=True)
        _check_floating(query=query, value=value, key=key)
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
        return _select(outputs, returns)

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
        return config


@dataclasses.dataclass
class _Call:
    """One call of `Attention`, as its route and paths read it.

    `query_mask` is the mask of the rows inside the attention; Keras's list
    call has none there (`row_mask` zeroes its masked rows after, and
    `batch_shape` restores its batch axes), and its causal mask aligns the
    first query with the first value (`causal_from_start`). `padding` is
    `dispatch.triton_padding` of the masks as the caller gave them;
    `scale` and `kind` are set by `_route`.
    """

    query: object
    value: object
    key: object
    query_mask: object = None
    value_mask: object = None
    attention_mask: object = None
    use_causal_mask: bool = False
    causal_from_start: bool = False
    training: object = None
    returns: tuple = (False, False, False)
    query_positions: object = None
    projected_key: object = None
    padding: object = None
    row_mask: object = None
    batch_shape: object = None
    scale: object = None
    kind: str = "none"


def _tensor_call(query, value, key, query_mask, value_mask, key_mask, mask):
    """The `_Call` of `layer(query, value, key, ...)`, checked."""
    if mask is not None:
        raise ValueError(
            "`mask=[query_mask, value_mask]` goes with Keras's list call "
            "`layer([query, value], mask=...)`; the tensor call takes "
            f"`query_mask` and `value_mask`. Received: mask={mask!r}"
        )
    if value is None:
        raise ValueError(
            "Attention needs a value: call it as `layer(query, value)` or "
            f"`layer([query, value])`. Received: value={value!r}"
        )
    key = value if key is None else key
    _check_shapes(query.shape, value.shape, key.shape)
    _check_floating(query=query, value=value, key=key)
    # The masks as given: `triton_padding` compares the objects.
    padding = dispatch.triton_padding(query_mask, (value_mask, key_mask))
    if key_mask is not None:
        key_mask = ops.cast(key_mask, "bool")
        value_mask = (
            key_mask
            if value_mask is None
            else ops.logical_and(ops.cast(value_mask, "bool"), key_mask)
        )
    return _Call(query, value, key, query_mask, value_mask, padding=padding)


def _list_call(inputs, mask, use_causal_mask):
    """The `_Call` of Keras's `layer([query, value(, key)], mask=[qm, vm])`.

    As `keras.layers.Attention`: the query mask only zeroes the output
    rows, the causal mask aligns the first query with the first value,
    `mask[2]` (a key mask) is ignored, and inputs of rank > 3 have several
    batch axes (they are flattened into one around the attention).
    """
    query, value, key = _unpack_list("inputs", inputs)
    key = value if key is None else key
    query_mask = value_mask = None
    if mask is not None:
        if not isinstance(mask, (list, tuple)) or not 2 <= len(mask) <= 3:
            raise ValueError(
                "Attention's list call takes `mask=[query_mask, "
                f"value_mask]`. Received: mask={mask!r}"
            )
        query_mask, value_mask = mask[0], mask[1]
    # One mask object for queries and values (Keras's masks of `[x, x]`)
    # is a self-attention padding JAX's Triton kernel takes.
    shared = query_mask is not None and query_mask is value_mask
    padding = "shared" if shared else dispatch.triton_padding(None, (value_mask,))
    _check_shapes(query.shape, value.shape, key.shape, any_rank=True)
    _check_floating(query=query, value=value, key=key)
    query_shape, value_shape = ops.shape(query), ops.shape(value)
    batch_shape = None
    if query_mask is not None:
        query_mask = ops.broadcast_to(ops.cast(query_mask, "bool"), query_shape[:-1])
    if value_mask is not None:
        value_mask = ops.broadcast_to(ops.cast(value_mask, "bool"), value_shape[:-1])
    if len(query.shape) > 3:
        batch_shape = query_shape[:-2]
        query, value, key = (_flatten_batch(x, 2) for x in (query, value, key))
        if value_mask is not None:
            value_mask = _flatten_batch(value_mask, 1)
    return _Call(
        query,
        value,
        key,
        value_mask=value_mask,
        use_causal_mask=use_causal_mask,
        causal_from_start=True,
        padding=padding,
        row_mask=query_mask,
        batch_shape=batch_shape,
    )


def _is_static_int(dim):
    """Whether a shape entry is a known length (not `None` or symbolic)."""
    return isinstance(dim, int) and not isinstance(dim, bool)


def _select(outputs, returns):
    """The context, then the outputs whose `return_*` flag is set."""
    context, *others = outputs
    chosen = [output for output, wanted in zip(others, returns) if wanted]
    return (context, *chosen) if chosen else context


def _unpack_list(name, inputs):
    """Splits Keras's `[query, value(, key)]` list; `key` may be `None`."""
    if (
        not isinstance(inputs, (list, tuple))
        or not 2 <= len(inputs) <= 3
        or any(x is None or isinstance(x, int) for x in inputs[:2])  # one shape
    ):
        raise ValueError(
            "Attention's list call takes [query, value] or [query, value, key]. "
            f"Received: {name}={inputs!r}"
        )
    key = inputs[2] if len(inputs) == 3 else None
    return inputs[0], inputs[1], key


def _check_list_call(**arguments):
    given = [name for name, value in arguments.items() if value is not None]
    if given:
        raise ValueError(
            "Keras's list call `layer([query, value(, key)], mask=[query_mask, "
            "value_mask])` takes no separate tensors or masks; use the tensor "
            "call `layer(query, value, key, ...)` for them. Received: "
            + ", ".join(f"{name}={arguments[name]!r}" for name in given)
        )


def _flatten_batch(x, inner_rank):
    """Merges the leading batch axes of `x` into one."""
    return ops.reshape(x, (-1, *ops.shape(x)[-inner_rank:]))


def _unflatten_batch(x, batch_shape):
    """Splits the first axis of `x` (or `None`) back into `batch_shape`."""
    if x is None:
        return None
    return ops.reshape(x, (*batch_shape, *ops.shape(x)[1:]))


def _rank3(shape):
    """The `(batch, T, D)` shape seen by the score when batch axes are merged."""
    shape = tuple(shape)
    return shape if len(shape) == 3 else (None, *shape[-2:])


def _check_choice(name, value, choices):
    if value not in choices:
        raise ValueError(
            f"`{name}` must be one of {', '.join(map(repr, choices))}. "
            f"Received: {name}={value!r}"
        )


def _check_score(score):
    if isinstance(score, str):
        if score.lower() not in scores.ALIASES:
            raise ValueError(
                f"Unknown score {score!r}. Valid names are: "
                f"{', '.join(sorted(scores.ALIASES))}. Received: score={score!r}"
            )
    elif not isinstance(score, (dict, scores.Score)):
        raise ValueError(
            "`score` must be a name, a config dict or a `keras_attention."
            f"scores.Score` layer. Received: score={score!r}"
        )


def _check_floating(**tensors):
    """Raises a `TypeError` naming the first tensor that is not floating.

    An integer or boolean query, value or key would give an integer
    context (truncated weights): Keras's `Attention` fails on them too.
    """
    for name, tensor in tensors.items():
        dtype = keras.backend.standardize_dtype(tensor.dtype)
        if not keras.backend.is_float_dtype(dtype):
            raise TypeError(
                f"Attention needs floating-point inputs (cast them first, "
                f"e.g. with keras.ops.cast(x, 'float32')). Received: "
                f"{name}.dtype={dtype}"
            )


def _check_shapes(query_shape, value_shape, key_shape, any_rank=False):
    shapes = (
        f"Received: query.shape={tuple(query_shape)}, "
        f"value.shape={tuple(value_shape)}, key.shape={tuple(key_shape)}"
    )
    ranks = {len(query_shape), len(value_shape), len(key_shape)}
    if any_rank and (len(ranks) > 1 or min(ranks) < 3):
        raise ValueError(
            "Attention expects query (..., Tq, Dq), value (..., Tv, Dv) and "
            f"key (..., Tv, Dk) of equal rank 3 or more. {shapes}"
        )
    if not any_rank and ranks != {3}:
        raise ValueError(
            "Attention expects query (batch, Tq, Dq), value (batch, Tv, Dv) "
            "and key (batch, Tv, Dk) of rank 3 (the list call "
            f"`layer([query, value])` also takes more batch axes). {shapes}"
        )
    for axis in range(len(query_shape) - 2):
        sizes = {s[axis] for s in (query_shape, value_shape, key_shape)} - {None}
        if len(sizes) > 1:
            raise ValueError(
                f"query, value and key must have the same batch size. {shapes}"
            )
    if (
        None not in (value_shape[-2], key_shape[-2])
        and value_shape[-2] != key_shape[-2]
    ):
        raise ValueError("key and value must have the same length (axis -2). " + shapes)
