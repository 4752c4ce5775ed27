"""What the Transformer encoder and decoder blocks share.

`TransformerBlock` holds both blocks' arguments, their validation, their
config and the factories of their sublayers (attention, norms, dense,
dropout, the residual and the feed-forward); the helpers below move masks
and cache layouts between the blocks and their attention sublayers.
"""

import keras
from keras import ops
from keras.src.backend import get_keras_mask, set_keras_mask

from keras_attention import scores
from keras_attention.arguments import int_argument
from keras_attention.layers import dispatch, score_mods
from keras_attention.layers.grouped_query_attention import GroupedQueryAttention
from keras_attention.layers.multi_head_attention import (
    MultiHeadAttention,
    check_rotary,
)
from keras_attention.layers.windowed import check_window

PACKAGE = "keras_attention"


class TransformerBlock(keras.layers.Layer):
    """Arguments, validation, config and sublayer factories of both blocks."""

    def __init__(
        self,
        intermediate_dim,
        num_heads,
        dropout=0.0,
        activation="relu",
        layer_norm_epsilon=1e-5,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        normalize_first=False,
        score="scaled_dot",
        chunk_threshold="auto",
        chunk_size="auto",
        window=None,
        num_key_value_heads=None,
        score_mod=None,
        rotary=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        chunk_threshold, chunk_size = dispatch.check(chunk_threshold, chunk_size)
        window = check_window(window)
        intermediate_dim = int_argument("intermediate_dim", intermediate_dim)
        num_heads = int_argument("num_heads", num_heads)
        if num_key_value_heads is None:
            num_key_value_heads = num_heads
        num_key_value_heads = int_argument("num_key_value_heads", num_key_value_heads)
        if num_heads % num_key_value_heads != 0:
            raise ValueError(
                "`num_heads` must be divisible by `num_key_value_heads`. "
                f"Received: num_heads={num_heads}, "
                f"num_key_value_heads={num_key_value_heads}"
            )
        if not 0.0 <= dropout < 1.0:
            raise ValueError(
                f"`dropout` must be in [0, 1). Received: dropout={dropout}"
            )
        if isinstance(score, scores.Score):
            score = scores.serialize(score)
        scores.get(score)  # Fails early, with the registry's message.
        self.intermediate_dim = int(intermediate_dim)
        self.num_heads = int(num_heads)
        self.num_key_value_heads = int(num_key_value_heads)
        self.dropout = dropout
        self.activation = keras.activations.get(activation)
        self.layer_norm_epsilon = layer_norm_epsilon
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.normalize_first = normalize_first
        self.score = score
        self.chunk_threshold = chunk_threshold
        self.chunk_size = chunk_size
        self.window = window
        self.score_mod = score_mods.serialize(score_mods.get(score_mod))
        self.rotary = check_rotary(rotary)
        self.supports_masking = True

    def _head_dim(self, hidden_dim):
        if hidden_dim is None or hidden_dim % self.num_heads != 0:
            raise ValueError(
                f"The hidden size ({hidden_dim}) must be divisible by the "
                f"number of heads (num_heads={self.num_heads}) in "
                f"{type(self).__name__}."
            )
        return hidden_dim // self.num_heads

    def _initializers(self):
        # A fresh initializer per sublayer, so seeded ones do not repeat.
        return {
            "kernel_initializer": clone(self.kernel_initializer),
            "bias_initializer": clone(self.bias_initializer),
        }

    def _attention(
        self, name, head_dim, query_shape, value_shape, window=None, positional=False
    ):
        """`MultiHeadAttention`, or `GroupedQueryAttention` with fewer key/value heads.

        `positional`: the self-attention, which takes `score_mod` and
        `rotary`.
        """
        if self.num_key_value_heads == self.num_heads:
            heads = {
                "num_heads": self.num_heads,
                "key_dim": head_dim,
                "value_dim": head_dim,
            }
            attention_cls = MultiHeadAttention
        else:
            heads = {
                "head_dim": head_dim,
                "num_query_heads": self.num_heads,
                "num_key_value_heads": self.num_key_value_heads,
            }
            attention_cls = GroupedQueryAttention
        if positional and self.score_mod is not None:
            heads["score_mod"] = self.score_mod
        if positional and self.rotary is not None:
            heads["rotary"] = self.rotary
        layer = attention_cls(
            **heads,
            dropout=self.dropout,
            score=self.score,
            chunk_threshold=self.chunk_threshold,
            chunk_size=self.chunk_size,
            window=window,
            dtype=self.dtype_policy,
            name=name,
            **self._initializers(),
        )
        layer.build(query_shape, value_shape)
        return layer

    def _norm(self, name, shape):
        layer = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name=name
        )
        layer.build(shape)
        return layer

    def _dropout(self, name):
        return keras.layers.Dropout(self.dropout, dtype=self.dtype_policy, name=name)

    def _dense(self, name, units, input_shape, activation=None):
        layer = keras.layers.Dense(
            units,
            activation=activation,
            dtype=self.dtype_policy,
            name=name,
            **self._initializers(),
        )
        layer.build(input_shape)
        return layer

    def _residual(self, x, norm, dropout, sublayer, training):
        """One residual sublayer with the chosen norm order.

        `sublayer` maps `x` to a tuple `(y, *extras)`; returns the new `x`,
        `LN(x + Dropout(y))` (post-norm) or `x + Dropout(y(LN(x)))`
        (pre-norm), and the extras (attention weights, cache).
        """
        residual = x
        if self.normalize_first:
            x = unmasked(norm(x))
        x, *extras = sublayer(x)
        if training and self.dropout > 0:
            # `Dropout` is the identity otherwise: one layer call less.
            x = dropout(x, training=training)
        x = x + residual
        if not self.normalize_first:
            x = norm(x)
        return x, extras

    def _feedforward(self, x, training):
        """`x + Dropout(W2 act(W1 x + b1) + b2)` with the chosen norm order."""
        x, _ = self._residual(
            x,
            self._feedforward_layer_norm,
            self._feedforward_dropout,
            lambda x: (
                self._feedforward_output_dense(self._feedforward_intermediate_dense(x)),
            ),
            training,
        )
        return x

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "intermediate_dim": self.intermediate_dim,
                "num_heads": self.num_heads,
                "dropout": self.dropout,
                "activation": keras.activations.serialize(self.activation),
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "kernel_initializer": keras.initializers.serialize(
                    self.kernel_initializer
                ),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
                "normalize_first": self.normalize_first,
                "score": self.score,
                "chunk_threshold": self.chunk_threshold,
                "chunk_size": self.chunk_size,
                "window": self.window,
            }
        )
        if self.num_key_value_heads != self.num_heads:
            # Only when grouped: a default block's config stays keras-hub's
            # plus ours, as saved presets hold it.
            config["num_key_value_heads"] = self.num_key_value_heads
        if self.score_mod is not None:
            config["score_mod"] = self.score_mod
        if self.rotary is not None:
            config["rotary"] = self.rotary
        return config


def heads_first(x):
    """`(B, S, heads, dim)` -> `(B, heads, S, dim)`, laid out in that order.

    PyTorch's transpose is a strided view: a decoding step reshaping it to
    `(B * heads, S, dim)` would copy the whole of it at every step; the
    reshape here copies it once (on TensorFlow and JAX the transpose is
    already a new array).
    """
    batch, length = ops.shape(x)[0], ops.shape(x)[1]
    heads, dim = x.shape[2], x.shape[3]
    x = ops.reshape(ops.transpose(x, (0, 2, 1, 3)), (batch * heads, length, dim))
    return ops.reshape(x, (batch, heads, length, dim))


def take_keras_mask(x):
    """Returns the Keras mask of `x` and detaches it until the call ends.

    A mask left on a tensor would be turned by `Layer.__call__` into a
    `query_mask` of the attention sublayer (hiding padded query rows) on top
    of the masks this block passes explicitly, and `MultiHeadAttention`
    would clear it; the blocks put it back on their inputs before returning,
    so a tensor shared by a stack of blocks keeps its mask.
    `keras.src.backend.get_keras_mask` is the accessor that works on every
    backend (JAX arrays keep the mask outside the tensor); keras-hub reads
    implicit masks the same way.
    """
    mask = get_keras_mask(x)
    set_keras_mask(x, None)
    return mask


def causal_mask(query_length, key_length):
    """`(1, Tq, Tk)` bool: query `i` sees keys `0 ... i` (aligned at the start)."""
    rows = ops.arange(query_length)
    cols = ops.arange(key_length)
    return ops.expand_dims(rows[:, None] >= cols[None, :], 0)


def and_masks(mask, other):
    if mask is None:
        return other
    return ops.logical_and(ops.cast(mask, "bool"), other)


def unmasked(x):
    """Drops the Keras mask a sublayer attached to the intermediate `x`."""
    set_keras_mask(x, None)
    return x


def unpack(outputs, with_weights, with_cache):
    """Splits `MultiHeadAttention`'s outputs into `(x, weights, cache)`."""
    if not with_weights and not with_cache:
        return outputs, None, None
    if with_weights and with_cache:
        return outputs
    if with_weights:
        return outputs[0], outputs[1], None
    return outputs[0], None, outputs[1]


def clone(initializer):
    """A copy of an initializer object (strings and dicts pass through)."""
    if isinstance(initializer, keras.initializers.Initializer):
        return initializer.__class__.from_config(initializer.get_config())
    return initializer
