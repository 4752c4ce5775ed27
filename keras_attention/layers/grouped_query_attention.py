"""Grouped-query attention: `MultiHeadAttention` with fewer key/value heads."""

import keras

from keras_attention.layers.multi_head_attention import MultiHeadAttention


@keras.saving.register_keras_serializable(package="keras_attention")
class GroupedQueryAttention(MultiHeadAttention):
    """Grouped-query attention with a pluggable score and a key/value cache.

    A drop-in for `keras.layers.GroupQueryAttention`: the same constructor
    arguments, call signature, weights and variable names, so
    `ours.set_weights(keras_gqa.get_weights())` reproduces Keras's outputs.
    `num_key_value_heads` key and value heads each serve `num_query_heads
    // num_key_value_heads` query heads (Ainslie et al., 2023); `1` is
    multi-query attention, `num_query_heads` multi-head attention.

    It is our `MultiHeadAttention` (`num_heads=num_query_heads`,
    `key_dim=value_dim=head_dim`) with fewer key/value heads, and takes the
    same paths by the same rules: the chunked and windowed paths read each
    key/value head in place for every query head of its group (nothing is
    repeated in memory), the decoding cache holds `num_key_value_heads`
    heads and a call on it groups the queries per key/value head (the
    cache is never repeated), and Keras's hook `_compute_attention` gets
    the keys and values repeated to one per query head, as on Keras's
    class.

    Args:
        head_dim, num_query_heads, num_key_value_heads, dropout, use_bias,
            sliding_window, flash_attention, kernel_initializer,
            bias_initializer, kernel_regularizer, bias_regularizer,
            activity_regularizer, kernel_constraint, bias_constraint,
            use_gate, seed: as in `keras.layers.GroupQueryAttention`, with
            its defaults.
        score, chunk_threshold, chunk_size, window, score_mod, rotary: as
            in `keras_attention.layers.MultiHeadAttention` (a `score_mod`
            sees the query heads).
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        As `keras_attention.layers.MultiHeadAttention`; a `cache` is
        `(batch, 2, max_length, num_key_value_heads, head_dim)` or a pair of
        heads-first `(batch, num_key_value_heads, max_length, head_dim)`.

    Returns:
        `output` `(batch, Tq, dim)`; `(output, scores)` with
        `return_attention_scores` (scores `(batch, num_query_heads, Tq,
        Tv)`); `(output, cache)` with a cache; `(output, scores, cache)`.

    Example:
    >>> import numpy as np
    >>> layer = GroupedQueryAttention(
    ...     head_dim=4, num_query_heads=4, num_key_value_heads=2)
    >>> x = np.ones((1, 3, 8), "float32")
    >>> tuple(layer(x, x, use_causal_mask=True).shape)
    (1, 3, 8)
    >>> cache = np.zeros((1, 2, 3, 2, 4), "float32")  # 2 key/value heads
    >>> out, cache = layer(x[:, :1], x[:, :1], cache=cache, cache_update_index=0)
    >>> tuple(out.shape), tuple(cache.shape)
    ((1, 1, 8), (1, 2, 3, 2, 4))

    Reference:
        Ainslie et al., 2023, "GQA: Training Generalized Multi-Query
        Transformer Models from Multi-Head Checkpoints".
    """

    def __init__(
        self,
        head_dim,
        num_query_heads,
        num_key_value_heads,
        dropout=0.0,
        use_bias=True,
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
        if num_query_heads % num_key_value_heads != 0:
            raise ValueError(
                "`num_query_heads` must be divisible by `num_key_value_heads`. "
                f"Received: num_query_heads={num_query_heads}, "
                f"num_key_value_heads={num_key_value_heads}"
            )
        super().__init__(
            num_heads=num_query_heads,
            key_dim=head_dim,
            dropout=dropout,
            use_bias=use_bias,
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
            score=score,
            chunk_threshold=chunk_threshold,
            chunk_size=chunk_size,
            window=window,
            score_mod=score_mod,
            rotary=rotary,
            **kwargs,
        )
        self.num_key_value_heads = num_key_value_heads
        self._return_attention_scores = False

    @property
    def head_dim(self):
        return self.key_dim

    @property
    def num_query_heads(self):
        return self.num_heads

    @property
    def num_repeats(self):
        return self.num_heads // self.num_key_value_heads

    @property
    def use_gate(self):
        return self._use_gate

    @property
    def sliding_window(self):
        return self._sliding_window

    def _key_value_heads(self):
        return self.num_key_value_heads

    def _build_projections(self, query_shape, value_shape, key_shape):
        """Keras's `GroupQueryAttention` projections, in its order and names."""
        if len(query_shape) != 3:
            raise ValueError(
                "GroupedQueryAttention takes inputs of rank 3 (batch, T, dim). "
                f"Received: query_shape={query_shape}"
            )
        heads = (None, self.num_heads, self.head_dim)
        kv_heads = (None, self.num_key_value_heads, self.head_dim)
        self._query_dense = self._projection("bqm,muh->bquh", heads, "uh", "query")
        self._query_dense.build(query_shape)
        self._key_dense = self._projection("bkm,mvh->bkvh", kv_heads, "vh", "key")
        self._key_dense.build(key_shape)
        if self.use_gate:
            self._gate_dense = self._projection(
                "bqm,muh->bquh", heads, "uh", "gate", activation="sigmoid"
            )
            self._gate_dense.build(query_shape)
        self._value_dense = self._projection("bkm,mvh->bkvh", kv_heads, "vh", "value")
        self._value_dense.build(value_shape)
        self._build_attention(4)  # the rank of the projected heads
        self._output_dense = self._projection(
            "bquh,uhm->bqm", (None, query_shape[-1]), "m", "attention_output"
        )
        self._output_dense.build((None, None, self.num_heads, self.head_dim))

    def _projection(self, equation, output_shape, bias_axes, name, **kwargs):
        return keras.layers.EinsumDense(
            equation,
            output_shape=output_shape,
            bias_axes=bias_axes if self.use_bias else None,
            name=name,
            **kwargs,
            **self._get_common_kwargs_for_sublayer(),
        )

    def _overrides_compute_attention(self):
        cls = type(self)
        return cls._compute_attention is not GroupedQueryAttention._compute_attention

    def _call_hook(self, query, key, value, mask, training, return_scores, **causal):
        """Calls `_compute_attention` with Keras's `GroupQueryAttention` arguments."""
        self._return_attention_scores = return_scores
        return self._compute_attention(
            query, key, value, attention_mask=mask, training=training, **causal
        )

    def _compute_attention(
        self,
        query,
        key,
        value,
        attention_mask=None,
        training=None,
        use_causal_mask=False,
    ):
        """Keras's hook, with its `GroupQueryAttention` signature.

        `query`, `key` and `value` have `num_query_heads` heads (keys and
        values repeated); the weights are returned where
        `_return_attention_scores` is set, as on Keras's class.
        """
        return super()._compute_attention(
            query,
            key,
            value,
            attention_mask,
            training,
            self._return_attention_scores,
            use_causal_mask=use_causal_mask,
        )

    def compute_output_shape(self, query_shape, value_shape, key_shape=None):
        if query_shape[-1] != value_shape[-1]:
            raise ValueError(
                "The last dimension of `query_shape` and `value_shape` must be "
                f"equal, but are {query_shape[-1]}, {value_shape[-1]}. "
                f"Received: query_shape={query_shape}, value_shape={value_shape}"
            )
        return super().compute_output_shape(query_shape, value_shape, key_shape)

    def get_config(self):
        config = super().get_config()
        for name in ("num_heads", "key_dim", "value_dim", "output_shape"):
            config.pop(name)
        config.pop("attention_axes")
        config.update(
            head_dim=self.head_dim,
            num_query_heads=self.num_query_heads,
            num_key_value_heads=self.num_key_value_heads,
        )
        return config
