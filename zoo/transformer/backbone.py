"""`TransformerBackbone`: the encoder-decoder stacks of Vaswani et al. (2017)."""

import keras
from keras import ops

from zoo.base import lora, transformer_stacks
from zoo.base.backbone import Backbone, positive_int
from zoo.base.transformer_stacks import TransformerStacks

PAD_ID = 0


@keras.saving.register_keras_serializable(package="zoo")
class TransformerBackbone(Backbone):
    """Encoder-decoder Transformer stacks, from token ids to hidden states.

    Token ids are embedded (one table shared by source and target when the
    vocabulary is shared), scaled by `sqrt(hidden_dim)`, summed with the
    sinusoidal position encoding and dropped out; `num_layers`
    `keras_attention.layers.TransformerEncoderBlock`s encode the source and
    `num_layers` `TransformerDecoderBlock`s (causal self-attention,
    cross-attention, feed-forward) decode the target. Post-norm blocks as in
    the paper, or pre-norm (`normalize_first=True`, with a final layer
    normalisation after each stack). Any alignment function of
    `keras_attention.scores` can replace the scaled dot product in every
    head (`score=`).

    Id 0 is padding: padded source positions are hidden from the attention;
    target padding only ever follows the real tokens, so the causal mask
    hides it. The backbone has no output projection: `zoo.Transformer`
    multiplies `decoder_sequence_output` by the transposed
    `target_embedding` table (`target_embedding(x, reverse=True)`).

    Args:
        vocabulary_size: int. Size of the shared vocabulary, or of the
            source vocabulary when `target_vocabulary_size` is given.
        num_layers: int. Encoder layers, and decoder layers. Defaults to `6`.
        hidden_dim: int. Model size `d_model`. Defaults to `512`.
        intermediate_dim: int. Feed-forward size `d_ff`. Defaults to `2048`.
        num_heads: int. Attention heads; must divide `hidden_dim`. Defaults
            to `8`.
        dropout: float. Dropout on the embeddings, every residual branch and
            the attention weights. Defaults to `0.1`.
        normalize_first: bool. Pre-norm blocks. Defaults to `False`.
        score: str, dict or `keras_attention.scores.Score`. Alignment
            function of every head. Defaults to `"scaled_dot"`.
        tie_embeddings: bool. Use the transposed target embedding as the
            pre-softmax weights (else the target embedding holds a separate
            output table). Defaults to `True`.
        target_vocabulary_size: int or None. A separate target vocabulary
            (and embedding table); `None` shares the source's. Defaults to
            `None`.
        max_wavelength: float. Of the sinusoidal encoding. Defaults to
            `10000`.
        layer_norm_epsilon: float. Defaults to `1e-6`.
        dtype: optional dtype or `keras.DTypePolicy` of every layer (e.g.
            `"mixed_bfloat16"`). Defaults to the global policy.
        num_key_value_heads: int or None. Key/value heads of every
            attention (grouped-query attention; must divide `num_heads`).
            Defaults to `None`: `num_heads`.
        **kwargs: `keras.Model` arguments (e.g. `name`).

    Call arguments:
        inputs: dict of int tensors `encoder_token_ids` `(batch, S)` and
            `decoder_token_ids` `(batch, T)`.

    Returns:
        A dict: `encoder_sequence_output` `(batch, S, hidden_dim)` and
        `decoder_sequence_output` `(batch, T, hidden_dim)`.

    Example:
    >>> import numpy as np
    >>> backbone = TransformerBackbone(
    ...     20, num_layers=1, hidden_dim=8, intermediate_dim=16, num_heads=2)
    >>> outputs = backbone({
    ...     "encoder_token_ids": np.array([[5, 6, 3, 0]]),
    ...     "decoder_token_ids": np.array([[2, 7, 8]])})
    >>> {name: tuple(x.shape) for name, x in sorted(outputs.items())}
    {'decoder_sequence_output': (1, 3, 8), 'encoder_sequence_output': (1, 4, 8)}

    Reference:
        Vaswani et al., 2017, "Attention Is All You Need"; Press and Wolf,
        2017, "Using the Output Embedding to Improve Language Models".
    """

    def __init__(
        self,
        vocabulary_size,
        num_layers=6,
        hidden_dim=512,
        intermediate_dim=2048,
        num_heads=8,
        dropout=0.1,
        normalize_first=False,
        score="scaled_dot",
        tie_embeddings=True,
        target_vocabulary_size=None,
        max_wavelength=10000,
        layer_norm_epsilon=1e-6,
        dtype=None,
        num_key_value_heads=None,
        **kwargs,
    ):
        _check_arguments(vocabulary_size, num_layers, target_vocabulary_size)
        if isinstance(score, keras.layers.Layer):
            score = keras.saving.serialize_keras_object(score)
        stacks = TransformerStacks(
            hidden_dim,
            intermediate_dim,
            num_heads,
            dropout,
            normalize_first=normalize_first,
            layer_norm_epsilon=layer_norm_epsilon,
            score=score,
            dtype=dtype,
            num_key_value_heads=num_key_value_heads,
        )
        shared = target_vocabulary_size is None

        # === Layers ===
        self.target_embedding = stacks.token_embedding(
            vocabulary_size if shared else target_vocabulary_size,
            "token_embedding" if shared else "target_embedding",
            tie_embeddings,
        )
        self.source_embedding = (
            self.target_embedding
            if shared
            else stacks.token_embedding(vocabulary_size, "source_embedding")
        )
        self.position_encoding = stacks.position_encoding(max_wavelength)
        self.embedding_dropout = stacks.embedding_dropout()
        self.encoder_blocks = stacks.encoder_blocks(num_layers)
        self.decoder_blocks = stacks.decoder_blocks(num_layers)
        self.encoder_norm = stacks.output_norm("encoder_output_norm")
        self.decoder_norm = stacks.output_norm("decoder_output_norm")
        self.hidden_dim = hidden_dim

        # === Functional graph ===
        encoder_token_ids = keras.Input(
            (None,), dtype="int32", name="encoder_token_ids"
        )
        decoder_token_ids = keras.Input(
            (None,), dtype="int32", name="decoder_token_ids"
        )
        encoder_output, encoder_padding_mask = self.call_encoder(encoder_token_ids)
        decoder_output = self.call_decoder(
            decoder_token_ids, encoder_output, encoder_padding_mask
        )
        super().__init__(
            inputs={
                "encoder_token_ids": encoder_token_ids,
                "decoder_token_ids": decoder_token_ids,
            },
            outputs={
                "encoder_sequence_output": encoder_output,
                "decoder_sequence_output": decoder_output,
            },
            dtype=dtype,
            **kwargs,
        )

        # === Config ===
        self.vocabulary_size = vocabulary_size
        self.num_layers = num_layers
        self.intermediate_dim = intermediate_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.normalize_first = normalize_first
        self.score = score
        self.tie_embeddings = tie_embeddings
        self.target_vocabulary_size = target_vocabulary_size
        self.max_wavelength = max_wavelength
        self.layer_norm_epsilon = layer_norm_epsilon
        self.num_key_value_heads = num_key_value_heads

    @classmethod
    def parameter_count(
        cls,
        vocabulary_size,
        num_layers,
        hidden_dim,
        intermediate_dim,
        num_heads,
        dropout,
        normalize_first,
        score,
        tie_embeddings,
        target_vocabulary_size,
        num_key_value_heads=None,
        **arguments,
    ):
        """The parameters `TransformerBackbone(...)` would create, unbuilt.

        Exact but for a parametrised alignment function, bounded by
        `zoo.base.parameter_budget.score_parameters`; see
        `Backbone.parameter_count`.

        Example:
        >>> from zoo.base.constructor_arguments import ArgumentsOf
        >>> config = {"vocabulary_size": 20, "num_layers": 1, "hidden_dim": 8,
        ...           "intermediate_dim": 16, "num_heads": 2,
        ...           "target_vocabulary_size": 24, "tie_embeddings": False}
        >>> count = TransformerBackbone.parameter_count(
        ...     **ArgumentsOf(TransformerBackbone).values(config))
        >>> count == TransformerBackbone(**config).count_params()
        True
        """
        _check_arguments(vocabulary_size, num_layers, target_vocabulary_size)
        stacks = TransformerStacks(
            hidden_dim,
            intermediate_dim,
            num_heads,
            dropout,
            normalize_first,
            score=score,
            num_key_value_heads=num_key_value_heads,
        )
        # The target embedding (and its output projection when untied);
        # a separate source vocabulary has a tied embedding of its own.
        embeddings = (target_vocabulary_size or vocabulary_size) * hidden_dim
        count = embeddings * (1 if tie_embeddings else 2)
        if target_vocabulary_size is not None:
            count += vocabulary_size * hidden_dim
        return count + stacks.parameters(num_layers, num_layers)

    def default_lora_layer_names(self):
        """LoRA's targets: every attention's query and value projections (keras-hub's).

        Add `"key"` and `"attention_output"` (`zoo.base.lora.ATTENTION_PROJECTIONS`)
        through `enable_lora`'s `target_layer_names`.

        Example:
        >>> backbone = TransformerBackbone(
        ...     20, num_layers=1, hidden_dim=8, intermediate_dim=16, num_heads=2)
        >>> backbone.default_lora_layer_names()
        ['query', 'value']
        >>> backbone.enable_lora(2)  # 3 attentions, 2 projections, 2 adapters
        >>> len(backbone.trainable_weights)
        12
        """
        return list(lora.QUERY_AND_VALUE)

    def embed(self, token_ids, embedding, start_index=0):
        """Embeds ids: `embedding(ids) * sqrt(d_model) + positions`, dropout.

        Args:
            token_ids: int tensor `(batch, T)`.
            embedding: `source_embedding` or `target_embedding`.
            start_index: int or int scalar tensor. Position of the first id
                (for one cached decoding step). Defaults to `0`.

        Returns:
            Tensor `(batch, T, hidden_dim)`.

        Example:
        >>> import numpy as np
        >>> backbone = TransformerBackbone(
        ...     20, num_layers=1, hidden_dim=8, intermediate_dim=16, num_heads=2)
        >>> x = backbone.embed(np.array([[4, 5]]), backbone.target_embedding)
        >>> tuple(x.shape)
        (1, 2, 8)
        """
        return transformer_stacks.embed(
            token_ids,
            embedding,
            self.position_encoding,
            self.embedding_dropout,
            start_index,
        )

    def call_encoder(self, encoder_token_ids):
        """Runs the encoder stack on source ids.

        Args:
            encoder_token_ids: int tensor `(batch, S)`; id 0 is padding.

        Returns:
            `(encoder_sequence_output, encoder_padding_mask)`: the encoder
            output `(batch, S, hidden_dim)` and the boolean mask `(batch, S)`
            (`True` on real tokens).

        Example:
        >>> import numpy as np
        >>> backbone = TransformerBackbone(
        ...     20, num_layers=1, hidden_dim=8, intermediate_dim=16, num_heads=2)
        >>> output, mask = backbone.call_encoder(np.array([[5, 6, 3, 0]]))
        >>> tuple(output.shape), mask.numpy().tolist()
        ((1, 4, 8), [[True, True, True, False]])
        """
        encoder_token_ids = ops.convert_to_tensor(encoder_token_ids, "int32")
        mask = ops.not_equal(encoder_token_ids, PAD_ID)
        x = self.embed(encoder_token_ids, self.source_embedding)
        x = transformer_stacks.run_encoder(
            self.encoder_blocks, self.encoder_norm, x, padding_mask=mask
        )
        return x, mask

    def call_decoder(
        self,
        decoder_token_ids,
        encoder_sequence_output,
        encoder_padding_mask,
        return_attention_scores=False,
    ):
        """Runs the decoder stack over a whole (teacher-forced) target prefix.

        Args:
            decoder_token_ids: int tensor `(batch, T)`.
            encoder_sequence_output: tensor `(batch, S, hidden_dim)`.
            encoder_padding_mask: boolean tensor `(batch, S)`.
            return_attention_scores: bool. Also return the last decoder
                layer's cross-attention weights `(batch, num_heads, T, S)`.
                Defaults to `False`.

        Returns:
            The decoder output `(batch, T, hidden_dim)`, and the weights when
            asked.

        Example:
        >>> import numpy as np
        >>> backbone = TransformerBackbone(
        ...     20, num_layers=1, hidden_dim=8, intermediate_dim=16, num_heads=2)
        >>> memory, mask = backbone.call_encoder(np.array([[5, 6, 3, 0]]))
        >>> x, weights = backbone.call_decoder(
        ...     np.array([[2, 7, 8]]), memory, mask, return_attention_scores=True)
        >>> tuple(x.shape), tuple(weights.shape)
        ((1, 3, 8), (1, 2, 3, 4))
        """
        return transformer_stacks.run_decoder(
            self.decoder_blocks,
            self.decoder_norm,
            self.embed(decoder_token_ids, self.target_embedding),
            encoder_sequence_output,
            encoder_padding_mask,
            return_attention_scores,
        )


def _check_arguments(vocabulary_size, num_layers, target_vocabulary_size):
    """Raises a `ValueError` naming the first bad vocabulary size or depth.

    The sizes of the stacks are checked by `TransformerStacks`.
    """
    positive_int("vocabulary_size", vocabulary_size)
    positive_int("num_layers", num_layers)
    if target_vocabulary_size is not None:
        positive_int("target_vocabulary_size", target_vocabulary_size)
