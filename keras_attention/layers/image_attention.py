"""Self-attention over the positions of a CNN feature map (SAGAN block)."""

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
from keras_attention.layers.masking import masked_softmax


@keras.saving.register_keras_serializable(package="keras_attention")
class ImageSelfAttention(keras.layers.Layer):
    """2-D self-attention block with a learned residual gate (SAGAN).

    Every position of a `(batch, height, width, channels)` feature map
    attends to every other: 1x1 convolutions make queries (`key_dim`
    channels), keys (`key_dim`) and values (`value_dim`); the score
    compares each query with each key, a float32 softmax over the
    `height * width` positions weights the values, a 1x1 convolution maps
    the result back to `channels`, and the block returns
    `inputs + gamma * output`, with the scalar `gamma` initialised to 0 so
    that the block starts as the identity and the network learns how much
    attention to mix in.

    With a (scaled) dot product, `"dot"` without a learned scale or
    `"scaled_dot"`, and no dropout while training, the attention takes the
    backend's fused `keras.ops.dot_product_attention` kernel where
    `keras_attention.layers.dispatch` finds it memory-efficient for the
    device and compute dtype (PyTorch on CPU and CUDA; JAX on a GPU in
    bfloat16 or float16), at every size (the narrower of the key and value
    widths gets zero channels: kernels want one width). Elsewhere, and for
    every other score, above `chunk_threshold` positions the attention is
    computed by `chunked_attention` (exact, memory linear in the number of
    positions): a 128x128 map has 16,384 positions, a score matrix of 1
    GiB per image. The default, `"auto"`, is the device's crossover
    (`keras_attention.layers.dispatch.auto_threshold`); an int chunks
    above it on any device. Under JAX on a GPU a (scaled) dot product with
    both chunk sizes `"auto"` and key and value widths up to 128 is chunked
    by JAX's Triton flash kernel instead of the loop (a map of any size:
    the positions are padded to whole blocks of 128 and the padding hidden;
    `fused.triton_attention`).

    Args:
        key_dim: int or None. Channels of queries and keys. Defaults to
            `None` (`max(channels // 8, 1)`, as in SAGAN).
        value_dim: int or None. Channels of the values. Defaults to `None`
            (`max(channels // 2, 1)`, as in BigGAN's block).
        score: str, dict or `keras_attention.scores.Score`. The alignment
            function (`keras_attention.scores.get`); a `Score` instance is
            copied from its config, in this layer's dtype policy. Defaults
            to `"dot"` (SAGAN's `f(x_i)^T g(x_j)`).
        dropout: float in `[0, 1)`. Dropout on the attention weights while
            training. Defaults to `0.0`.
        chunk_threshold: `"auto"`, int or None. Number of positions above
            which the chunked path is used; `None` never chunks, `"auto"`
            is the device's crossover. Defaults to `"auto"`.
        query_chunk_size: `"auto"` or int. Query chunk of the chunked
            path (`"auto"`: `dispatch.chunk_size`). Defaults to
            `"auto"`.
        key_chunk_size: `"auto"` or int. Key chunk of the chunked path.
            Defaults to `"auto"`.
        kernel_initializer: initializer of the 1x1 convolutions. Defaults
            to `"glorot_uniform"`.
        gamma_initializer: initializer of `gamma`. Defaults to `"zeros"`.
        seed: int or None. Seed of the dropout. Defaults to `None`.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        inputs: tensor `(batch, height, width, channels)`.
        training: bool or None. Dropout only in training mode.

    Returns:
        A tensor of the shape and compute dtype of `inputs`.

    Example:
    >>> import numpy as np
    >>> inputs = keras.Input((8, 8, 16))
    >>> x = keras.layers.Conv2D(16, 3, padding="same")(inputs)
    >>> x = ImageSelfAttention(score="scaled_dot")(x)
    >>> outputs = keras.layers.Dense(10)(keras.layers.GlobalAveragePooling2D()(x))
    >>> model = keras.Model(inputs, outputs)
    >>> tuple(model.predict(np.ones((2, 8, 8, 16)), verbose=0).shape)
    (2, 10)

    Reference:
        Zhang et al., 2019, "Self-Attention Generative Adversarial
        Networks", section 3.
    """

    def __init__(
        self,
        key_dim=None,
        value_dim=None,
        score="dot",
        dropout=0.0,
        chunk_threshold="auto",
        query_chunk_size="auto",
        key_chunk_size="auto",
        kernel_initializer="glorot_uniform",
        gamma_initializer="zeros",
        seed=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        key_dim = int_argument("key_dim", key_dim, allowed=(None,))
        value_dim = int_argument("value_dim", value_dim, allowed=(None,))
        chunk_threshold = int_argument(
            "chunk_threshold", chunk_threshold, minimum=0, allowed=(dispatch.AUTO, None)
        )
        query_chunk_size = int_argument(
            "query_chunk_size", query_chunk_size, allowed=(dispatch.AUTO,)
        )
        key_chunk_size = int_argument(
            "key_chunk_size", key_chunk_size, allowed=(dispatch.AUTO,)
        )
        if not 0.0 <= dropout < 1.0:
            raise ValueError(
                f"`dropout` must be in [0, 1). Received: dropout={dropout!r}"
            )
        if isinstance(score, scores.Score):
            score = scores.serialize(score)
        scores.get(score)  # fails early, with the registry's message
        self.key_dim = key_dim
        self.value_dim = value_dim
        self.score = score
        self.dropout = dropout
        self.chunk_threshold = chunk_threshold
        self.query_chunk_size = query_chunk_size
        self.key_chunk_size = key_chunk_size
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.gamma_initializer = keras.initializers.get(gamma_initializer)
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)

    def build(self, input_shape):
        if len(input_shape) != 4 or input_shape[-1] is None:
            raise ValueError(
                "ImageSelfAttention expects (batch, height, width, channels) "
                f"with known channels. Received: input_shape={tuple(input_shape)}"
            )
        channels = input_shape[-1]
        key_dim = self.key_dim or max(channels // 8, 1)
        value_dim = self.value_dim or max(channels // 2, 1)

        def conv(filters, name):
            return keras.layers.Conv2D(
                filters,
                1,
                kernel_initializer=keras.initializers.get(
                    keras.saving.serialize_keras_object(self.kernel_initializer)
                ),
                dtype=self.dtype_policy,
                name=name,
            )

        self.query_conv = conv(key_dim, "query")
        self.query_conv.build(input_shape)
        self.key_conv = conv(key_dim, "key")
        self.key_conv.build(input_shape)
        self.value_conv = conv(value_dim, "value")
        self.value_conv.build(input_shape)
        self.output_conv = conv(channels, "output")
        self.output_conv.build((*input_shape[:3], value_dim))
        score = scores.get(self.score)
        config = {**score.get_config(), "dtype": self.dtype_policy, "name": "score"}
        self.score_layer = type(score).from_config(config)
        self.score_layer.build((None, None, key_dim), (None, None, key_dim))
        self.dropout_layer = keras.layers.Dropout(
            self.dropout, seed=self.seed, dtype=self.dtype_policy, name="dropout"
        )
        self.gamma = self.add_weight(
            name="gamma", shape=(), initializer=self.gamma_initializer
        )
        self.built = True

    def call(self, inputs, training=None):
        height, width = inputs.shape[1], inputs.shape[2]
        positions = None if None in (height, width) else height * width
        shape = ops.shape(inputs)

        def flat(x):
            return ops.reshape(x, (shape[0], shape[1] * shape[2], x.shape[-1]))

        query = flat(self.query_conv(inputs))
        key = flat(self.key_conv(inputs))
        value = flat(self.value_conv(inputs))
        scale = self._fused_scale(positions, training)
        chunked = positions is not None and dispatch.takes_chunked_path(
            self.chunk_threshold,
            positions,
            scale is not None,
            self.compute_dtype,
            "none",
            inputs,
        )
        if chunked:
            context = self._chunked(query, key, value, training, scale)
        elif scale is not None and dispatch.fused_is_memory_efficient_here(
            self.compute_dtype, "none", inputs
        ):
            context = fused_attention(query, key, value, scale)
        else:
            weights = masked_softmax(self.score_layer(query, key))
            weights = ops.cast(weights, self.compute_dtype)
            weights = self.dropout_layer(weights, training=training)
            context = ops.matmul(weights, value)
        context = ops.reshape(context, (shape[0], shape[1], shape[2], -1))
        output = self.output_conv(context)
        return inputs + ops.cast(self.gamma, self.compute_dtype) * output

    def _fused_scale(self, positions, training):
        """The dot product's scale where the call can be fused, else None.

        The score must be a (scaled) dot product (`fused.dot_product_scale`),
        the number of positions known and non-zero, no dropout while
        training, and the compute dtype not float16 (where the explicit
        path scores in float32 and the kernels would overflow).
        """
        float16 = keras.backend.standardize_dtype(self.compute_dtype) == "float16"
        if not positions or (training and self.dropout > 0.0) or float16:
            return None
        return dot_product_scale(self.score_layer, self.query_conv.filters)

    def _chunked(self, query, key, value, training, fused_scale=None):
        """The attention of `call` by `chunked_attention`, or by JAX's Triton
        flash kernel where a fusable call (`fused_scale`) with both chunk
        sizes `"auto"` can take it (`fused.triton_attention`)."""
        if (
            fused_scale is not None
            and self.query_chunk_size == self.key_chunk_size == dispatch.AUTO
        ):
            context = triton_attention(query, key, value, fused_scale)
            if context is not None:
                return context
        scale = dot_product_scale(self.score_layer, key.shape[-1])
        options = {"score_fn": self.score_layer} if scale is None else {"scale": scale}
        if training and self.dropout > 0.0:
            options["dropout_rate"] = self.dropout
            options["seed"] = keras.random.randint(
                (), 0, 2**31 - 1, seed=self.seed_generator
            )
        rows = query.shape[0]
        return chunked_attention(
            query,
            key,
            value,
            query_chunk_size=dispatch.chunk_size(self.query_chunk_size, rows, query),
            key_chunk_size=dispatch.chunk_size(self.key_chunk_size, rows, query),
            **options,
        )

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "key_dim": self.key_dim,
                "value_dim": self.value_dim,
                "score": self.score,
                "dropout": self.dropout,
                "chunk_threshold": self.chunk_threshold,
                "query_chunk_size": self.query_chunk_size,
                "key_chunk_size": self.key_chunk_size,
                "kernel_initializer": keras.saving.serialize_keras_object(
                    self.kernel_initializer
                ),
                "gamma_initializer": keras.saving.serialize_keras_object(
                    self.gamma_initializer
                ),
                "seed": self.seed,
            }
        )
        return config
