"""The embedding and block stacks that the zoo's Transformers share.

The two Transformer families, `zoo.transformer` (translation) and
`zoo.transformer_captioner` (captioning), build the same layers around
their own encoder input: token ids embedded by a
`keras.layers.ReversibleEmbedding` (its transpose is the output
projection), scaled by `sqrt(hidden_dim)`, plus the sinusoidal position
encoding, then dropout; stacks of `keras_attention.layers`
`TransformerEncoderBlock`s and `TransformerDecoderBlock`s; and, after
pre-norm stacks, a final layer normalisation each. `TransformerStacks`
checks their sizes, makes those layers under the names that the presets
store their weights under (`token_embedding`, `position_encoding`,
`embedding_dropout`, `encoder_block_{i}`, `decoder_block_{i}`,
`encoder_output_norm`, `decoder_output_norm`) and counts their weights
unbuilt; `embed`, `run_encoder` and `run_decoder` run them. A family's
backbone makes each layer where its functional graph needs it (the order
in which layers are made is the order in which a seeded model draws their
initial weights) and keeps its own inputs. Their cached decoding, one token
at a time, is `zoo.base.cached_decoder`.
"""

import math

import keras
from keras import ops

from keras_attention.layers import (
    SinusoidalPositionEncoding,
    TransformerDecoderBlock,
    TransformerEncoderBlock,
)
from zoo.base import parameter_budget as budget
from zoo.base.backbone import dropout_rate, positive_int


class TransformerStacks:
    """The sizes that a Transformer's stacks share; makes and counts their layers.

    Made in a backbone's `__init__` (to make the layers) and in its
    `parameter_count` (to count them), it checks the sizes alike in both.

    Args:
        hidden_dim: int. Model size `d_model`.
        intermediate_dim: int. Feed-forward size `d_ff`.
        num_heads: int. Attention heads; must divide `hidden_dim`.
        dropout: float in `[0, 1)`. On the embeddings, every residual branch
            and the attention weights.
        normalize_first: bool. Pre-norm blocks, with a final layer
            normalisation after each stack. Defaults to `False`.
        layer_norm_epsilon: float. Defaults to `1e-5`.
        score: str, dict or `keras_attention.scores.Score`. Alignment
            function of every head. Defaults to `"scaled_dot"`.
        num_key_value_heads: int or None. Key/value heads of every
            attention (grouped-query attention; must divide `num_heads`).
            Defaults to `None`: `num_heads`.
        dtype: optional dtype or `keras.DTypePolicy` of every layer. Defaults
            to `None` (the global policy).

    Raises:
        ValueError: naming the first bad size or rate and its value.

    Example:
    >>> stacks = TransformerStacks(8, 16, num_heads=2, dropout=0.1)
    >>> [block.name for block in stacks.decoder_blocks(2)]
    ['decoder_block_0', 'decoder_block_1']
    >>> TransformerStacks(10, 16, num_heads=4, dropout=0.1)
    Traceback (most recent call last):
    ...
    ValueError: `hidden_dim` must be divisible by `num_heads`. Received: hidden_dim=10, num_heads=4
    """

    def __init__(
        self,
        hidden_dim,
        intermediate_dim,
        num_heads,
        dropout,
        normalize_first=False,
        layer_norm_epsilon=1e-5,
        score="scaled_dot",
        dtype=None,
        num_key_value_heads=None,
    ):
        positive_int("hidden_dim", hidden_dim)
        positive_int("intermediate_dim", intermediate_dim)
        positive_int("num_heads", num_heads)
        if hidden_dim % num_heads:
            raise ValueError(
                "`hidden_dim` must be divisible by `num_heads`. Received: "
                f"hidden_dim={hidden_dim}, num_heads={num_heads}"
            )
        if num_key_value_heads is not None:
            positive_int("num_key_value_heads", num_key_value_heads)
            if num_heads % num_key_value_heads:
                raise ValueError(
                    "`num_heads` must be divisible by `num_key_value_heads`. "
                    f"Received: num_heads={num_heads}, "
                    f"num_key_value_heads={num_key_value_heads}"
                )
        dropout_rate("dropout", dropout)
        self.hidden_dim = hidden_dim
        self.intermediate_dim = intermediate_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.normalize_first = normalize_first
        self.layer_norm_epsilon = layer_norm_epsilon
        self.score = score
        self.dtype = dtype
        self.num_key_value_heads = num_key_value_heads

    def token_embedding(
        self, vocabulary_size, name="token_embedding", tie_weights=True
    ):
        """A `ReversibleEmbedding` of `hidden_dim`, normal with std `hidden_dim**-0.5`.

        Args:
            vocabulary_size: int. Rows of the table.
            name: str. The layer's name. Defaults to `"token_embedding"`.
            tie_weights: bool. Its transpose is the output projection (else
                it holds a separate one). Defaults to `True`.

        Example:
        >>> stacks = TransformerStacks(8, 16, num_heads=2, dropout=0.1)
        >>> embedding = stacks.token_embedding(20)
        >>> embedding.name, embedding.input_dim, embedding.output_dim
        ('token_embedding', 20, 8)
        """
        return keras.layers.ReversibleEmbedding(
            vocabulary_size,
            self.hidden_dim,
            tie_weights=tie_weights,
            embeddings_initializer=keras.initializers.RandomNormal(
                stddev=self.hidden_dim**-0.5
            ),
            dtype=self.dtype,
            name=name,
        )

    def position_encoding(self, max_wavelength=10000):
        """The `SinusoidalPositionEncoding` added to the embedded tokens.

        Example:
        >>> stacks = TransformerStacks(8, 16, num_heads=2, dropout=0.1)
        >>> stacks.position_encoding().name
        'position_encoding'
        """
        return SinusoidalPositionEncoding(
            max_wavelength, dtype=self.dtype, name="position_encoding"
        )

    def embedding_dropout(self):
        """The `Dropout` on the embedded tokens (positions added).

        Example:
        >>> stacks = TransformerStacks(8, 16, num_heads=2, dropout=0.1)
        >>> layer = stacks.embedding_dropout()
        >>> layer.name, layer.rate
        ('embedding_dropout', 0.1)
        """
        return keras.layers.Dropout(
            self.dropout, dtype=self.dtype, name="embedding_dropout"
        )

    def _block_arguments(self):
        return dict(
            intermediate_dim=self.intermediate_dim,
            num_heads=self.num_heads,
            dropout=self.dropout,
            normalize_first=self.normalize_first,
            layer_norm_epsilon=self.layer_norm_epsilon,
            score=self.score,
            dtype=self.dtype,
            num_key_value_heads=self.num_key_value_heads,
        )

    def encoder_blocks(self, num_layers):
        """`num_layers` `TransformerEncoderBlock`s, `encoder_block_{i}`.

        Example:
        >>> stacks = TransformerStacks(8, 16, num_heads=2, dropout=0.1)
        >>> [block.name for block in stacks.encoder_blocks(2)]
        ['encoder_block_0', 'encoder_block_1']
        """
        return [
            TransformerEncoderBlock(
                **self._block_arguments(), name=f"encoder_block_{i}"
            )
            for i in range(num_layers)
        ]

    def decoder_blocks(self, num_layers):
        """`num_layers` `TransformerDecoderBlock`s, `decoder_block_{i}`.

        Example:
        >>> stacks = TransformerStacks(8, 16, num_heads=2, dropout=0.1)
        >>> stacks.decoder_blocks(1)[0].num_heads
        2
        """
        return [
            TransformerDecoderBlock(
                **self._block_arguments(), name=f"decoder_block_{i}"
            )
            for i in range(num_layers)
        ]

    def output_norm(self, name):
        """The final `LayerNormalization` of a pre-norm stack; `None` if post-norm.

        Args:
            name: str. `"encoder_output_norm"` or `"decoder_output_norm"`.

        Example:
        >>> TransformerStacks(8, 16, 2, 0.1).output_norm("decoder_output_norm")
        >>> stacks = TransformerStacks(8, 16, 2, 0.1, normalize_first=True)
        >>> stacks.output_norm("decoder_output_norm").name
        'decoder_output_norm'
        """
        if not self.normalize_first:
            return None
        return keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype, name=name
        )

    def parameters(self, encoder_layers, decoder_layers):
        """The weights of both stacks (and their output norms), counted unbuilt.

        Exact but for a parametrised alignment function, bounded by
        `zoo.base.parameter_budget.score_parameters`. The embeddings are
        not counted: a family counts its own tables.

        Args:
            encoder_layers: int. Encoder blocks.
            decoder_layers: int. Decoder blocks.

        Example:
        >>> import numpy as np
        >>> stacks = TransformerStacks(8, 16, 2, 0.0, normalize_first=True)
        >>> blocks = stacks.encoder_blocks(1) + stacks.decoder_blocks(2)
        >>> norms = [stacks.output_norm("a"), stacks.output_norm("b")]
        >>> x = np.zeros((1, 3, 8), "float32")
        >>> _ = [block(x) if i == 0 else block(x, x) for i, block in enumerate(blocks)]
        >>> _ = [norm.build((None, 8)) for norm in norms]
        >>> built = sum(layer.count_params() for layer in blocks + norms)
        >>> stacks.parameters(encoder_layers=1, decoder_layers=2) == built
        True
        """
        hidden_dim, head_dim = self.hidden_dim, self.hidden_dim // self.num_heads
        kv_dim = head_dim * (self.num_key_value_heads or self.num_heads)
        # Query, key, value and output projections (with biases) and a score.
        attention = 2 * budget.dense(hidden_dim, hidden_dim)
        attention += 2 * budget.dense(hidden_dim, kv_dim)
        attention += budget.score_parameters(self.score, head_dim, head_dim)
        feedforward = budget.dense(hidden_dim, self.intermediate_dim)
        feedforward += budget.dense(self.intermediate_dim, hidden_dim)
        norm = 2 * hidden_dim
        count = encoder_layers * (attention + feedforward + 2 * norm)
        count += decoder_layers * (2 * attention + feedforward + 3 * norm)
        if self.normalize_first:
            count += 2 * norm  # The stacks' output norms.
        return count


def embed(token_ids, embedding, position_encoding, dropout, start_index=0):
    """`dropout(embedding(token_ids) * sqrt(d_model) + position_encoding)`.

    What a Transformer backbone's `embed` computes with its own layers:
    `d_model` is `embedding.output_dim`, and the positions start at
    `start_index` (an int or int scalar tensor; a cached decoding step
    embeds one token at its position). Returns `(batch, T, d_model)`.

    Example:
    >>> import numpy as np
    >>> stacks = TransformerStacks(8, 16, num_heads=2, dropout=0.0)
    >>> embedding = stacks.token_embedding(20)
    >>> x = embed(np.array([[4, 5]]), embedding, stacks.position_encoding(),
    ...           stacks.embedding_dropout(), start_index=0)
    >>> table = ops.convert_to_numpy(embedding.embeddings)
    >>> bool(np.allclose(ops.convert_to_numpy(x)[0, 0, 0::2], table[4, 0::2] * 8**0.5))
    True
    """
    x = embedding(token_ids)
    x = ops.multiply(x, ops.cast(math.sqrt(embedding.output_dim), x.dtype))
    x = x + position_encoding(x, start_index=start_index)
    return dropout(x)


def run_encoder(blocks, norm, x, padding_mask=None):
    """Runs embedded inputs through the encoder blocks, then `norm` if any.

    Args:
        blocks: list of `TransformerEncoderBlock`s, in order.
        norm: the stack's output norm, or `None` (post-norm).
        x: tensor `(batch, S, d_model)`.
        padding_mask: optional bool `(batch, S)`, `True` on real positions.

    Returns:
        Tensor `(batch, S, d_model)`.

    Example:
    >>> import numpy as np
    >>> stacks = TransformerStacks(8, 16, num_heads=2, dropout=0.0)
    >>> x = np.ones((1, 3, 8), "float32")
    >>> tuple(run_encoder(stacks.encoder_blocks(2), None, x).shape)
    (1, 3, 8)
    """
    for block in blocks:
        x = block(x, padding_mask=padding_mask)
    return x if norm is None else norm(x)


def run_decoder(
    blocks,
    norm,
    x,
    encoder_sequence_output,
    encoder_padding_mask=None,
    return_attention_scores=False,
):
    """Runs embedded targets through the decoder blocks, then `norm` if any.

    Args:
        blocks: list of `TransformerDecoderBlock`s, in order.
        norm: the stack's output norm, or `None` (post-norm).
        x: tensor `(batch, T, d_model)`: the whole (teacher-forced) prefix.
        encoder_sequence_output: tensor `(batch, S, d_model)`.
        encoder_padding_mask: optional bool `(batch, S)`, `True` on real
            positions.
        return_attention_scores: bool. Also return the last block's
            cross-attention weights `(batch, num_heads, T, S)`. Defaults to
            `False`.

    Returns:
        The decoder output `(batch, T, d_model)`, and the weights when asked.

    Example:
    >>> import numpy as np
    >>> stacks = TransformerStacks(8, 16, 2, 0.0, normalize_first=True)
    >>> memory = np.ones((1, 4, 8), "float32")
    >>> x, weights = run_decoder(
    ...     stacks.decoder_blocks(2), stacks.output_norm("decoder_output_norm"),
    ...     np.ones((1, 3, 8), "float32"), memory, return_attention_scores=True)
    >>> tuple(x.shape), tuple(weights.shape)
    ((1, 3, 8), (1, 2, 3, 4))
    """
    weights = None
    last = blocks[-1]
    for block in blocks:
        if return_attention_scores and block is last:
            x, weights = block(
                x,
                encoder_sequence_output,
                encoder_padding_mask=encoder_padding_mask,
                return_attention_scores=True,
            )
        else:
            x = block(
                x, encoder_sequence_output, encoder_padding_mask=encoder_padding_mask
            )
    if norm is not None:
        x = norm(x)
    return (x, weights) if return_attention_scores else x
