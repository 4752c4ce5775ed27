"""Position information for attention models: sinusoidal and learned.

Attention is permutation invariant, so Transformer-style models add a
position signal to the token embeddings. Both layers here take the embedded
sequence `(batch, T, D)` and return a tensor of the same shape to add to it;
`start_index` shifts the positions for incremental (cached) decoding, where
the model sees one token at a time, and `positions` gives each step its own
position (packed or left-padded batches). Both call arguments are those of
`keras_hub.layers.SinePositionEncoding` and `keras_hub.layers.PositionEmbedding`.
"""

import keras
from keras import ops

PACKAGE = "keras_attention"


@keras.saving.register_keras_serializable(package=PACKAGE)
class SinusoidalPositionEncoding(keras.layers.Layer):
    """Fixed sine/cosine position encoding of Vaswani et al.

    For position `pos` and feature `i` of a `D`-dimensional embedding,

        PE[pos, 2k]     = sin(pos / max_wavelength ** (2k / D))
        PE[pos, 2k + 1] = cos(pos / max_wavelength ** (2k / D))

    The layer has no weights. The angles are computed in float32 (positions
    beyond 2048 are not exact integers in float16) and the result is cast to
    the layer's compute dtype.

    Args:
        max_wavelength: int or float. The longest wavelength of the sinusoids
            (reached by the last feature pair). Defaults to `10000`.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        inputs: tensor `(..., T, D)`. Only its shape is used.
        start_index: int or scalar int tensor. Position of the first step of
            `inputs`, for cached decoding. Defaults to `0`.
        positions: optional int tensor `(T,)` or `(batch, T)` (any shape
            that broadcasts to `inputs.shape[:-1]`): the position of each
            step. Takes precedence over `start_index`, as in keras-hub.
            Defaults to `None` (`start_index ... start_index + T - 1`).

    Returns:
        The encoding, broadcast to the shape of `inputs`.

    Example:
    >>> import numpy as np
    >>> x = np.zeros((2, 5, 8), "float32")
    >>> pe = SinusoidalPositionEncoding()(x)
    >>> tuple(pe.shape)
    (2, 5, 8)
    >>> float(pe[0, 0, 1])  # cos(0)
    1.0
    >>> pe = SinusoidalPositionEncoding()(x, positions=np.array([[4, 3, 2, 1, 0]] * 2))
    >>> float(pe[0, 4, 1])  # position 0 again
    1.0

    Reference:
        Vaswani et al., 2017, "Attention Is All You Need", section 3.5.
    """

    def __init__(self, max_wavelength=10000, **kwargs):
        super().__init__(**kwargs)
        if max_wavelength is None or max_wavelength <= 1:
            raise ValueError(
                "`max_wavelength` must be a number greater than 1. "
                f"Received: max_wavelength={max_wavelength}"
            )
        self.max_wavelength = max_wavelength
        self.built = True

    def call(self, inputs, start_index=0, positions=None):
        shape = ops.shape(inputs)
        length, depth = shape[-2], shape[-1]
        if positions is None:
            positions = ops.cast(ops.arange(length), "float32") + ops.cast(
                start_index, "float32"
            )
        else:
            positions = ops.cast(positions, "float32")
        features = ops.arange(depth)
        # Features 2k and 2k + 1 share the frequency max_wavelength^(-2k / D).
        exponent = ops.cast(2 * (features // 2), "float32") / ops.cast(depth, "float32")
        frequencies = ops.power(
            ops.cast(1.0 / self.max_wavelength, "float32"), exponent
        )
        # (..., T, 1) * (D,): one row of angles per position.
        angles = ops.expand_dims(positions, -1) * frequencies
        encoding = ops.where(features % 2 == 0, ops.sin(angles), ops.cos(angles))
        encoding = ops.cast(encoding, self.compute_dtype)
        return ops.broadcast_to(encoding, shape)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update({"max_wavelength": self.max_wavelength})
        return config


@keras.saving.register_keras_serializable(package=PACKAGE)
class PositionEmbedding(keras.layers.Layer):
    """Learned absolute position embedding, one vector per position.

    Holds a `(sequence_length, D)` table (weight name `embeddings`, also
    readable as `position_embeddings`, keras-hub's attribute name) and
    returns rows `start_index ... start_index + T - 1` of it, or the rows
    `positions`, broadcast over the batch. The weights are interchangeable
    with `keras_hub.layers.PositionEmbedding`.

    Args:
        sequence_length: int. The longest sequence the table covers.
        initializer: str or `keras.initializers.Initializer`. Initializer of
            the table. Defaults to `"glorot_uniform"`.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        inputs: tensor `(..., T, D)`. Only its shape is used; `T` may be
            shorter than `sequence_length`.
        start_index: int or scalar int tensor. Position of the first step of
            `inputs`, for cached decoding; `start_index + T` must not exceed
            `sequence_length`. Defaults to `0`.
        positions: optional int tensor `(T,)` or `(batch, T)` (any shape
            that broadcasts to `inputs.shape[:-1]`) of values in
            `[0, sequence_length)`: the table row of each step. Takes
            precedence over `start_index`, as in keras-hub. Defaults to
            `None` (rows `start_index ... start_index + T - 1`).

    Returns:
        The position embeddings, broadcast to the shape of `inputs`.

    Example:
    >>> import numpy as np
    >>> layer = PositionEmbedding(sequence_length=16)
    >>> x = np.zeros((2, 5, 8), "float32")
    >>> tuple(layer(x).shape)
    (2, 5, 8)
    >>> out = layer(x, positions=np.array([[0, 1, 2, 3, 4], [2, 3, 4, 5, 6]]))
    >>> shifted = keras.ops.convert_to_numpy(layer(x, start_index=2))
    >>> bool(np.allclose(keras.ops.convert_to_numpy(out)[1], shifted[0]))
    True

    Reference:
        Gehring et al., 2017, "Convolutional Sequence to Sequence Learning",
        section 3.1; Devlin et al., 2019, "BERT", section 3.
    """

    def __init__(self, sequence_length, initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        if sequence_length is None or int(sequence_length) < 1:
            raise ValueError(
                "`sequence_length` must be a positive integer. "
                f"Received: sequence_length={sequence_length}"
            )
        self.sequence_length = int(sequence_length)
        self.initializer = keras.initializers.get(initializer)

    def build(self, inputs_shape):
        length = inputs_shape[-2]
        if length is not None and length > self.sequence_length:
            raise ValueError(
                f"The input has {length} positions but the layer was created "
                f"with sequence_length={self.sequence_length}. Received: "
                f"inputs.shape={tuple(inputs_shape)}"
            )
        self.embeddings = self.add_weight(
            name="embeddings",
            shape=(self.sequence_length, inputs_shape[-1]),
            initializer=self.initializer,
            trainable=True,
        )
        self.built = True

    @property
    def position_embeddings(self):
        """The `(sequence_length, D)` table, under keras-hub's name."""
        return self.embeddings

    def call(self, inputs, start_index=0, positions=None):
        shape = ops.shape(inputs)
        table = ops.cast(self.embeddings, self.compute_dtype)
        if positions is None:
            rows = ops.slice(table, (start_index, 0), (shape[-2], shape[-1]))
        else:
            rows = ops.take(table, ops.cast(positions, "int32"), axis=0)
        return ops.broadcast_to(rows, shape)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "sequence_length": self.sequence_length,
                "initializer": keras.initializers.serialize(self.initializer),
            }
        )
        return config
