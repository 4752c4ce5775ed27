"""Transformer encoder and decoder blocks (Vaswani et al. 2017).

Each block is a stack of residual sublayers, multi-head attention then a
position-wise feed-forward network `max(0, x W1 + b1) W2 + b2`:

- post-norm (`normalize_first=False`, the paper): `x = LN(x + Dropout(f(x)))`;
- pre-norm (`normalize_first=True`, GPT-2): `x = x + Dropout(f(LN(x)))`.

The blocks mirror `keras_hub.layers.TransformerEncoder` and
`keras_hub.layers.TransformerDecoder`: the same arguments, the same sublayer
names and the same weight order, so `ours.set_weights(hub.get_weights())`
(and back) works on blocks built on inputs of the same shapes. The
attention sublayers are `keras_attention.layers.MultiHeadAttention`, so any
alignment function can replace the scaled dot product (`score=`); a score
with weights appends them after the projection weights of its attention
sublayer, which then no longer lines up with keras-hub.

Padding masks (explicit, or the implicit Keras mask of an input such as the
output of `keras.layers.Embedding(mask_zero=True)`) hide padded *keys*; an
explicit mask takes precedence over the implicit one. The outputs at padded
query positions are computed like any other and should be ignored
downstream; this is what keras-hub does with explicit masks.

Both blocks compute their output spec from shapes (`compute_output_shape`,
`compute_output_spec`), so a symbolic call under a mixed precision policy
gives tensors in the compute dtype, as keras-hub's blocks do.
"""

import keras
from keras import ops, tree
from keras.src.backend import set_keras_mask

from keras_attention.layers.kv_cache import cache_length
from keras_attention.layers.transformer_block import (
    PACKAGE,
    TransformerBlock,
    and_masks,
    causal_mask,
    heads_first,
    take_keras_mask,
    unpack,
)


@keras.saving.register_keras_serializable(package=PACKAGE)
class TransformerEncoderBlock(TransformerBlock):
    """Transformer encoder block: self-attention and feed-forward network.

    `x = LN(x + Dropout(MHA(x, x)))` then `x = LN(x + Dropout(FFN(x)))`
    (post-norm, as in the paper), or with `normalize_first=True` the
    pre-norm `x = x + Dropout(MHA(LN(x)))`, `x = x + Dropout(FFN(LN(x)))`.
    The attention heads have size `hidden_dim // num_heads`, where
    `hidden_dim` is the last dimension of the inputs.

    Sublayers, in weight order (that of `keras_hub.layers.TransformerEncoder`,
    so `set_weights(hub_encoder.get_weights())` works): `self_attention_layer`,
    `self_attention_layer_norm`, `feedforward_layer_norm`,
    `feedforward_intermediate_dense`, `feedforward_output_dense`.

    Args:
        intermediate_dim: int. Hidden size of the feed-forward network.
        num_heads: int. Number of attention heads; must divide the hidden
            size of the inputs.
        dropout: float in `[0, 1)`. Rate of the residual dropouts and of the
            dropout on the attention weights. Defaults to `0.0`.
        activation: str or callable. Activation of the first feed-forward
            layer. Defaults to `"relu"`.
        layer_norm_epsilon: float. Epsilon of the layer normalisations.
            Defaults to `1e-5`.
        kernel_initializer: str or initializer. Kernels of the attention and
            dense layers. Defaults to `"glorot_uniform"`.
        bias_initializer: str or initializer. Biases of the attention and
            dense layers. Defaults to `"zeros"`.
        normalize_first: bool. Pre-norm instead of post-norm. Defaults to
            `False`.
        score: str, dict or `keras_attention.scores.Score`. Alignment
            function of the attention heads. Defaults to `"scaled_dot"`.
        chunk_threshold: `"auto"`, int or None. Passed to the attention sublayer:
            above this many keys it computes exact attention in chunks, in
            linear memory (see `MultiHeadAttention`); `None` disables it;
            `"auto"` lets the device decide. Defaults to `"auto"`.
        chunk_size: `"auto"` or int. Queries and keys per chunk there.
            Defaults to `"auto"`.
        window: int or None. Restricted self-attention: each position
            attends to the positions at most `window` away, computed in
            blocks in `O(window * T)` (`MultiHeadAttention(window=...)`).
            Defaults to `None` (full attention).
        num_key_value_heads: int or None. Key/value heads of the attention
            (grouped-query attention, `GroupedQueryAttention`, when fewer
            than `num_heads`; must divide it). Defaults to `None`:
            `num_heads`, a `MultiHeadAttention` sublayer.
        score_mod: optional `keras_attention.layers.ScoreMod` of the
            self-attention (ALiBi, relative bias, soft-cap, a segment
            mask), or a list of them (`ScoreMods`). Defaults to `None`.
        rotary: number or None. Rotary positions of this maximum
            wavelength on the self-attention's queries and keys
            (`MultiHeadAttention(rotary=...)`). Defaults to `None`.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        inputs: tensor `(batch, T, hidden_dim)`.
        padding_mask: optional boolean `(batch, T)`, `True` for real tokens.
            Padded positions are hidden as keys. Defaults to the Keras mask
            of `inputs`, if any.
        attention_mask: optional boolean `(batch, T, T)`, `True` = may attend;
            combined with the padding mask.
        training: bool. Dropout only in training mode.
        return_attention_scores: bool. Also return the attention weights
            `(batch, num_heads, T, T)`. Defaults to `False`.
        segment_ids: optional int `(batch, T)`, the self-attention's
            `segment_ids` (read by a `SegmentMask` hook: several documents
            packed in one row). Defaults to `None`.

    Returns:
        Tensor of the shape of `inputs`, or `(outputs, attention_weights)`
        with `return_attention_scores=True`.

    Example:
    >>> import numpy as np
    >>> block = TransformerEncoderBlock(intermediate_dim=16, num_heads=2)
    >>> x = np.random.normal(size=(2, 5, 8)).astype("float32")
    >>> mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], bool)
    >>> tuple(block(x, padding_mask=mask).shape)
    (2, 5, 8)

    Reference:
        Vaswani et al., 2017, "Attention Is All You Need", section 3.1.
    """

    def build(self, inputs_shape):
        hidden_dim = inputs_shape[-1]
        head_dim = self._head_dim(hidden_dim)
        intermediate_shape = tuple(inputs_shape[:-1]) + (self.intermediate_dim,)
        self._self_attention_layer = self._attention(
            "self_attention_layer",
            head_dim,
            inputs_shape,
            inputs_shape,
            self.window,
            positional=True,
        )
        self._self_attention_layer_norm = self._norm(
            "self_attention_layer_norm", inputs_shape
        )
        self._self_attention_dropout = self._dropout("self_attention_dropout")
        self._feedforward_layer_norm = self._norm(
            "feedforward_layer_norm", inputs_shape
        )
        self._feedforward_intermediate_dense = self._dense(
            "feedforward_intermediate_dense",
            self.intermediate_dim,
            inputs_shape,
            self.activation,
        )
        self._feedforward_output_dense = self._dense(
            "feedforward_output_dense", hidden_dim, intermediate_shape
        )
        self._feedforward_dropout = self._dropout("feedforward_dropout")
        self.built = True

    def call(
        self,
        inputs,
        padding_mask=None,
        attention_mask=None,
        training=None,
        return_attention_scores=False,
        segment_ids=None,
    ):
        implicit_mask = take_keras_mask(inputs)
        if padding_mask is None:
            padding_mask = implicit_mask
        x, (weights, _) = self._residual(
            inputs,
            self._self_attention_layer_norm,
            self._self_attention_dropout,
            lambda x: unpack(
                self._self_attention_layer(
                    query=x,
                    value=x,
                    value_mask=padding_mask,
                    attention_mask=attention_mask,
                    return_attention_scores=return_attention_scores,
                    training=training,
                    segment_ids=segment_ids,
                ),
                return_attention_scores,
                with_cache=False,
            ),
            training,
        )
        x = self._feedforward(x, training)
        set_keras_mask(inputs, implicit_mask)
        return (x, weights) if return_attention_scores else x

    def compute_output_shape(self, inputs_shape):
        return inputs_shape

    def compute_output_spec(
        self,
        inputs,
        padding_mask=None,
        attention_mask=None,
        training=None,
        return_attention_scores=False,
        segment_ids=None,
    ):
        """The structure `call` returns, from shapes alone (see Returns)."""
        outputs = keras.KerasTensor(inputs.shape, dtype=self.compute_dtype)
        if not return_attention_scores:
            return outputs
        batch, length = inputs.shape[0], inputs.shape[1]
        weights_shape = (batch, self.num_heads, length, length)
        return outputs, keras.KerasTensor(weights_shape, dtype=self.compute_dtype)


@keras.saving.register_keras_serializable(package=PACKAGE)
class TransformerDecoderBlock(TransformerBlock):
    """Transformer decoder block: causal self-attention, cross-attention, FFN.

    Called as `block(decoder_sequence)` it has no cross-attention (decoder
    only, as GPT); called as `block(decoder_sequence, encoder_sequence)` it
    attends to the encoder output after the self-attention (the paper's
    decoder). The first call fixes which; later calls must agree. Each
    sublayer is residual with post-norm, or pre-norm with
    `normalize_first=True`; the self-attention is causal by default.

    Sublayers, in weight order (that of `keras_hub.layers.TransformerDecoder`,
    so `set_weights(hub_decoder.get_weights())` works): `self_attention`,
    `self_attention_layer_norm`, [`cross_attention`,
    `cross_attention_layer_norm`], `feedforward_intermediate_dense`,
    `feedforward_output_dense`, `feedforward_layer_norm`.

    Incremental decoding. The self-attention cache has shape
    `(batch, 2, max_length, num_heads, hidden_dim // num_heads)` (start from
    zeros); each call writes the keys/values of `decoder_sequence` at
    `self_attention_cache_update_index` and returns the updated cache. The
    cross-attention cache, of shape `(batch, 2, encoder_length, num_heads,
    hidden_dim // num_heads)`, holds the encoder's projected keys/values:
    fill it once, either with `compute_cross_attention_cache(encoder_sequence)`
    or, as in keras-hub, by a first call with `cross_attention_cache_update_index=0`
    (which writes the projections of `encoder_sequence` into the given cache);
    later calls leave the index `None`, and the cache is used as is (then
    `encoder_sequence` is not read) and returned unchanged. Either cache may
    also be a pair `(keys, values)` of heads-first `(batch, num_heads,
    length, hidden_dim // num_heads)` tensors (`MultiHeadAttention`'s split
    cache, which a decoding step neither re-stacks nor transposes); it is
    returned as a pair.

    Args:
        intermediate_dim: int. Hidden size of the feed-forward network.
        num_heads: int. Number of attention heads; must divide the hidden
            size of `decoder_sequence`.
        dropout: float in `[0, 1)`. Rate of the residual dropouts and of the
            dropout on the attention weights. Defaults to `0.0`.
        activation: str or callable. Activation of the first feed-forward
            layer. Defaults to `"relu"`.
        layer_norm_epsilon: float. Epsilon of the layer normalisations.
            Defaults to `1e-5`.
        kernel_initializer: str or initializer. Kernels of the attention and
            dense layers. Defaults to `"glorot_uniform"`.
        bias_initializer: str or initializer. Biases of the attention and
            dense layers. Defaults to `"zeros"`.
        normalize_first: bool. Pre-norm instead of post-norm. Defaults to
            `False`.
        score: str, dict or `keras_attention.scores.Score`. Alignment
            function of both attention sublayers. Defaults to `"scaled_dot"`.
        chunk_threshold: `"auto"`, int or None. Passed to both attention sublayers:
            above this many keys they compute exact attention in chunks, in
            linear memory (see `MultiHeadAttention`); `None` disables it;
            `"auto"` lets the device decide. Defaults to `"auto"`.
        chunk_size: `"auto"` or int. Queries and keys per chunk there.
            Defaults to `"auto"`.
        window: int or None. Restricted self-attention in the
            self-attention sublayer only (the cross-attention stays full):
            position `i` attends to `i - window ... i` (with the causal
            mask), computed in blocks in `O(window * T)`; with a cache,
            the same band as a mask. Defaults to `None`.
        num_key_value_heads: int or None. Key/value heads of both attention
            sublayers (grouped-query attention, `GroupedQueryAttention`,
            when fewer than `num_heads`; must divide it); the caches then
            hold `num_key_value_heads` heads where `num_heads` is written
            above. Defaults to `None`: `num_heads`.
        score_mod: optional `keras_attention.layers.ScoreMod` of the
            self-attention (ALiBi, relative bias, soft-cap, a segment
            mask), or a list of them (`ScoreMods`). Defaults to `None`.
        rotary: number or None. Rotary positions of this maximum
            wavelength on the self-attention's queries and keys
            (`MultiHeadAttention(rotary=...)`). Defaults to `None`.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        decoder_sequence: tensor `(batch, T, hidden_dim)`.
        encoder_sequence: optional tensor `(batch, S, encoder_dim)`.
        decoder_padding_mask: optional boolean mask of the self-attention
            keys: `(batch, T)`, or `(batch, max_length)` with a
            self-attention cache. Defaults to the Keras mask of
            `decoder_sequence`, if any.
        decoder_attention_mask: optional boolean `(batch, T, T)` (with a
            cache, `(batch, T, max_length)`), combined with the other masks.
        encoder_padding_mask: optional boolean `(batch, S)`. Defaults to the
            Keras mask of `encoder_sequence`, if any.
        encoder_attention_mask: optional boolean `(batch, T, S)`.
        self_attention_cache: optional tensor, see above.
        self_attention_cache_update_index: int or int tensor. Position of
            the first step of `decoder_sequence` in the cache; the causal
            mask is offset by it. `None` with a cache reads the cache
            without writing to it, the queries standing at positions
            `0 ... T - 1` (as in keras-hub).
        cross_attention_cache: optional tensor, see above. Required with
            `self_attention_cache` when the block has cross-attention.
        cross_attention_cache_update_index: optional int or int tensor.
            Where to write the projections of `encoder_sequence` into
            `cross_attention_cache`: `0` fills it, `None` (the default)
            reuses it as is.
        use_causal_mask: bool. Hide future positions from the
            self-attention. Defaults to `True`.
        training: bool. Dropout only in training mode.
        return_attention_scores: bool. Also return the attention weights
            `(batch, num_heads, T, S)` of the cross-attention, or of the
            self-attention when the block has no cross-attention. Defaults
            to `False`.
        segment_ids: optional int `(batch, T)` (with a self-attention
            cache, `(batch, max_length)`), the self-attention's
            `segment_ids` (read by a `SegmentMask` hook). Defaults to
            `None`.

    Returns:
        `outputs` of shape `(batch, T, hidden_dim)`, followed by, in order:
        `self_attention_cache` when one is given, `cross_attention_cache`
        when one is given (with cross-attention), and the attention weights
        with `return_attention_scores=True`. That is one of `outputs`,
        `(outputs, self_cache)`, `(outputs, self_cache, cross_cache)`,
        `(outputs, weights)`, `(outputs, self_cache, weights)` or
        `(outputs, self_cache, cross_cache, weights)`.

    Example:
    >>> import numpy as np
    >>> block = TransformerDecoderBlock(intermediate_dim=16, num_heads=2)
    >>> target = np.random.normal(size=(2, 4, 8)).astype("float32")
    >>> source = np.random.normal(size=(2, 6, 8)).astype("float32")
    >>> tuple(block(target, source).shape)
    (2, 4, 8)
    >>> cross = block.compute_cross_attention_cache(source)
    >>> cache = np.zeros((2, 2, 4, 2, 4), "float32")
    >>> out, cache, cross = block(
    ...     target[:, :1], source, self_attention_cache=cache,
    ...     self_attention_cache_update_index=0, cross_attention_cache=cross)
    >>> tuple(out.shape)
    (2, 1, 8)
    >>> empty = np.zeros((2, 2, 6, 2, 4), "float32")
    >>> out, cache, filled = block(
    ...     target[:, :1], source, self_attention_cache=cache,
    ...     self_attention_cache_update_index=0, cross_attention_cache=empty,
    ...     cross_attention_cache_update_index=0)
    >>> to_np = keras.ops.convert_to_numpy
    >>> bool(np.allclose(to_np(filled), to_np(cross), atol=1e-6))
    True

    The same step with split `(keys, values)` caches:

    >>> pairs = block.compute_cross_attention_cache(source, split=True)
    >>> empty_pair = (np.zeros((2, 2, 4, 4), "float32"),) * 2  # heads first
    >>> out_split, (keys, values), _ = block(
    ...     target[:, :1], source, self_attention_cache=empty_pair,
    ...     self_attention_cache_update_index=0, cross_attention_cache=pairs)
    >>> bool(np.allclose(to_np(out_split), to_np(out), atol=1e-6)), tuple(pairs[0].shape)
    (True, (2, 2, 6, 4))

    Reference:
        Vaswani et al., 2017, "Attention Is All You Need", section 3.1.
    """

    def build(self, decoder_sequence_shape, encoder_sequence_shape=None):
        hidden_dim = decoder_sequence_shape[-1]
        head_dim = self._head_dim(hidden_dim)
        intermediate_shape = tuple(decoder_sequence_shape[:-1]) + (
            self.intermediate_dim,
        )
        self._self_attention_layer = self._attention(
            "self_attention",
            head_dim,
            decoder_sequence_shape,
            decoder_sequence_shape,
            self.window,
            positional=True,
        )
        self._self_attention_layer_norm = self._norm(
            "self_attention_layer_norm", decoder_sequence_shape
        )
        self._self_attention_dropout = self._dropout("self_attention_dropout")
        self._cross_attention_layer = None
        if encoder_sequence_shape is not None:
            self._cross_attention_layer = self._attention(
                "cross_attention",
                head_dim,
                decoder_sequence_shape,
                encoder_sequence_shape,
            )
            self._cross_attention_layer_norm = self._norm(
                "cross_attention_layer_norm", decoder_sequence_shape
            )
            self._cross_attention_dropout = self._dropout("cross_attention_dropout")
        self._feedforward_intermediate_dense = self._dense(
            "feedforward_intermediate_dense",
            self.intermediate_dim,
            decoder_sequence_shape,
            self.activation,
        )
        self._feedforward_output_dense = self._dense(
            "feedforward_output_dense", hidden_dim, intermediate_shape
        )
        self._feedforward_layer_norm = self._norm(
            "feedforward_layer_norm", decoder_sequence_shape
        )
        self._feedforward_dropout = self._dropout("feedforward_dropout")
        self.built = True

    def call(
        self,
        decoder_sequence,
        encoder_sequence=None,
        decoder_padding_mask=None,
        decoder_attention_mask=None,
        encoder_padding_mask=None,
        encoder_attention_mask=None,
        self_attention_cache=None,
        self_attention_cache_update_index=None,
        cross_attention_cache=None,
        cross_attention_cache_update_index=None,
        use_causal_mask=True,
        training=None,
        return_attention_scores=False,
        segment_ids=None,
    ):
        has_cross = self._cross_attention_layer is not None
        self._check_call(
            encoder_sequence,
            self_attention_cache,
            cross_attention_cache,
            cross_attention_cache_update_index,
        )
        decoder_mask = take_keras_mask(decoder_sequence)
        if decoder_padding_mask is None:
            decoder_padding_mask = decoder_mask
        if has_cross:
            encoder_mask = take_keras_mask(encoder_sequence)
            if encoder_padding_mask is None:
                encoder_padding_mask = encoder_mask
        if (
            use_causal_mask
            and self_attention_cache is not None
            and self_attention_cache_update_index is None
        ):
            # Reading a cache without writing: the queries stand at
            # 0 ... T - 1 of it, as in keras-hub. The offset is explicit here
            # so it does not depend on how the attention layer aligns a
            # causal mask between T queries and max_length keys.
            decoder_attention_mask = and_masks(
                decoder_attention_mask,
                causal_mask(
                    ops.shape(decoder_sequence)[1], cache_length(self_attention_cache)
                ),
            )
            use_causal_mask = False

        x, (weights, self_attention_cache) = self._residual(
            decoder_sequence,
            self._self_attention_layer_norm,
            self._self_attention_dropout,
            lambda x: unpack(
                self._self_attention_layer(
                    query=x,
                    value=x,
                    value_mask=decoder_padding_mask,
                    attention_mask=decoder_attention_mask,
                    use_causal_mask=use_causal_mask,
                    cache=self_attention_cache,
                    cache_update_index=self_attention_cache_update_index,
                    return_attention_scores=return_attention_scores,
                    training=training,
                    segment_ids=segment_ids,
                ),
                return_attention_scores,
                self_attention_cache is not None,
            ),
            training,
        )
        if has_cross:
            x, (weights, cross_attention_cache) = self._residual(
                x,
                self._cross_attention_layer_norm,
                self._cross_attention_dropout,
                lambda x: unpack(
                    self._cross_attention_layer(
                        query=x,
                        value=encoder_sequence,
                        value_mask=encoder_padding_mask,
                        attention_mask=encoder_attention_mask,
                        cache=cross_attention_cache,
                        cache_update_index=cross_attention_cache_update_index,
                        return_attention_scores=return_attention_scores,
                        training=training,
                    ),
                    return_attention_scores,
                    cross_attention_cache is not None,
                ),
                training,
            )

        x = self._feedforward(x, training)
        set_keras_mask(decoder_sequence, decoder_mask)
        if has_cross:
            set_keras_mask(encoder_sequence, encoder_mask)

        results = [x]
        if self_attention_cache is not None:
            results.append(self_attention_cache)
            if has_cross:
                results.append(cross_attention_cache)
        if return_attention_scores:
            results.append(weights)
        return results[0] if len(results) == 1 else tuple(results)

    def compute_output_shape(self, decoder_sequence_shape, encoder_sequence_shape=None):
        return decoder_sequence_shape

    def compute_output_spec(
        self,
        decoder_sequence,
        encoder_sequence=None,
        decoder_padding_mask=None,
        decoder_attention_mask=None,
        encoder_padding_mask=None,
        encoder_attention_mask=None,
        self_attention_cache=None,
        self_attention_cache_update_index=None,
        cross_attention_cache=None,
        cross_attention_cache_update_index=None,
        use_causal_mask=True,
        training=None,
        return_attention_scores=False,
        segment_ids=None,
    ):
        """The structure `call` returns, from shapes alone (see Returns)."""
        if self.built:
            self._check_call(
                encoder_sequence,
                self_attention_cache,
                cross_attention_cache,
                cross_attention_cache_update_index,
            )
        has_cross = encoder_sequence is not None
        outputs = [keras.KerasTensor(decoder_sequence.shape, dtype=self.compute_dtype)]
        if self_attention_cache is not None:
            outputs.append(self._cache_spec(self_attention_cache))
            if has_cross:
                outputs.append(self._cache_spec(cross_attention_cache))
        if return_attention_scores:
            if has_cross:
                keys = encoder_sequence.shape[1]
                if cross_attention_cache is not None:
                    keys = cache_length(cross_attention_cache)
            else:
                keys = decoder_sequence.shape[1]
                if self_attention_cache is not None:
                    keys = cache_length(self_attention_cache)
            batch, length = decoder_sequence.shape[0], decoder_sequence.shape[1]
            outputs.append(
                keras.KerasTensor(
                    (batch, self.num_heads, length, keys), dtype=self.compute_dtype
                )
            )
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def _cache_spec(self, cache):
        # `Layer.__call__` casts floating inputs, caches included, to the
        # compute dtype when the layer autocasts; the cache keeps that dtype.
        return tree.map_structure(
            lambda c: keras.KerasTensor(
                c.shape, dtype=self.compute_dtype if self.autocast else c.dtype
            ),
            cache,
        )

    def compute_cross_attention_cache(self, encoder_sequence, split=False):
        """Projects `encoder_sequence` into the cross-attention cache.

        Args:
            encoder_sequence: tensor `(batch, S, encoder_dim)`, the encoder
                output the decoder attends to.
            split: bool. Return the pair `(keys, values)` instead of the
                stacked tensor. Defaults to `False`.

        Returns:
            Tensor `(batch, 2, S, num_key_value_heads, head_dim)`: projected keys at
            `[:, 0]`, values at `[:, 1]`, ready for `cross_attention_cache`;
            with `split=True`, the heads-first pair of `(batch,
            num_key_value_heads, S, head_dim)` tensors.
        """
        if not self.built or self._cross_attention_layer is None:
            raise ValueError(
                "`compute_cross_attention_cache` needs a block built with "
                "cross-attention: call it once as "
                "`block(decoder_sequence, encoder_sequence)` first."
            )
        attention = self._cross_attention_layer
        batch, length = ops.shape(encoder_sequence)[0], ops.shape(encoder_sequence)[1]
        head_dim = attention.key_dim
        cache = ops.zeros(
            (batch, 2, length, self.num_key_value_heads, head_dim),
            dtype=self.compute_dtype,
        )
        # Writing at index 0 with an (ignored) one-step query fills the cache
        # with the projections of the whole encoder sequence.
        query = ops.zeros((batch, 1, self.num_heads * head_dim), self.compute_dtype)
        mask = take_keras_mask(encoder_sequence)
        _, cache = attention(
            query=query, value=encoder_sequence, cache=cache, cache_update_index=0
        )
        set_keras_mask(encoder_sequence, mask)
        if split:
            return tuple(heads_first(cache[:, i]) for i in (0, 1))
        return cache

    def _check_call(self, encoder_sequence, self_cache, cross_cache, cross_index):
        has_cross = self._cross_attention_layer is not None
        if has_cross != (encoder_sequence is not None):
            built = "with" if has_cross else "without"
            raise ValueError(
                f"{type(self).__name__} '{self.name}' was built {built} "
                "cross-attention, so it must be called "
                + (
                    "as `block(decoder_sequence, encoder_sequence)`."
                    if has_cross
                    else "as `block(decoder_sequence)`, without encoder_sequence."
                )
            )
        if has_cross and (self_cache is None) != (cross_cache is None):
            raise ValueError(
                "With cross-attention, `self_attention_cache` and "
                "`cross_attention_cache` must both be given or both be None. "
                f"Received: self_attention_cache is None: {self_cache is None}, "
                f"cross_attention_cache is None: {cross_cache is None}"
            )
        if not has_cross and cross_cache is not None:
            raise ValueError(
                "`cross_attention_cache` was given to a block without cross-attention."
            )
        if cross_index is not None and cross_cache is None:
            raise ValueError(
                "`cross_attention_cache_update_index` needs a "
                "`cross_attention_cache` to write into. Received: "
                f"cross_attention_cache_update_index={cross_index}, "
                "cross_attention_cache=None"
            )
