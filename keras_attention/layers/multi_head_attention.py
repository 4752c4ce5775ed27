"""Multi-head attention with any alignment function and a decoding cache."""

import math

import keras
from keras import ops, tree
from keras.src.backend import set_keras_mask

from keras_attention import scores
from keras_attention.layers import dispatch
from keras_attention.layers.chunked import chunked_attention
from keras_attention.layers.masking import masked_softmax
from keras_attention.layers.windowed import check_window, windowed_attention
from keras_attention.scores.dot import Dot
from keras_attention.scores.location import Location
from keras_attention.scores.precision import widen
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

    As in Keras, `call` merges the masks, projects, and hands the projected
    `(batch, T, num_heads, dim)` tensors and the mask to
    `_compute_attention`, Keras's documented override point; on its
    explicit path that scores each head and normalises with
    `_masked_softmax`, so a subclass overriding either hook behaves as on
    Keras's class (a `_compute_attention` override also gets Keras's
    handling of fully masked rows). The attention weights are a float32
    `masked_softmax` (masked entries get exactly 0, a fully masked row is
    all zeros, never NaN), then dropout, then a cast back to the compute
    dtype. When the score is scaled dot, the weights are not returned, no
    dropout is active and `value_dim == key_dim` (a requirement of some
    backends' kernels), `_compute_attention` takes the fused
    `keras.ops.dot_product_attention` path instead; there the rows whose
    mask is all `False` get the output projection's bias alone, as the
    explicit path gives them (a zero context projected). That is done after
    the projection, where XLA fuses it into the bias add, so the padding
    case costs no extra pass over the context (a 4-D `attention_mask`,
    which can empty a row in some heads only, zeroes those heads' context
    instead).

    Long sequences take a memory-efficient exact path: the attention is
    computed by `keras_attention.layers.chunked.chunked_attention` (online
    softmax over chunks of `chunk_size` queries and keys), in `O(Tq + Tv)`
    memory instead of the `(batch, num_heads, Tq, Tv)` scores, forward and
    backward, when the number of keys `Tv` is above `chunk_threshold`.
    With the default `chunk_threshold="auto"` the device decides
    (`keras_attention.layers.dispatch`): where the call would take the
    fused path and the backend has a memory-efficient kernel for that
    device, dtype and mask (PyTorch on CUDA and on CPU; JAX on a GPU in
    bfloat16/float16 without a mask or causal: cuDNN flash attention) the
    fused kernel runs at every length; elsewhere (TensorFlow, JAX on CPU,
    JAX float32 on a GPU, another score, dropout in training) the layer
    chunks from 1,024 keys on on a CPU, where chunking is already the
    faster, and above 4,096 on an accelerator or under PyTorch, where it is
    for the memory. An int chunks above it on any device (`0`: always),
    `None` never. Under JAX on a GPU the chunked path runs JAX's Triton
    flash kernel in place of the loop (`chunk_size="auto"`, scaled dot, no
    dropout, head width 9-128) where the kernel takes the masks exactly
    (`dispatch.triton_padding`): none, causal, a query mask alone, or one
    padding mask that is both the query and the key mask (the same tensor,
    as Keras passes an `Embedding(mask_zero=True)` mask into `mha(x, x)`;
    Keras converts a NumPy array given twice into two tensors), which
    becomes its segment ids; padded query rows still give the
    output projection's bias. A key padding mask alone (a Transformer
    block's `value_mask`), two mask tensors, an `attention_mask` or a band
    keep the loop. The chunk loop is fastest compiled: called eagerly
    under TensorFlow (outside `fit`, `predict` or a `tf.function`) its
    blocks run op by op, so there a CPU chunks only above 3,071 keys, in
    blocks of 512 (`dispatch.EAGER_CPU_CHUNK_THRESHOLD`,
    `EAGER_CPU_CHUNK_SIZE`): at 4,096 keys its forward took 0.84-1.13x
    the full path's time, where compiled it took 0.39-0.63x
    (`benchmarks/attention_crossover.py --modes eager,compiled`, two runs
    on a busy 2-core CPU). Wrap such calls in
    `tf.function(jit_compile=True)` for the compiled speed.
    The chunked path gives the explicit path's outputs and gradients to
    float tolerance (fully masked rows included), and is taken only when
    nothing needs the full weights: static lengths, no cache, no `return_attention_scores`,
    no `flash_attention=True`, a score that can be computed on chunks (not
    `"location"`), rank-3 inputs with the default `attention_axes`, and a
    subclass that does not override `_compute_attention` or
    `_masked_softmax` (their callers get the full weights, as in Keras).
    Dropout there draws its mask from a hash of the positions
    (`chunked.dropout_keep_mask`), not from Keras's `Dropout` layer: the
    same rate, other draws.

    Restricted self-attention (`window=r`, the "restricted" row of Vaswani
    et al.'s complexity table): query `i` attends to the keys `j` with
    `|i - j| <= r`, or with `use_causal_mask=True` to `i - r <= j <= i`.
    It is computed by `keras_attention.layers.windowed.windowed_attention`
    in blocks of `r` positions, in `O(r T d)` time and memory: the
    `(batch, num_heads, T, T)` scores are never formed. Padding masks,
    `attention_mask` (only its band is read), the score, dropout (drawn as
    on the chunked path) and mixed precision (float32 softmax) compose with
    it; a row with nothing to attend to in its window gets a zero context.
    It is self-attention: `Tq != Tv` raises a `ValueError`. Where the full
    weights are needed it takes the explicit path with the band as a mask,
    same values, `O(T^2)` memory: `return_attention_scores=True` (the
    weights returned are `(batch, num_heads, Tq, Tv)`, zero outside the
    band), a cache (decoding: one step's band is `O(max_length)`; the
    queries stand at `cache_update_index + i`, as for the causal mask), a
    length unknown when traced, or an overridden `_compute_attention` /
    `_masked_softmax`. Keras's `sliding_window=s` is the same band as a
    mask, `|i - j| < s`, i.e. `window = s - 1`: it keeps Keras's meaning
    and cost (the `(Tq, Tv)` scores, or every chunk visited on the chunked
    path) and works for cross-attention too; `window` is the blockwise
    self-attention form. The two cannot be combined.

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
        sliding_window: int or None. Keras's argument: each query attends
            only to keys less than `sliding_window` positions away, as a mask
            on the full scores (see `window`). Defaults to `None`.
        flash_attention: bool or None. Passed to
            `keras.ops.dot_product_attention` on the fused path; with
            `True`, `return_attention_scores=True` raises a `ValueError`, as
            in Keras. Defaults to `None` (the backend decides).
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
        chunk_threshold: `"auto"`, int or None. Above this number of keys
            `Tv` the memory-efficient chunked path is taken (see above);
            `None` disables it; `"auto"` decides by backend, device, dtype
            and mask. Defaults to `"auto"`.
        chunk_size: `"auto"` or int. Queries and keys per chunk on the
            chunked path; `"auto"` is 256 on a CPU (512 while TensorFlow
            runs eagerly) and up to 4,096 on an accelerator
            (`dispatch.chunk_size`); under JAX on a GPU `"auto"` runs
            JAX's Triton flash kernel instead of the loop where it takes
            the call's masks (see above,
            `dispatch.triton_flash_attention`). Defaults to `"auto"`.
        window: int or None. Restricted self-attention radius `r >= 1`:
            query `i` sees keys `j` with `|i - j| <= r` (`i - r <= j <= i`
            when causal), computed blockwise in `O(r T d)` (see above).
            Defaults to `None` (no restriction).
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
        attention_mask: optional boolean `(Tq, Tv)`, `(batch, Tq, Tv)` or
            `(batch, num_heads, Tq, Tv)`, `True` = attend; any dimension may
            be 1 (broadcast), as in Keras. With a cache, `Tv` is the cache's
            `max_length`. Another shape raises a `ValueError`. (Keras fails
            on a 4-D mask together with padding masks; here each padding
            mask applies to its own example.)
        return_attention_scores: bool. Also return the attention weights
            `(batch, num_heads, Tq, Tv)`. Defaults to `False`.
        training: bool. Dropout only in training mode.
        use_causal_mask: bool. Query `i` attends only to keys `j <= i`
            (as in Keras, query 0 is aligned with key 0 when `Tq != Tv`);
            with `cache_update_index`, to keys `j <= cache_update_index + i`
            (`sliding_window` counts from the same positions). Defaults to
            `False`.
        cache: optional tensor `(batch, 2, max_length, num_heads, key_dim)`:
            projected keys at `[:, 0]`, values at `[:, 1]` (keras-hub's
            layout; requires `value_dim == key_dim`), or a pair
            `(keys, values)` of heads-first tensors `(batch, num_heads,
            max_length, key_dim)` and `(..., value_dim)`, returned as a
            pair. The pair is what a decoding loop should carry: a step
            neither splits and re-stacks the cache nor transposes it to
            multiply it per head (each a copy of the whole cache). A
            `"location"` score needs its `max_length` set to the cache's.
        cache_update_index: optional int or int tensor. Where to write the
            projections of the new `key`/`value` into `cache`. `None` with a
            cache uses the cache as is (precomputed cross-attention keys).
            With `use_causal_mask` and an index whose value is known when
            the call runs (a Python int, or an eager PyTorch or TensorFlow
            tensor, not a traced one), the step attends over the cache
            positions up to its last query only (the later ones are masked
            anyway): the same outputs and weights, in less time.

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
        **kwargs,
    ):
        chunk_threshold, chunk_size = dispatch.check(chunk_threshold, chunk_size)
        window = _check_window(window, sliding_window, flash_attention)
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
        self._score_layer = None
        self._keras_path = False

    def build(self, query_shape, value_shape, key_shape=None):
        query_shape = tuple(query_shape)
        value_shape = tuple(value_shape)
        key_shape = value_shape if key_shape is None else tuple(key_shape)
        _check_batch(query_shape, value_shape, key_shape)
        super().build(query_shape, value_shape, key_shape)
        self._keras_path = len(query_shape) != 3 or self.attention_axes != (1,)
        if self._keras_path and not self._fused_score:
            raise ValueError(
                "A score other than 'scaled_dot' needs inputs of rank 3 "
                "(batch, T, dim) and the default `attention_axes`. Received: "
                f"query_shape={query_shape}, attention_axes="
                f"{self.attention_axes}, score={self.score!r}"
            )
        if self.window is not None:
            if self._keras_path:
                raise ValueError(
                    "`window` needs inputs of rank 3 (batch, T, dim) and the "
                    f"default `attention_axes`. Received: window={self.window}, "
                    f"query_shape={query_shape}, attention_axes="
                    f"{self.attention_axes}"
                )
            _check_window_lengths(self.window, query_shape, key_shape)
        if self._keras_path:
            return
        score = scores.get(self.score)
        config = {**score.get_config(), "dtype": self.dtype_policy, "name": "score"}
        self._score_layer = type(score).from_config(config)
        head_query = (None, query_shape[1], self.key_dim)
        head_key = (None, key_shape[1], self.key_dim)
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
        projected_query = self.query_dense(query)
        key, value, cache = self._project_key_value(
            key, value, cache, cache_update_index
        )
        # A split cache holds its positions on axis 2, a stacked one on 1.
        axis = 2 if isinstance(cache, (tuple, list)) else 1
        cache_size = key.shape[axis]
        prefix, use_causal_mask = self._visible_prefix(
            projected_query, cache, cache_update_index, use_causal_mask, cache_size
        )
        if prefix is not None:
            # The masks are checked against the whole cache, then cut.
            keys = key[:, 0] if axis == 2 else key
            value_mask = _key_padding_mask(value_mask, key_mask, keys)
            key_mask = None
            if attention_mask is not None:
                attention_mask = self._check_attention_mask(
                    attention_mask, projected_query, keys
                )
            key = _take_prefix(key, prefix, axis)
            value = _take_prefix(value, prefix, axis)
            value_mask = _take_prefix(value_mask, prefix, -1)
            attention_mask = _take_prefix(attention_mask, prefix, -1)
        # A split cache holds heads-first keys and values; only this class's
        # own hook reads them so (a subclass's hook or a flash kernel gets
        # Keras's `(B, Tv, heads, dim)`).
        heads_first = isinstance(cache, (tuple, list))
        if heads_first and (self._overrides_hooks() or self._flash_attention is True):
            key = ops.transpose(key, (0, 2, 1, 3))
            value = ops.transpose(value, (0, 2, 1, 3))
            heads_first = False
        weights, row_valid = None, None
        # The fused kernel's static conditions, decided once per call.
        fused = self._takes_fused_path(
            return_attention_scores, training, projected_query.shape[1]
        )
        if self._takes_windowed_path(
            projected_query, key, cache, cache_update_index, return_attention_scores
        ):
            output = self._windowed_attention(
                projected_query,
                key,
                value,
                query_mask,
                value_mask,
                key_mask,
                attention_mask,
                use_causal_mask,
                training,
            )
        elif self._takes_chunked_path(
            query,
            key,
            cache,
            cache_update_index,
            return_attention_scores,
            training,
            dispatch.mask_kind(
                causal=use_causal_mask,
                padding=query_mask is not None
                or value_mask is not None
                or key_mask is not None,
                pairwise=attention_mask is not None or self._sliding_window is not None,
            ),
            fused,
        ):
            output = self._chunked_attention(
                projected_query,
                key,
                value,
                query_mask,
                value_mask,
                key_mask,
                attention_mask,
                use_causal_mask,
                training,
            )
        else:
            # A subclass overriding Keras's documented hook gets what Keras gives
            # it: the merged mask, and no repair of fully masked rows.
            own_hook = (
                type(self)._compute_attention is MultiHeadAttention._compute_attention
            )
            fused = fused and own_hook and not heads_first
            mask, causal_only, row_valid = self._attention_mask(
                projected_query,
                # The masks read the number of keys only.
                key[:, 0, :, :1] if heads_first else key,
                query_mask,
                value_mask,
                key_mask,
                attention_mask,
                use_causal_mask,
                cache_update_index,
                fused,
            )
            # As in Keras: `use_causal_mask` reaches the hook only when the
            # backend's causal kernel can apply it alone.
            causal_kwargs = {"use_causal_mask": True} if causal_only else {}
            if heads_first:
                if causal_only:
                    mask = _causal_mask(
                        ops.shape(projected_query)[1], ops.shape(key)[2]
                    )
                output, weights = self._heads_first_attention(
                    projected_query, key, value, mask, training
                )
            else:
                output, weights = self._compute_attention(
                    projected_query,
                    key,
                    value,
                    mask,
                    training,
                    return_attention_scores,
                    **causal_kwargs,
                )
            if row_valid is not None and len(row_valid.shape) == 4:
                # A 4-D mask can empty a row in some heads only: zero those
                # heads' context, as the explicit path's all-zero weights do.
                valid = ops.transpose(row_valid, (0, 2, 1, 3))
                output = ops.where(valid, output, ops.zeros_like(output))
                row_valid = None
        if gate is not None:
            output = ops.multiply(output, gate)
        output = self.output_dense(output)
        if row_valid is not None:
            output = self._empty_rows_to_bias(output, row_valid)

        if prefix is not None and weights is not None:
            # The masked keys after the prefix have weight exactly 0.
            padding = [[0, 0]] * 3 + [[0, cache_size - prefix]]
            weights = ops.pad(weights, padding)
        if return_attention_scores and cache is not None:
            return output, weights, cache
        if return_attention_scores:
            return output, weights
        if cache is not None:
            return output, cache
        return output

    def _visible_prefix(
        self, query, cache, cache_update_index, use_causal_mask, cache_size
    ):
        """How many cache positions a causal decoding step reads, or None (all).

        The `Tq` queries of a step stand at `cache_update_index ...
        cache_update_index + Tq - 1`, so the causal mask hides every later
        cache position from all of them: where the index is known now
        (`dispatch.concrete_int`: a Python int, eager PyTorch or TensorFlow)
        the step attends over the first `cache_update_index + Tq` positions
        only, with the same weights (the hidden ones are exactly 0). Under a
        trace (`tf.function`, `jax.jit`, `torch.compile`) the index has no
        value and the step reads the whole cache: static shapes. A subclass
        overriding Keras's hooks gets the whole cache, as before.

        Returns `(prefix, use_causal_mask)`: the number of positions read
        (None: all), and whether a causal mask is still needed among them
        (not for one query, which sees its whole prefix; the first step
        reads two positions, as a softmax over one is what Keras warns of).
        """
        if cache is None or not use_causal_mask or self._overrides_hooks():
            return None, use_causal_mask
        index = dispatch.concrete_int(cache_update_index)
        length = query.shape[1]
        if index is None or index < 0 or length is None or cache_size is None:
            return None, use_causal_mask
        prefix = max(index + length, 2)
        if prefix >= cache_size:
            return None, use_causal_mask
        return prefix, length != 1 or prefix != index + 1

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
            and self.value_dim == self.key_dim
            and not return_attention_scores
            and not (self.dropout > 0.0 and bool(training))
            and (not float16 or self._flash_attention is True)
            and (not one_query or self._flash_attention is True)
        )

    def _overrides_hooks(self):
        """Whether a subclass overrides Keras's hooks (they need full weights)."""
        cls = type(self)
        return (
            cls._compute_attention is not MultiHeadAttention._compute_attention
            or cls._masked_softmax is not MultiHeadAttention._masked_softmax
        )

    def _takes_windowed_path(
        self, query, key, cache, cache_update_index, return_attention_scores
    ):
        """Whether `call` uses `windowed_attention` (static shapes, Python flags)."""
        if self.window is None or cache is not None or cache_update_index is not None:
            return False
        _check_window_lengths(self.window, query.shape, key.shape)
        return (
            not return_attention_scores
            and not self._overrides_hooks()
            and query.shape[1] is not None
            and key.shape[1] is not None
        )

    def _takes_chunked_path(
        self,
        query,
        key,
        cache,
        cache_update_index,
        return_attention_scores,
        training=None,
        mask="none",
        fused=None,
    ):
        """Whether `call` uses `chunked_attention` (static shapes, Python flags).

        `mask` is the `dispatch.mask_kind` of the call: with
        `chunk_threshold="auto"`, `dispatch.takes_chunked_path` keeps the
        fused path where the backend's kernel is memory-efficient for it.
        `fused`: `_takes_fused_path` of the call, when the caller has it.
        """
        if (
            self.chunk_threshold is None
            or self.window is not None
            or cache is not None
            or cache_update_index is not None
            or return_attention_scores
            or self._flash_attention is True
            or isinstance(self._score_layer, Location)
        ):
            return False
        # Keras's hooks see the full weights: an override keeps that path.
        if self._overrides_hooks():
            return False
        q_len, k_len = query.shape[1], key.shape[1]
        if None in (q_len, k_len):
            return False
        if fused is None:
            fused = self._takes_fused_path(return_attention_scores, training, q_len)
        return dispatch.takes_chunked_path(
            self.chunk_threshold, k_len, fused, self.compute_dtype, mask, query
        )

    def _chunked_attention(
        self,
        query,
        key,
        value,
        query_mask,
        value_mask,
        key_mask,
        attention_mask,
        use_causal_mask,
        training,
    ):
        """Context `(B, Tq, num_heads, value_dim)` from `chunked_attention`.

        The padding masks stay 1-D and the attention mask as given: no
        `(B, Tq, Tv)` mask is built. A row with nothing to attend to gets a
        zero context, so its output is the projection's bias, as on the
        explicit path.
        """
        keys = _key_padding_mask(value_mask, key_mask, key)
        if attention_mask is not None:
            attention_mask = self._check_attention_mask(attention_mask, query, key)
        score_fn, rate, seed = self._blockwise_options(training)
        if (
            self.chunk_size == dispatch.AUTO
            and score_fn is None
            and rate == 0.0
            and attention_mask is None
            and self._sliding_window is None
            and self.key_dim == self.value_dim
        ):
            # The masks as given: `triton_padding` compares the objects.
            padding = dispatch.triton_padding(query_mask, (value_mask, key_mask))
            if dispatch.triton_flash_applies_here(
                query, key, self.key_dim, use_causal_mask, padding
            ):
                return dispatch.triton_flash_attention(
                    query,
                    key,
                    value,
                    use_causal_mask,
                    1.0 / math.sqrt(self.key_dim),
                    query_mask,
                    shared_mask=padding == "shared",
                )
        if query_mask is not None:
            query_mask = ops.cast(query_mask, "bool")
        rows = query.shape[0] and query.shape[0] * self.num_heads
        size = dispatch.chunk_size(self.chunk_size, rows, query)
        return chunked_attention(
            query,
            key,
            value,
            key_mask=keys,
            query_mask=query_mask,
            attention_mask=attention_mask,
            use_causal_mask=use_causal_mask,
            causal_offset=0,
            sliding_window=self._sliding_window,
            score_fn=score_fn,
            dropout_rate=rate,
            seed=seed,
            query_chunk_size=size,
            key_chunk_size=size,
        )

    def _windowed_attention(
        self,
        query,
        key,
        value,
        query_mask,
        value_mask,
        key_mask,
        attention_mask,
        use_causal_mask,
        training,
    ):
        """Context `(B, T, num_heads, value_dim)` from `windowed_attention`.

        As `_chunked_attention`: 1-D padding masks, the attention mask as
        given (only its band is read), zeros for a row with nothing to
        attend to.
        """
        keys = _key_padding_mask(value_mask, key_mask, key)
        if attention_mask is not None:
            attention_mask = self._check_attention_mask(attention_mask, query, key)
        if query_mask is not None:
            query_mask = ops.cast(query_mask, "bool")
        score_fn, rate, seed = self._blockwise_options(training)
        return windowed_attention(
            query,
            key,
            value,
            self.window,
            causal=use_causal_mask,
            key_mask=keys,
            query_mask=query_mask,
            attention_mask=attention_mask,
            score_fn=score_fn,
            dropout_rate=rate,
            seed=seed,
        )

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

    def _project_key_value(self, key, value, cache, cache_update_index):
        """Projects key and value, reading and writing the cache."""
        if cache is None:
            if cache_update_index is not None:
                raise ValueError(
                    "`cache_update_index` should not be set if `cache` is "
                    f"`None`. Received: cache_update_index={cache_update_index}"
                )
            return self.key_dense(key), self.value_dense(value), None
        self._check_cache(cache)
        if isinstance(cache, (tuple, list)):
            # Heads first: `(B, heads, max_length, dim)`.
            key_cache, value_cache = cache
            if cache_update_index is None:
                return key_cache, value_cache, cache
            new_key = ops.transpose(self.key_dense(key), (0, 2, 1, 3))
            new_value = ops.transpose(self.value_dense(value), (0, 2, 1, 3))
            key = _write_cache(key_cache, new_key, cache_update_index, 2)
            value = _write_cache(value_cache, new_value, cache_update_index, 2)
            return key, value, (key, value)
        key_cache = cache[:, 0, ...]
        value_cache = cache[:, 1, ...]
        if cache_update_index is None:
            return key_cache, value_cache, cache
        key = _write_cache(key_cache, self.key_dense(key), cache_update_index, 1)
        value = _write_cache(
            value_cache, self.value_dense(value), cache_update_index, 1
        )
        return key, value, ops.stack((key, value), axis=1)

    def _check_cache(self, cache):
        if isinstance(cache, (tuple, list)):
            shapes = [tuple(getattr(c, "shape", ())) for c in cache]
            expected = [
                (self.num_heads, None, self.key_dim),
                (self.num_heads, None, self.value_dim),
            ]
            if (
                len(shapes) != 2
                or any(
                    len(s) != 4 or not _shape_matches(s[1:], e)
                    for s, e in zip(shapes, expected)
                )
                or not _shape_matches(shapes[0][:3], shapes[1][:3])
            ):
                raise ValueError(
                    "A split `cache` must be a pair (keys, values) of shapes "
                    f"(batch, num_heads={self.num_heads}, max_length, "
                    f"key_dim={self.key_dim}) and (batch, num_heads, "
                    f"max_length, value_dim={self.value_dim}). Received: "
                    f"shapes {shapes}"
                )
            return
        shape = tuple(cache.shape)
        expected = (2, None, self.num_heads, self.key_dim)
        if self.value_dim != self.key_dim:
            raise ValueError(
                "The stacked cache holds keys and values in one tensor, so it "
                f"needs `value_dim == key_dim` (or pass `cache` as a pair "
                f"(keys, values)). Received: key_dim={self.key_dim}, "
                f"value_dim={self.value_dim}"
            )
        if len(shape) != 5 or not _shape_matches(shape[1:], expected):
            raise ValueError(
                "`cache` must have shape (batch, 2, max_length, num_heads="
                f"{self.num_heads}, key_dim={self.key_dim}). Received: "
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
        """Merges every mask for `_compute_attention`.

        All the decisions are on static shapes and Python values. Returns
        `(mask, causal_only, row_valid)`:

        - `mask`: None, `(B, Tq, Tv)` or, with a 4-D `attention_mask`,
          `(B, num_heads, Tq, Tv)`, any of them possibly 1 (broadcast).
        - `causal_only`: the causal mask is the only one and the fused kernel
          applies it by itself (then `mask` is None).
        - `row_valid`: on the fused path, which query rows have a key to
          attend to, `(B or 1, Tq or 1, 1)` (`(B, num_heads, Tq, 1)` with a
          4-D mask, any of them possibly 1), for `call` to repair the rows
          the kernel averages uniformly; else None.
        """
        value_mask = _key_padding_mask(value_mask, key_mask, key)
        if attention_mask is not None:
            attention_mask = self._check_attention_mask(attention_mask, query, key)
        no_pairwise_mask = (
            attention_mask is None
            and self._sliding_window is None
            and self.window is None
        )
        if (
            fused
            and use_causal_mask
            and no_pairwise_mask
            and query_mask is None
            and value_mask is None
            and cache_update_index is None
        ):
            return None, True, None
        if fused and no_pairwise_mask and not use_causal_mask:
            # Padding masks only: the kernel gets the `(B, 1, Tv)` key mask
            # (broadcast over queries, no `(B, Tq, Tv)` tensor), and which
            # rows have anything to attend to follows from the 1-D masks,
            # O(B * (Tq + Tv)).
            keys = None if value_mask is None else ops.cast(value_mask, "bool")
            mask = None if keys is None else ops.expand_dims(keys, 1)
            return mask, False, _rows_with_keys(query_mask, mask)

        parts = []
        if query_mask is not None:
            parts.append(ops.expand_dims(ops.cast(query_mask, "bool"), -1))
        if value_mask is not None:
            parts.append(ops.expand_dims(ops.cast(value_mask, "bool"), -2))
        # Keras's alignment, query 0 with key 0; a cache shifts the queries
        # to their absolute positions.
        offset = 0 if cache_update_index is None else cache_update_index
        if use_causal_mask or self._sliding_window is not None or self.window:
            rows = ops.arange(ops.shape(query)[1]) + offset
            distance = rows[:, None] - ops.arange(ops.shape(key)[1])[None, :]
            if use_causal_mask:
                parts.append(ops.expand_dims(distance >= 0, 0))
            if self._sliding_window is not None:
                parts.append(
                    ops.expand_dims(ops.abs(distance) < self._sliding_window, 0)
                )
            if self.window is not None:
                parts.append(ops.expand_dims(ops.abs(distance) <= self.window, 0))
        per_head = attention_mask is not None and len(attention_mask.shape) == 4
        mask = attention_mask
        for part in parts:
            if per_head:
                part = ops.expand_dims(part, 1)
            mask = part if mask is None else ops.logical_and(mask, part)
        row_valid = None
        if fused and mask is not None:
            row_valid = ops.any(mask, axis=-1, keepdims=True)
        return mask, False, row_valid

    def _check_attention_mask(self, attention_mask, query, key):
        """Checks the shape of `attention_mask`; returns it bool, of rank >= 3.

        Keras's shapes: `(Tq, Tv)`, `(B, Tq, Tv)` or `(B, num_heads, Tq,
        Tv)`, each dimension equal to that size or 1 (broadcast).
        """
        attention_mask = ops.cast(attention_mask, "bool")
        shape = tuple(attention_mask.shape)
        batch, q_len, k_len = query.shape[0], query.shape[1], key.shape[1]
        expected = {
            2: (q_len, k_len),
            3: (batch, q_len, k_len),
            4: (batch, self.num_heads, q_len, k_len),
        }.get(len(shape))
        if expected is None or any(
            m is not None and e is not None and m not in (1, e)
            for m, e in zip(shape, expected, strict=True)
        ):
            raise ValueError(
                "`attention_mask` must have shape (Tq, Tv), (B, Tq, Tv) or "
                "(B, num_heads, Tq, Tv), each dimension equal to that size or "
                f"1, here with B={batch}, num_heads={self.num_heads}, "
                f"Tq={q_len}, Tv={k_len} (with a cache, Tv is its "
                f"max_length). Received: attention_mask.shape={shape}"
            )
        if len(shape) == 2:
            attention_mask = ops.expand_dims(attention_mask, 0)
        return attention_mask

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
            causal = _causal_mask(ops.shape(query)[1], ops.shape(key)[1])
            if len(attention_mask.shape) == 4:
                causal = ops.expand_dims(causal, 0)
            attention_mask = ops.logical_and(ops.cast(attention_mask, "bool"), causal)
            use_causal_mask = False
        if self._takes_fused_path(return_attention_scores, training, query.shape[1]):
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
        if use_causal_mask:
            attention_mask = _causal_mask(ops.shape(query)[1], ops.shape(key)[1])
        one_query = query.shape[1] == 1 and self.num_heads <= MAX_BLOCK_HEADS
        raw = None
        if one_query:
            raw = _one_query_dot_scores(self._score_layer, query, key)
        if raw is None:
            heads_k = ops.transpose(key, (0, 2, 1, 3))
            raw = self._head_scores(query, heads_k)
        weights = self._masked_softmax(raw, attention_mask)
        dropped = self._weights_dropout(weights, training)
        if one_query:
            return _one_query_context(dropped, value), weights
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

    def _heads_first_attention(self, query, key, value, attention_mask, training):
        """`_compute_attention`'s explicit path on heads-first keys and values.

        Args:
            query: projected query `(B, Tq, num_heads, key_dim)`.
            key: `(B, num_heads, Tv, key_dim)`, as a split cache holds it.
            value: `(B, num_heads, Tv, value_dim)`.
            attention_mask: optional boolean mask, as `_compute_attention`
                takes it.
            training: bool. Dropout only in training mode.

        Returns:
            `(context (B, Tq, num_heads, value_dim), weights (B, num_heads,
            Tq, Tv))`: batched matmuls over `B * num_heads` rows that read
            the keys and values where they lie.
        """
        batch = ops.shape(query)[0]
        q_len, k_len = ops.shape(query)[1], ops.shape(key)[2]
        rows = batch * self.num_heads
        weights = self._masked_softmax(self._head_scores(query, key), attention_mask)
        dropped = self._weights_dropout(weights, training)
        heads_v = ops.reshape(value, (rows, k_len, self.value_dim))
        context = ops.matmul(
            ops.reshape(ops.cast(dropped, heads_v.dtype), (rows, q_len, k_len)),
            heads_v,
        )
        context = ops.reshape(context, (batch, self.num_heads, q_len, self.value_dim))
        return ops.transpose(context, (0, 2, 1, 3)), weights

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
        return config


#: Up to this many heads, one query (a decoding step) is attended with
#: block-diagonal matmuls that read keys and values `(B, Tv, heads, dim)` in
#: place, instead of transposing them to heads-first at every step (a copy
#: of the whole cache, 4x the time on a CPU); the matmuls do `heads` times
#: the products, all but one block of them with zeros.
MAX_BLOCK_HEADS = 8


def _block_diagonal(x):
    """`(B, heads, dim)` -> `(B, heads, heads * dim)`, row h holding x[:, h].

    Row `h` is zero outside its block `h * dim ... (h + 1) * dim`.
    """
    heads, dim = x.shape[1], x.shape[2]
    eye = ops.eye(heads, dtype=x.dtype)
    blocks = x[:, :, None, :] * eye[None, :, :, None]
    return ops.reshape(blocks, (-1, heads, heads * dim))


def _one_query_dot_scores(score, query, key):
    """Raw `(B, heads, 1, Tv)` dot scores of one query, keys read in place.

    For the `Dot` and `ScaledDot` scores (the same products and scaling as
    their `call`, float32 for float16 inputs); `None` for another score.

    >>> import numpy as np
    >>> q = np.random.normal(size=(2, 1, 3, 4)).astype("float32")
    >>> k = np.random.normal(size=(2, 5, 3, 4)).astype("float32")
    >>> raw = _one_query_dot_scores(ScaledDot(), q, k)
    >>> bool(np.allclose(raw, np.einsum("bqhd,bkhd->bhqk", q, k) / 2, atol=1e-6))
    True
    """
    if type(score) is ScaledDot:
        query = widen(query)
        query = ops.multiply(
            query, ops.cast(1.0 / math.sqrt(key.shape[-1]), query.dtype)
        )
    elif type(score) is Dot:
        query = widen(query)
    else:
        return None
    key = widen(key)
    heads, dim = key.shape[2], key.shape[3]
    flat_keys = ops.reshape(key, (-1, ops.shape(key)[1], heads * dim))
    blocks = _block_diagonal(ops.cast(query[:, 0], key.dtype))
    # keys (B, Tv, heads * dim) @ blocks^T: only the small operand moves.
    raw = ops.matmul(flat_keys, ops.transpose(blocks, (0, 2, 1)))
    raw = ops.transpose(raw, (0, 2, 1))
    if type(score) is Dot and score.scale is not None:
        raw = ops.multiply(raw, ops.cast(score.scale, raw.dtype))
    return raw[:, :, None, :]


def _one_query_context(weights, value):
    """`(B, 1, heads, dim)` context of one query's weights `(B, heads, 1, Tv)`.

    The values `(B, Tv, heads, dim)` are read in place: one matmul of the
    weights with every head's values, then each head's own block.

    >>> import numpy as np
    >>> w = np.random.uniform(size=(2, 3, 1, 5)).astype("float32")
    >>> v = np.random.normal(size=(2, 5, 3, 4)).astype("float32")
    >>> out = _one_query_context(w, v)
    >>> bool(np.allclose(out, np.einsum("bhqk,bkhd->bqhd", w, v), atol=1e-6))
    True
    """
    heads, dim = value.shape[2], value.shape[3]
    flat_values = ops.reshape(value, (-1, ops.shape(value)[1], heads * dim))
    weights = ops.cast(weights[:, :, 0, :], flat_values.dtype)
    every = ops.reshape(ops.matmul(weights, flat_values), (-1, heads, heads, dim))
    eye = ops.eye(heads, dtype=every.dtype)
    own = ops.sum(every * eye[None, :, :, None], axis=2)
    return own[:, None]


def _write_cache(cache, new, index, axis):
    """`cache` with `new` (cast to its dtype) written from `index` on `axis`.

    `ops.slice_update`, except for one position under JAX: there a
    `where` on the position writes it. Both give the same values (a
    selection; a negative index counted from the end, then clipped into
    the cache, as JAX's `dynamic_update_slice` does), but in a compiled
    decoding loop XLA turned each `slice_update` into copies of the whole
    cache: 35 per greedy step of the zoo's Transformer translator, 17 with
    the `where` (`experiments/benchmarks/jax_decoding_step.py --loop`).
    """
    new = ops.cast(new, cache.dtype)
    length = cache.shape[axis]
    if keras.config.backend() == "jax" and new.shape[axis] == 1 and length:
        shape = [1] * len(cache.shape)
        shape[axis] = length
        index = ops.convert_to_tensor(index, "int32")
        # As `dynamic_update_slice`: a negative index counts from the end.
        index = ops.clip(ops.where(index < 0, index + length, index), 0, length - 1)
        here = ops.reshape(ops.arange(length, dtype="int32") == index, shape)
        return ops.where(here, new, cache)
    start = [0] * len(cache.shape)
    start[axis] = index
    return ops.slice_update(cache, start, new)


def _take_prefix(x, length, axis):
    """The first `length` entries of `x` along `axis`; None passes through.

    A mask whose `axis` is 1 (broadcast) keeps it.
    """
    if x is None:
        return None
    index = [slice(None)] * len(x.shape)
    index[axis] = slice(0, length)
    return x[tuple(index)]


def cache_length(cache):
    """`max_length` of a key/value cache, stacked or a (keys, values) pair.

    >>> import numpy as np
    >>> cache_length(np.zeros((1, 2, 5, 2, 4))), cache_length(
    ...     (np.zeros((1, 2, 5, 4)), np.zeros((1, 2, 5, 3))))
    (5, 5)
    """
    return ops.shape(cache[0] if isinstance(cache, (tuple, list)) else cache)[2]


def _shape_matches(shape, expected):
    """Whether dimensions agree wherever both are known."""
    return len(shape) == len(expected) and all(
        s is None or e is None or s == e for s, e in zip(shape, expected)
    )


def _check_batch(query_shape, value_shape, key_shape):
    sizes = {query_shape[0], value_shape[0], key_shape[0]} - {None}
    if len(sizes) > 1:
        raise ValueError(
            "query, value and key must have the same batch size. Received: "
            f"query.shape={tuple(query_shape)}, value.shape="
            f"{tuple(value_shape)}, key.shape={tuple(key_shape)}"
        )


def _check_window(window, sliding_window, flash_attention):
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


def _check_window_lengths(window, query_shape, key_shape):
    q_len, k_len = query_shape[1], key_shape[1]
    if q_len is not None and k_len is not None and q_len != k_len:
        raise ValueError(
            "`window` is restricted self-attention: the query and the key need "
            f"the same length. Received: window={window}, query length {q_len}, "
            f"key length {k_len}"
        )


def _key_padding_mask(value_mask, key_mask, key):
    """`value_mask` and `key_mask` merged, `(B, Tv)` (or None), length checked."""
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
    return value_mask


def _causal_mask(query_length, key_length):
    """`(1, Tq, Tv)` bool: query `i` sees keys `j <= i` (Keras's alignment)."""
    rows = ops.arange(query_length)[:, None]
    return ops.expand_dims(rows >= ops.arange(key_length)[None, :], 0)


def _rows_with_keys(query_mask, keys):
    """`(B, Tq, 1)` or `(B, 1, 1)` bool: rows with a key under padding masks.

    `keys`: None or the `(B, 1, Tv)` key mask; the trailing axis is the one
    `where` broadcasts over the output's features.
    """
    rows = None if keys is None else ops.any(keys, axis=-1, keepdims=True)
    if query_mask is not None:
        query_mask = ops.expand_dims(ops.cast(query_mask, "bool"), -1)
        rows = query_mask if rows is None else ops.logical_and(query_mask, rows)
    return rows
