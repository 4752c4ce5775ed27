"""`TransformerCaptionerBackbone`: CNN grid, self-attention, Transformer decoder."""

import numbers

import keras
from keras import ops

from keras_attention.layers import PositionEmbedding
from zoo.base import lora, transformer_stacks
from zoo.base import parameter_budget as budget
from zoo.base.backbone import MAX_IMAGE_SHAPE, MAX_SIZES, Backbone, positive_int
from zoo.base.transformer_stacks import TransformerStacks
from zoo.captioning.cnn import small_cnn, small_cnn_size


@keras.saving.register_keras_serializable(package="zoo")
class TransformerCaptionerBackbone(Backbone):
    """Image to caption hidden states: CNN grid, encoder blocks, decoder blocks.

    The built-in small CNN (`zoo.captioning.cnn.small_cnn`: an
    84x84 image becomes a 7x7 grid of 128 features) is projected to
    `hidden_dim`; a learned embedding per grid cell (row by row) is added
    and `encoder_layers` pre-norm `TransformerEncoderBlock`s let the cells
    attend to each other (self-attention over CNN features). Caption ids
    are embedded (scaled by `sqrt(hidden_dim)`, sinusoidal positions) and
    `decoder_layers` pre-norm `TransformerDecoderBlock`s (causal
    self-attention, cross-attention over the `L` grid cells, feed-forward)
    decode them. The task (`TransformerCaptioner`) multiplies the decoder
    output by the transposed token embedding to get the word logits.

    Inputs are named `images` (float `(B, H, W, C)` in `[0, 1]`, as
    `zoo.captioning.CaptionPreprocessor` makes them) and
    `decoder_token_ids` (int `(B, T)`, `[START] y_1 ... y_{T-1}`, 0 for
    padding; padding only follows the words, so the causal mask hides it).

    Args:
        vocabulary_size: int. Caption vocabulary size.
        image_shape: tuple `(H, W, C)`. Defaults to `(84, 84, 1)`.
        encoder_layers: int. Self-attention blocks over the grid. Defaults
            to `2`.
        decoder_layers: int. Decoder blocks. Defaults to `2`.
        hidden_dim: int. Model size `d_model`. Defaults to `128`.
        intermediate_dim: int. Feed-forward size. Defaults to `256`.
        num_heads: int. Attention heads; must divide `hidden_dim`. Defaults
            to `4`.
        dropout: float in `[0, 1)`. On the embeddings, every residual branch
            and the attention weights. Defaults to `0.1`.
        layer_norm_epsilon: float. Defaults to `1e-5`.
        dtype: optional dtype policy. Defaults to `None` (the global one).
        num_key_value_heads: int or None. Key/value heads of every
            attention (grouped-query attention; must divide `num_heads`).
            Defaults to `None`: `num_heads`.
        **kwargs: `keras.Model` arguments (e.g. `name`).

    Returns:
        A dict: `encoder_sequence_output` `(B, L, hidden_dim)` (the attended
        grid, row by row) and `decoder_sequence_output`
        `(B, T, hidden_dim)`.

    Example:
    >>> import numpy as np
    >>> backbone = TransformerCaptionerBackbone(
    ...     10, hidden_dim=8, intermediate_dim=16, num_heads=2)
    >>> outputs = backbone({
    ...     "images": np.zeros((2, 84, 84, 1), "float32"),
    ...     "decoder_token_ids": np.array([[2, 5, 6], [2, 7, 0]], "int32")})
    >>> {name: tuple(x.shape) for name, x in sorted(outputs.items())}
    {'decoder_sequence_output': (2, 3, 8), 'encoder_sequence_output': (2, 49, 8)}
    >>> backbone.grid_shape
    (7, 7)

    Reference:
        Vaswani et al., 2017, "Attention Is All You Need"; Liu et al., 2021,
        "CPTR: Full Transformer Network for Image Captioning" (a
        Transformer decoder over image patches).
    """

    def __init__(
        self,
        vocabulary_size,
        image_shape=(84, 84, 1),
        encoder_layers=2,
        decoder_layers=2,
        hidden_dim=128,
        intermediate_dim=256,
        num_heads=4,
        dropout=0.1,
        layer_norm_epsilon=1e-5,
        dtype=None,
        num_key_value_heads=None,
        **kwargs,
    ):
        _check_arguments(vocabulary_size, image_shape, encoder_layers, decoder_layers)
        image_shape = tuple(int(s) for s in image_shape)
        stacks = TransformerStacks(
            hidden_dim,
            intermediate_dim,
            num_heads,
            dropout,
            normalize_first=True,
            layer_norm_epsilon=layer_norm_epsilon,
            dtype=dtype,
            num_key_value_heads=num_key_value_heads,
        )

        # === Layers ===
        # The CNN's layers, in order (e.g. to pretrain or freeze them).
        self.cnn_layers = small_cnn(dtype)
        self.grid_projection = keras.layers.Dense(
            hidden_dim, dtype=dtype, name="grid_projection"
        )
        self.encoder_blocks = stacks.encoder_blocks(encoder_layers)
        self.encoder_norm = stacks.output_norm("encoder_output_norm")
        self.token_embedding = stacks.token_embedding(vocabulary_size)
        self.position_encoding = stacks.position_encoding()
        self.embedding_dropout = stacks.embedding_dropout()
        self.decoder_blocks = stacks.decoder_blocks(decoder_layers)
        self.decoder_norm = stacks.output_norm("decoder_output_norm")
        self.hidden_dim = hidden_dim

        # === Functional graph ===
        images = keras.Input(image_shape, name="images")
        decoder_token_ids = keras.Input(
            (None,), dtype="int32", name="decoder_token_ids"
        )
        grid = self._cnn(images)
        self.grid_shape = (grid.shape[1], grid.shape[2])
        self.grid_positions = PositionEmbedding(
            self.grid_shape[0] * self.grid_shape[1],
            dtype=dtype,
            name="grid_positions",
        )
        encoder_output = self._encode_grid(grid)
        decoder_output = self.call_decoder(decoder_token_ids, encoder_output)
        super().__init__(
            inputs={"images": images, "decoder_token_ids": decoder_token_ids},
            outputs={
                "encoder_sequence_output": encoder_output,
                "decoder_sequence_output": decoder_output,
            },
            dtype=dtype,
            **kwargs,
        )

        # === Config ===
        self.vocabulary_size = vocabulary_size
        self.image_shape = image_shape
        self.encoder_layers = encoder_layers
        self.decoder_layers = decoder_layers
        self.intermediate_dim = intermediate_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.layer_norm_epsilon = layer_norm_epsilon
        self.num_key_value_heads = num_key_value_heads

    @classmethod
    def parameter_count(
        cls,
        vocabulary_size,
        image_shape,
        encoder_layers,
        decoder_layers,
        hidden_dim,
        intermediate_dim,
        num_heads,
        dropout,
        num_key_value_heads=None,
        **arguments,
    ):
        """The parameters `TransformerCaptionerBackbone(...)` would create, unbuilt.

        Exact; see `Backbone.parameter_count`.

        Example:
        >>> from zoo.base.constructor_arguments import ArgumentsOf
        >>> config = {"vocabulary_size": 10, "hidden_dim": 8,
        ...           "intermediate_dim": 16, "num_heads": 2}
        >>> count = TransformerCaptionerBackbone.parameter_count(
        ...     **ArgumentsOf(TransformerCaptionerBackbone).values(config))
        >>> count == TransformerCaptionerBackbone(**config).count_params()
        True
        """
        _check_arguments(vocabulary_size, image_shape, encoder_layers, decoder_layers)
        stacks = TransformerStacks(
            hidden_dim,
            intermediate_dim,
            num_heads,
            dropout,
            normalize_first=True,
            num_key_value_heads=num_key_value_heads,
        )
        rows, columns, features, count = small_cnn_size(tuple(image_shape))
        count += budget.dense(features, hidden_dim) + rows * columns * hidden_dim
        count += vocabulary_size * hidden_dim  # tied with the output projection
        return count + stacks.parameters(encoder_layers, decoder_layers)

    def default_lora_layer_names(self):
        """LoRA's targets: every attention's query and value projections (keras-hub's).

        Add `"key"` and `"attention_output"` (`zoo.base.lora.ATTENTION_PROJECTIONS`)
        through `enable_lora`'s `target_layer_names`.

        Example:
        >>> backbone = TransformerCaptionerBackbone(
        ...     10, hidden_dim=8, intermediate_dim=16, num_heads=2)
        >>> backbone.default_lora_layer_names()
        ['query', 'value']
        >>> backbone.enable_lora(2)  # 6 attentions, 2 projections, 2 adapters
        >>> len(backbone.trainable_weights)
        24
        """
        return list(lora.QUERY_AND_VALUE)

    def _cnn(self, images):
        x = images
        for layer in self.cnn_layers:
            x = layer(x)
        return x

    def _encode_grid(self, grid):
        height, width, channels = grid.shape[1], grid.shape[2], grid.shape[3]
        x = self.grid_projection(ops.reshape(grid, (-1, height * width, channels)))
        x = self.embedding_dropout(x + self.grid_positions(x))
        return transformer_stacks.run_encoder(self.encoder_blocks, self.encoder_norm, x)

    def call_encoder(self, images):
        """The attended grid `(B, L, hidden_dim)` of prepared images.

        Args:
            images: float tensor `(B, H, W, C)` in `[0, 1]`.

        Returns:
            The encoder output, the `L = H_grid * W_grid` cells row by row.

        Example:
        >>> import numpy as np
        >>> backbone = TransformerCaptionerBackbone(
        ...     10, hidden_dim=8, intermediate_dim=16, num_heads=2)
        >>> tuple(backbone.call_encoder(np.zeros((2, 84, 84, 1), "float32")).shape)
        (2, 49, 8)
        """
        images = ops.convert_to_tensor(images, self.compute_dtype)
        return self._encode_grid(self._cnn(images))

    def embed(self, token_ids, start_index=0):
        """Embeds ids: `embedding(ids) * sqrt(d_model) + positions`, dropout.

        Args:
            token_ids: int tensor `(B, T)`.
            start_index: int or int scalar tensor. Position of the first id
                (for one cached decoding step). Defaults to `0`.

        Returns:
            Tensor `(B, T, hidden_dim)`.

        Example:
        >>> import numpy as np
        >>> backbone = TransformerCaptionerBackbone(
        ...     10, hidden_dim=8, intermediate_dim=16, num_heads=2)
        >>> tuple(backbone.embed(np.array([[2, 5]]), start_index=3).shape)
        (1, 2, 8)
        """
        return transformer_stacks.embed(
            token_ids,
            self.token_embedding,
            self.position_encoding,
            self.embedding_dropout,
            start_index,
        )

    def call_decoder(
        self, decoder_token_ids, encoder_sequence_output, return_attention_scores=False
    ):
        """Runs the decoder over a whole (teacher-forced) caption prefix.

        Args:
            decoder_token_ids: int tensor `(B, T)`.
            encoder_sequence_output: tensor `(B, L, hidden_dim)`.
            return_attention_scores: bool. Also return the last decoder
                block's cross-attention weights `(B, num_heads, T, L)`.
                Defaults to `False`.

        Returns:
            The normalised decoder output `(B, T, hidden_dim)`, and the
            weights when asked.

        Example:
        >>> import numpy as np
        >>> backbone = TransformerCaptionerBackbone(
        ...     10, hidden_dim=8, intermediate_dim=16, num_heads=2)
        >>> grid = backbone.call_encoder(np.zeros((1, 84, 84, 1), "float32"))
        >>> x, weights = backbone.call_decoder(
        ...     np.array([[2, 7, 8]]), grid, return_attention_scores=True)
        >>> tuple(x.shape), tuple(weights.shape)
        ((1, 3, 8), (1, 2, 3, 49))
        """
        return transformer_stacks.run_decoder(
            self.decoder_blocks,
            self.decoder_norm,
            self.embed(decoder_token_ids),
            encoder_sequence_output,
            return_attention_scores=return_attention_scores,
        )

    def get_config(self):
        config = super().get_config()
        config.update(image_shape=list(self.image_shape))
        return config


def _check_arguments(vocabulary_size, image_shape, encoder_layers, decoder_layers):
    """Raises a `ValueError` naming the first bad argument and its value.

    The sizes of the stacks are checked by `TransformerStacks`.
    """
    positive_int("vocabulary_size", vocabulary_size)
    positive_int("encoder_layers", encoder_layers, MAX_SIZES["encoder_layers"])
    positive_int("decoder_layers", decoder_layers, MAX_SIZES["encoder_layers"])
    shape = tuple(image_shape) if hasattr(image_shape, "__len__") else ()
    if (
        len(shape) != 3
        or not all(
            isinstance(s, numbers.Integral) and not isinstance(s, bool) for s in shape
        )
        or not all(1 <= s <= m for s, m in zip(shape, MAX_IMAGE_SHAPE))
    ):
        raise ValueError(
            "`image_shape` must be (H, W, C) of positive ints at most "
            f"{MAX_IMAGE_SHAPE} (zoo.base.backbone.MAX_IMAGE_SHAPE). Received: "
            f"image_shape={image_shape!r:.80}"
        )
