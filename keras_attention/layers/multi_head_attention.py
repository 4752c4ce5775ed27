"""Multi-head attention with any alignment function and a decoding cache."""

import keras
from keras import ops
from keras.src.backend import set_keras_mask

from keras_attention import scores
from keras_attention.layers.masking import masked_softmax, merge_masks
from keras_attention.scores.scaled_dot import ScaledDot


@keras.saving.register_keras_serializable(package="keras_attention")
class MultiHeadAttention(keras.layers.MultiHeadAttention):
    """Multi-head attention with a pluggable score and a key/value cache.

    A drop-in for `keras.layers.MultiHeadAttention`: the same constructor
    arguments, call signature and weight list, so
    `ours.set_weights(keras_mha.get_weights())` reproduces Keras's outputs
    (except on a fully masked query row: its context is zeros here, so its
    output is the output projection's bias, as in Keras's explicit path;
    Keras's fused path averages every value uniformly there).
    Two additions:

    - `score`: any alignment function of `keras_attention.scores`, computed
      per head. The heads are folded into the batch, `(batch * num_heads,
      T, key_dim)`, and one score layer scores them all, so a parametrised
      score (`"general"`, `"additive"`, ...) shares its weights across heads.
      Its weights come after the Keras projection weights in `weights`. A
      `Score` instance is copied from its config, in this layer's dtype
      policy; its own weights are not used.
    - `cache` / `cache_update_index` call arguments for incremental decoding,
      as in keras-hub's `CachedMultiHeadAttention`.

    The attention weights are a float32 `masked_softmax` (masked entries get
    exactly 0, a fully masked row is all zeros, never NaN), then dropout,
    then a cast back to the compute dtype. When the score is scaled dot, the
    weights are not returned, no dropout is active and `value_dim ==
    key_dim` (a requirement of some backends' kernels), the layer takes the
    fused `keras.ops.dot_product_attention` path instead; there the rows
    whose mask is all `False` get the output projection's bias alone, as the
    explicit path gives them (a zero context projected). That is done after
    the projection, where XLA fuses it into the bias add, so the padding
    case costs no extra pass over the context.

    Inputs of rank other than 3 or a non-default `attention_axes` are
    handed to the Keras implementation, which only supports
    `score="scaled_dot"` and no cache.

    Args:
        num_heads: int. Number of attention heads.
        key_dim: int. Size of each head for query and key.
        value_dim: int or None. Size of each head for value. Defaults to
            `None` (`key_dim`).
        dropout: float. Dropout rate on the attention weights. Defaults to
            `0.0`.
        use_bias: bool. Whether the projections use biases. Defaults to
            `True`.
        output_shape: int, tuple or None. Output shape besides batch and
            sequence dims. Defaults to `None` (the query's last dimension).
        attention_axes: int, tuple or None. As in Keras. Defaults to `None`.
        sliding_window: int or None. Each query attends only to keys less
            than `sliding_window` positions away. Defaults to `None`.
        flash_attention: bool or None. Passed to
            `keras.ops.dot_product_attention` on the fused path. Defaults to
            `None` (the backend decides).
        kernel_initializer: initializer of the projection kernels. Defaults
            to `"glorot_uniform"`.
        bias_initializer: initializer of the projection biases. Defaults to
            `"zeros"`.
        kernel_regularizer: regularizer of the kernels. Defaults to `None`.
        bias_regularizer: regularizer of the biases. Defaults to `None`.
        activity_regularizer: regularizer of the projections' outputs.
            Defaults to `None`.
        kernel_constraint: constraint of the kernels. Defaults to `None`.
        bias_constraint: constraint of the biases. Defaults to `None`.
        use_gate: bool. Gate the attention output with a sigmoid projection
            of the query (Qiu et al., 2025). Defaults to `False`.
        seed: int or None. Seed of the dropout. Defaults to `None`.
        score: str, dict or `keras_attention.scores.Score`. Alignment
            function (see `keras_attention.scores.get`). Defaults to
            `"scaled_dot"`, which is Keras's `q k^T / sqrt(key_dim)`.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        query: tensor `(batch, Tq, dim)`.
        value: tensor `(batch, Tv, dim)`. With a cache and no
            `cache_update_index` it is ignored (the cache holds the values).
        key: optional tensor `(batch, Tv, dim)`. Defaults to `value`.
        query_mask: optional boolean `(batch, Tq)`. Defaults to the Keras
            mask of `query`, if any. (Keras's layer ignores an explicit
            `query_mask`; this one honours it.)
        value_mask: optional boolean `(batch, Tv)`; with a cache,
            `(batch, max_length)`. Defaults to the Keras mask of `value`.
        key_mask: optional boolean, like `value_mask`, for `key`.
        attention_mask: optional boolean `(batch, Tq, Tv)`, `True` = attend.
            With a cache, `Tv` is the cache's `max_length`.
        return_attention_scores: bool. Also return the attention weights
            `(batch, num_heads, Tq, Tv)`. Defaults to `False`.
        training: bool. Dropout only in training mode.
        use_causal_mask: bool. Query `i` attends only to keys `j <= i`
            (aligned at the last position when `Tq != Tv`, where Keras aligns
            at the first; with `cache_update_index`, to keys
            `j <= cache_update_index + i`). Defaults to `False`.
        cache: optional tensor `(batch, 2, max_length, num_heads, key_dim)`:
            projected keys at `[:, 0]`, values at `[:, 1]`. Requires
            `value_dim == key_dim`; a `"location"` score needs its
            `max_length` set to the cache's.
        cache_update_index: optional int or int tensor. Where to write the
            projections of the new `key`/`value` into `cache`. `None` with a
            cache uses the cache as is (precomputed cross-attention keys).

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

    Reference:
        Vaswani et al., 2017, "Attention Is All You Need", section 3.2.2.
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
        **kwargs,
    ):
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
        self._fused_score = isinstance(scores.get(score), ScaledDot)
        self.score = score
        self._score_layer = None
        self._keras_path = False

    def build(self, query_shape, value_shape, key_shape=None):
        query_shape = tuple(query_shape)
        value_shape = tuple(value_shape)
        key_shape = value_shape if key_shape is None else tuple(key_shape)
        _check_batch(query_shape, value_shape, key_shape)
        super().build(query_shape, value_shape, key_shape)
        self._keras_path = len(query_shape) != 3 or self._attention_axes != (1,)
        if self._keras_path and not self._fused_score:
            raise ValueError(
                "A score other than 'scaled_dot' needs inputs of rank 3 "
                "(batch, T, dim) and the default `attention_axes`. Received: "
                f"query_shape={query_shape}, attention_axes="
                f"{self._attention_axes}, score={self.score!r}"
            )
        if self._keras_path:
            return
        score = scores.get(self.score)
        config = {**score.get_config(), "dtype": self.dtype_policy, "name": "score"}
        self._score_layer = type(score).from_config(config)
        head_query = (None, query_shape[1], self._key_dim)
        head_key = (None, key_shape[1], self._key_dim)
        self._score_layer.build(head_query, head_key)

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
    ):
        if self._keras_path:
            if cache is not None or cache_update_index is not None:
                raise ValueError(
                    "The cache needs inputs of rank 3 and the default "
                    f"`attention_axes`. Received: query.shape={query.shape}"
                )
            return super().call(
                query,
                value,
                key=key,
                query_mask=query_mask,
                value_mask=value_mask,
                key_mask=key_mask,
                attention_mask=attention_mask,
                return_attention_scores=return_attention_scores,
                training=training,
                use_causal_mask=use_causal_mask,
            )
        if key is None:
            key = value
        _check_batch(query.shape, value.shape, key.shape)
        # `Layer.__call__` already filled the masks from the inputs' Keras
        # masks; drop those so the projection layers do not warn.
        for tensor in (query, value, key):
            set_keras_mask(tensor, None)

        gate = self._gate_dense(query) if self._use_gate else None
        projected_query = self._query_dense(query)
        key, value, cache = self._project_key_value(
            key, value, cache, cache_update_index
        )
        dropout_active = self._dropout > 0.0 and bool(training)
        fused = (
            self._fused_score
            and self._value_dim == self._key_dim
            and not return_attention_scores
            and not dropout_active
        )
        mask, causal_only = self._attention_mask(
            projected_query,
            key,
            query_mask,
            value_mask,
            key_mask,
            attention_mask,
            use_causal_mask,
            cache_update_index,
            fused,
        )
        row_valid = None
        if fused:
            if (
                mask is not None
                and attention_mask is None
                and not use_causal_mask
                and self._sliding_window is None
            ):
                # Padding masks only: the kernel gets the `(B, 1, Tv)` key
                # mask (broadcast over queries, no `(B, Tq, Tv)` tensor), and
                # which rows have anything to attend to follows from the 1-D
                # masks, O(B * (Tq + Tv)).
                row_valid = _rows_with_keys(query_mask, value_mask, key_mask)
                keys = _valid_keys(value_mask, key_mask)
                mask = None if keys is None else keys[:, None, :]
            elif mask is not None:
                row_valid = ops.any(mask, axis=-1)
            output = self._fused_attention(
                projected_query, key, value, mask, causal_only
            )
            weights = None
        else:
            output, weights = self._attention(
                projected_query, key, value, mask, training
            )
        if gate is not None:
            output = ops.multiply(output, gate)
        output = self._output_dense(output)
        if row_valid is not None:
            output = self._empty_rows_to_bias(output, row_valid)

        if return_attention_scores and cache is not None:
            return output, weights, cache
        if return_attention_scores:
            return output, weights
        if cache is not None:
            return output, cache
        return output

    def _project_key_value(self, key, value, cache, cache_update_index):
        """Projects key and value, reading and writing the cache."""
        if cache is None:
            if cache_update_index is not None:
                raise ValueError(
                    "`cache_update_index` should not be set if `cache` is "
                    f"`None`. Received: cache_update_index={cache_update_index}"
                )
            return self._key_dense(key), self._value_dense(value), None
        self._check_cache(cache)
        key_cache = cache[:, 0, ...]
        value_cache = cache[:, 1, ...]
        if cache_update_index is None:
            return key_cache, value_cache, cache
        start = [0, cache_update_index, 0, 0]
        key = ops.slice_update(
            key_cache, start, ops.cast(self._key_dense(key), key_cache.dtype)
        )
        value = ops.slice_update(
            value_cache, start, ops.cast(self._value_dense(value), value_cache.dtype)
        )
        return key, value, ops.stack((key, value), axis=1)

    def _check_cache(self, cache):
        shape = tuple(cache.shape)
        expected = (2, None, self._num_heads, self._key_dim)
        if self._value_dim != self._key_dim:
            raise ValueError(
                "The cache stacks keys and values, so it needs "
                f"`value_dim == key_dim`. Received: key_dim={self._key_dim}, "
                f"value_dim={self._value_dim}"
            )
        if len(shape) != 5 or any(
            e is not None and s is not None and s != e
            for s, e in zip(shape[1:], expected, strict=True)
        ):
            raise ValueError(
                "`cache` must have shape (batch, 2, max_length, num_heads="
                f"{self._num_heads}, key_dim={self._key_dim}). Received: "
                f"cache.shape={shape}"
            )

    def _attention_mask(
        self,
        query,
        key,
        query_mask,
        value_mask,
        key_mask,
        attention_mask,
        use_causal_mask,
        cache_update_index,
        fused,
    ):
        """Merges every mask into `(batch or 1, Tq, Tv)`, or None.

        Returns the mask and whether the causal mask is the only one and the
        fused kernel can apply it by itself (then the mask is None).
        """
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
        causal_only = (
            fused
            and use_causal_mask
            and query_mask is None
            and value_mask is None
            and attention_mask is None
            and self._sliding_window is None
            and cache_update_index is None
            and query.shape[1] is not None
            and query.shape[1] == key.shape[1]
        )
        if causal_only:
            return None, True
        offset_causal = use_causal_mask and cache_update_index is not None
        mask = merge_masks(
            query,
            key,
            query_mask=query_mask,
            value_mask=value_mask,
            attention_mask=attention_mask,
            use_causal_mask=use_causal_mask and not offset_causal,
        )
        extra = []
        if offset_causal:
            rows = ops.arange(ops.shape(query)[1]) + cache_update_index
            cols = ops.arange(ops.shape(key)[1])
            extra.append(ops.expand_dims(rows[:, None] >= cols[None, :], 0))
        if self._sliding_window is not None:
            extra.append(self._compute_sliding_window_mask(query, key))
        for part in extra:
            mask = part if mask is None else ops.logical_and(mask, part)
        return mask, False

    def _fused_attention(self, query, key, value, mask, causal_only):
        """Scaled dot-product attention through `ops.dot_product_attention`.

        Keras's kernel averages every value uniformly on a query row with
        nothing to attend to; `call` then replaces those rows.
        """
        return ops.dot_product_attention(
            query,
            key,
            value,
            mask=None if mask is None else ops.expand_dims(mask, 1),
            scale=self._inverse_sqrt_key_dim,
            is_causal=causal_only,
            flash_attention=self._flash_attention,
        )

    def _empty_rows_to_bias(self, output, row_valid):
        """Rows where `row_valid` `(B, Tq)` or `(B, 1)` is False get the bias.

        That is the projection of a zero context, what the explicit path
        gives a fully masked row; selecting after the projection (instead
        of zeroing the `(B, Tq, heads, dim)` context before it) fuses into
        the bias add under XLA.
        """
        valid = ops.broadcast_to(row_valid, ops.shape(output)[:2])[:, :, None]
        bias = getattr(self._output_dense, "bias", None)
        fill = 0.0 if bias is None else ops.cast(bias, output.dtype)
        return ops.where(valid, output, fill)

    def _attention(self, query, key, value, mask, training):
        """Score per head, masked float32 softmax, dropout, weighted sum."""
        batch = ops.shape(query)[0]
        q_len, k_len = ops.shape(query)[1], ops.shape(key)[1]
        heads_q = ops.reshape(
            ops.transpose(query, (0, 2, 1, 3)), (-1, q_len, self._key_dim)
        )
        heads_k = ops.reshape(
            ops.transpose(key, (0, 2, 1, 3)), (-1, k_len, self._key_dim)
        )
        raw = self._score_layer(heads_q, heads_k)
        raw = ops.reshape(raw, (batch, self._num_heads, q_len, k_len))
        if mask is not None:
            mask = ops.expand_dims(mask, 1)
        weights = masked_softmax(raw, mask)
        weights = ops.cast(weights, self.compute_dtype)
        dropped = self._dropout_layer(weights, training=training)
        output = ops.einsum("bhqk,bkhd->bqhd", dropped, value)
        return output, weights

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
    ):
        key_shape = None if key is None else key.shape
        output_shape = self.compute_output_shape(query.shape, value.shape, key_shape)
        outputs = [keras.KerasTensor(output_shape, dtype=self.compute_dtype)]
        if return_attention_scores:
            length = value.shape[1] if cache is None else cache.shape[2]
            scores_shape = (query.shape[0], self._num_heads, query.shape[1], length)
            outputs.append(keras.KerasTensor(scores_shape, dtype=self.compute_dtype))
        if cache is not None:
            outputs.append(keras.KerasTensor(cache.shape, dtype=cache.dtype))
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def get_config(self):
        config = super().get_config()
        config["score"] = self.score
        return config


def _check_batch(query_shape, value_shape, key_shape):
    sizes = {query_shape[0], value_shape[0], key_shape[0]} - {None}
    if len(sizes) > 1:
        raise ValueError(
            "query, value and key must have the same batch size. Received: "
            f"query.shape={tuple(query_shape)}, value.shape="
            f"{tuple(value_shape)}, key.shape={tuple(key_shape)}"
        )


def _valid_keys(value_mask, key_mask):
    """`(B, Tv)` bool: keys both padding masks keep, or None without either."""
    keys = None
    for m in (value_mask, key_mask):
        if m is not None:
            m = ops.cast(m, "bool")
            keys = m if keys is None else ops.logical_and(keys, m)
    return keys


def _rows_with_keys(query_mask, value_mask, key_mask):
    """`(B, Tq)` or `(B, 1)` bool: rows with at least one key under padding masks."""
    keys = _valid_keys(value_mask, key_mask)
    rows = None if keys is None else ops.any(keys, axis=-1, keepdims=True)
    if query_mask is not None:
        query_mask = ops.cast(query_mask, "bool")
        rows = query_mask if rows is None else ops.logical_and(query_mask, rows)
    return rows
