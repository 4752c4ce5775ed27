"""`Seq2SeqBackbone`: the RNN encoder-decoder with attention, without its head."""

import keras
from keras import ops

from keras_attention.layers import AttentionDecoder, AttentionDecoderCell
from zoo.base import lora
from zoo.base import parameter_budget as budget
from zoo.base.backbone import Backbone, dropout_rate, positive_int

RNN_LAYERS = {"lstm": keras.layers.LSTM, "gru": keras.layers.GRU}


def _check_sizes(cell, **sizes):
    """Refuses a size over its limit (`positive_int`) or an unknown `cell`."""
    for name, value in sizes.items():
        positive_int(name, value)
    if cell not in RNN_LAYERS:
        raise ValueError(f"`cell` must be 'lstm' or 'gru'. Received: cell={cell!r}")


@keras.saving.register_keras_serializable(package="zoo")
class Maxout(keras.layers.Layer):
    """Maxout units: `max_j (x W_j + b_j)` over `pool_size` linear pieces.

    Bahdanau et al.'s deep output layer. Unlike `tanh` it never saturates:
    with a large target vocabulary a `tanh` readout was pushed into
    saturation within a few dozen steps (its gradient became exactly zero
    and training stalled at the unigram distribution).

    Args:
        units: int. Output size.
        pool_size: int. Linear pieces per unit. Defaults to `2`.
        **kwargs: base layer arguments.

    Call arguments:
        inputs: tensor `(..., input_dim)`.

    Returns:
        Tensor `(..., units)`.

    Example:
    >>> import numpy as np
    >>> tuple(Maxout(4)(np.ones((2, 3))).shape)
    (2, 4)

    Reference:
        Goodfellow et al., 2013, "Maxout Networks"; Bahdanau et al., 2014,
        appendix A.2.2.
    """

    def __init__(self, units, pool_size=2, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.pool_size = pool_size
        self.supports_masking = True

    def build(self, inputs_shape):
        self.dense = keras.layers.Dense(
            self.units * self.pool_size, dtype=self.dtype_policy, name="pieces"
        )
        self.dense.build(inputs_shape)

    def call(self, inputs):
        pieces = self.dense(inputs)
        shape = ops.shape(pieces)
        pieces = ops.reshape(pieces, (*shape[:-1], self.units, self.pool_size))
        return ops.max(pieces, axis=-1)

    def compute_output_shape(self, inputs_shape):
        return (*inputs_shape[:-1], self.units)

    def get_config(self):
        config = super().get_config()
        config.update(units=self.units, pool_size=self.pool_size)
        return config


@keras.saving.register_keras_serializable(package="zoo")
class Seq2SeqBackbone(Backbone):
    """Bahdanau/Luong RNN encoder-decoder: token ids in, decoder features out.

    The encoder embeds the source and runs `encoder_layers` (bi)LSTM/GRU
    layers; a `tanh` bridge maps its final state to the decoder's initial
    state. The decoder is a `keras.layers.RNN` over an
    `keras_attention.layers.AttentionDecoderCell` that attends over the
    encoder outputs (the memory) each step, Bahdanau- or Luong-style, with
    any alignment function; a maxout deep output layer reads the decoder
    state and the target embedding. A task (`zoo.Seq2Seq`) puts the
    vocabulary projection on top and decodes step by step with
    `encode_source` and `decode_step`.

    Args:
        source_vocabulary_size: int. Source vocabulary size.
        target_vocabulary_size: int. Target vocabulary size.
        embedding_dim: int. Defaults to `256`.
        units: int. RNN units (per direction in the encoder). Defaults to
            `256`.
        encoder_layers: int. Defaults to `1`.
        bidirectional: bool. Bidirectional encoder. Defaults to `True`.
        cell: str. `"lstm"` or `"gru"`. Defaults to `"lstm"`.
        style: str. `"bahdanau"` or `"luong"`. Defaults to `"bahdanau"`.
        score: alignment function (name, config or layer). Defaults to
            `"additive"`.
        window: int or None. Local attention half-width. Defaults to `None`.
        local: str. `"monotonic"` or `"predictive"`. Defaults to
            `"monotonic"`.
        dropout: float. Dropout on the embeddings. Defaults to `0.2`.
        dtype: optional dtype policy. Defaults to `None` (the global one).
        **kwargs: `keras.Model` arguments (e.g. `name`).

    Call arguments:
        inputs: dict of int tensors `encoder_token_ids` `(batch, S)` and
            `decoder_token_ids` `(batch, T)`; id 0 is padding.

    Returns:
        A dict: `encoder_sequence_output` `(batch, S, units * directions)`
        (the memory) and `decoder_sequence_output` `(batch, T,
        embedding_dim)` (the deep output, masked on target padding).

    Example:
    >>> import numpy as np
    >>> backbone = Seq2SeqBackbone(10, 12, embedding_dim=4, units=3)
    >>> ids = np.array([[4, 5, 3, 0]], "int32")
    >>> outputs = backbone({"encoder_token_ids": ids, "decoder_token_ids": ids})
    >>> tuple(outputs["encoder_sequence_output"].shape)
    (1, 4, 6)
    >>> tuple(outputs["decoder_sequence_output"].shape)
    (1, 4, 4)

    Reference:
        Bahdanau et al., 2014, "Neural Machine Translation by Jointly
        Learning to Align and Translate". Luong et al., 2015, "Effective
        Approaches to Attention-based Neural Machine Translation".
    """

    def __init__(
        self,
        source_vocabulary_size,
        target_vocabulary_size,
        embedding_dim=256,
        units=256,
        encoder_layers=1,
        bidirectional=True,
        cell="lstm",
        style="bahdanau",
        score="additive",
        window=None,
        local="monotonic",
        dropout=0.2,
        dtype=None,
        **kwargs,
    ):
        _check_sizes(
            source_vocabulary_size=source_vocabulary_size,
            target_vocabulary_size=target_vocabulary_size,
            embedding_dim=embedding_dim,
            units=units,
            encoder_layers=encoder_layers,
            cell=cell,
        )
        dropout_rate("dropout", dropout)
        if isinstance(score, keras.layers.Layer):
            score = keras.saving.serialize_keras_object(score)
        num_states = 2 if cell == "lstm" else 1

        # === Layers ===
        self.source_embedding = keras.layers.Embedding(
            source_vocabulary_size,
            embedding_dim,
            mask_zero=True,
            dtype=dtype,
            name="source_embedding",
        )
        self.target_embedding = keras.layers.Embedding(
            target_vocabulary_size,
            embedding_dim,
            mask_zero=True,
            dtype=dtype,
            name="target_embedding",
        )
        self.encoders = []
        for i in range(encoder_layers):
            rnn = RNN_LAYERS[cell](
                units,
                return_sequences=True,
                return_state=True,
                dtype=dtype,
                name=f"encoder_{cell}_{i}",
            )
            if bidirectional:
                rnn = keras.layers.Bidirectional(rnn, dtype=dtype, name=f"encoder_{i}")
            self.encoders.append(rnn)
        self.bridges = [
            keras.layers.Dense(
                units, activation="tanh", dtype=dtype, name=f"bridge_{i}"
            )
            for i in range(num_states)
        ]
        self.decoder_cell = AttentionDecoderCell(
            units,
            memory_dim=units * (2 if bidirectional else 1),
            cell=cell,
            style=style,
            score=score,
            window=window,
            local=local,
            dtype=dtype,
            name="decoder_cell",
        )
        self.decoder = AttentionDecoder(self.decoder_cell, dtype=dtype, name="decoder")
        self.embedding_dropout = keras.layers.Dropout(dropout, name="embedding_dropout")
        # A layer, not `ops.concatenate`: it keeps the target padding mask
        # on the output, so Keras losses average over real tokens only.
        self.readout = keras.layers.Concatenate(name="readout")
        self.deep_output = Maxout(embedding_dim, dtype=dtype, name="deep_output")

        # === Functional graph ===
        encoder_ids = keras.Input((None,), dtype="int32", name="encoder_token_ids")
        decoder_ids = keras.Input((None,), dtype="int32", name="decoder_token_ids")
        self.bidirectional = bidirectional
        memory, memory_mask, cell_states = self.encode_source(encoder_ids)
        x = self.embedding_dropout(self.target_embedding(decoder_ids))
        # AttentionDecoder builds the cell's state (memory, projected keys)
        # inside its call, so the score's key weights train.
        hidden = self.decoder(
            x, memory, memory_mask=memory_mask, initial_state=cell_states
        )
        readout = self.deep_output(self.readout([hidden, x]))
        super().__init__(
            inputs={"encoder_token_ids": encoder_ids, "decoder_token_ids": decoder_ids},
            outputs={
                "encoder_sequence_output": memory,
                "decoder_sequence_output": readout,
            },
            dtype=dtype,
            **kwargs,
        )

        # === Config ===
        self.source_vocabulary_size = source_vocabulary_size
        self.target_vocabulary_size = target_vocabulary_size
        self.embedding_dim = embedding_dim
        self.units = units
        self.encoder_layers = encoder_layers
        self.bidirectional = bidirectional
        self.cell = cell
        self.style = style
        self.score = score
        self.window = window
        self.local = local
        self.dropout = dropout

    @classmethod
    def parameter_count(
        cls,
        source_vocabulary_size,
        target_vocabulary_size,
        embedding_dim,
        units,
        encoder_layers,
        bidirectional,
        cell,
        style,
        score,
        window,
        local,
        **arguments,
    ):
        """The parameters `Seq2SeqBackbone(...)` would create, counted unbuilt.

        Exact but for the alignment function, bounded by
        `zoo.base.parameter_budget.score_parameters`; see `Backbone.parameter_count`.

        Example:
        >>> from zoo.base.constructor_arguments import ArgumentsOf
        >>> config = {"source_vocabulary_size": 10, "target_vocabulary_size": 12,
        ...           "embedding_dim": 4, "units": 3, "bidirectional": False,
        ...           "style": "luong", "score": "dot"}
        >>> count = Seq2SeqBackbone.parameter_count(
        ...     **ArgumentsOf(Seq2SeqBackbone).values(config))
        >>> count == Seq2SeqBackbone(**config).count_params()
        True
        >>> config["score"] = "general"  # Bounded: (3 + 3 + 2) * 3, for 3 * 3.
        >>> Seq2SeqBackbone.parameter_count(
        ...     **ArgumentsOf(Seq2SeqBackbone).values(config)
        ... ) - Seq2SeqBackbone(**config).count_params()
        15
        """
        _check_sizes(
            source_vocabulary_size=source_vocabulary_size,
            target_vocabulary_size=target_vocabulary_size,
            embedding_dim=embedding_dim,
            units=units,
            encoder_layers=encoder_layers,
            cell=cell,
        )
        directions = 2 if bidirectional else 1
        memory_dim = units * directions
        count = (source_vocabulary_size + target_vocabulary_size) * embedding_dim
        inputs = embedding_dim
        for _ in range(encoder_layers):
            count += directions * budget.recurrent_cell(cell, inputs, units)
            inputs = memory_dim
        num_states = 2 if cell == "lstm" else 1
        count += num_states * budget.dense(memory_dim, units)  # The bridges.
        # The decoder cell: Bahdanau's reads the context, Luong's (input
        # feeding) its attentional hidden state, which `combine` makes.
        if style == "bahdanau":
            count += budget.recurrent_cell(cell, embedding_dim + memory_dim, units)
            output_dim = units + memory_dim
        else:
            count += budget.recurrent_cell(cell, embedding_dim + units, units)
            count += budget.dense(memory_dim + units, units, use_bias=False)
            output_dim = units
        count += budget.score_parameters(score, units, memory_dim)
        if window is not None and local == "predictive":
            count += budget.dense(units, units, use_bias=False) + units
        deep_output = budget.dense(output_dim + embedding_dim, 2 * embedding_dim)
        return count + deep_output

    def default_lora_layer_names(self):
        """LoRA's targets: the decoder's recurrent cell and attention, the rest.

        The decoder cell's kernel and recurrent kernel, the `Additive`
        score's `W_a`/`U_a` (`keras_attention.lora`), the bridges, Luong's
        attentional layer and the deep output. The encoder's cells live
        inside Keras's `LSTM`/`GRU` layers, which have no LoRA.

        Example:
        >>> backbone = Seq2SeqBackbone(10, 12, embedding_dim=4, units=3)
        >>> backbone.default_lora_layer_names()
        ['bridge_0', 'bridge_1', 'score', 'lstm', 'pieces']
        """
        return lora.adaptable_names(
            self,
            lambda layer: (
                layer.name.startswith("bridge_")
                or layer.name in ("attentional_hidden", "pieces", "score", self.cell)
            ),
        )

    def encode_source(self, encoder_token_ids):
        """Runs the encoder: `(memory, memory_mask, decoder initial states)`.

        Args:
            encoder_token_ids: int tensor `(batch, S)`, 0 = padding.

        Returns:
            The memory `(batch, S, units * directions)`, its boolean mask
            `(batch, S)` and the bridged decoder states (a list).

        Example:
        >>> import numpy as np
        >>> backbone = Seq2SeqBackbone(10, 12, embedding_dim=4, units=3)
        >>> ids = np.array([[4, 5, 3, 0]], "int32")
        >>> memory, mask, states = backbone.encode_source(ids)
        >>> tuple(memory.shape), [tuple(s.shape) for s in states]  # LSTM: h, c
        ((1, 4, 6), [(1, 3), (1, 3)])
        >>> ops.convert_to_numpy(mask).tolist()
        [[True, True, True, False]]
        """
        memory_mask = ops.not_equal(encoder_token_ids, 0)
        x = self.embedding_dropout(self.source_embedding(encoder_token_ids))
        final = None
        for rnn in self.encoders:
            x, *final = rnn(x)
        if self.bidirectional:
            # Forward states then backward states, each [h, (c)].
            num_states = len(self.bridges)
            forward, backward = final[:num_states], final[num_states:]
            final = [ops.concatenate([f, b], -1) for f, b in zip(forward, backward)]
        states = [bridge(s) for bridge, s in zip(self.bridges, final)]
        return x, memory_mask, states

    def initial_cache(self, encoder_token_ids):
        """The decoder cell's initial state list for step-by-step decoding.

        Args:
            encoder_token_ids: int tensor `(batch, S)`, 0 = padding.

        Returns:
            A list of 2-D tensors named by `decoder_cell.state_names` (the
            previous output, the RNN states, the flattened memory and keys,
            the memory mask, the step, the attention weights and their
            running sum): `decode_step`'s `cache`.

        Example:
        >>> import numpy as np
        >>> backbone = Seq2SeqBackbone(10, 12, embedding_dim=4, units=3, cell="gru")
        >>> cache = backbone.initial_cache(np.array([[4, 5, 3, 0]], "int32"))
        >>> backbone.decoder_cell.state_names
        ('output', 'h', 'memory', 'keys', 'memory_mask', 'step', 'weights', 'coverage')
        >>> len(cache), tuple(cache[1].shape)  # h: (batch, units)
        (8, (1, 3))
        """
        memory, mask, states = self.encode_source(encoder_token_ids)
        return self.decoder_cell.initial_state(memory, mask, states)

    def decode_step(self, token_ids, cache):
        """One decoder step: `(features (batch, embedding_dim), attention, cache)`.

        Args:
            token_ids: int tensor `(batch,)`, the previous target tokens.
            cache: the decoder cell's state list (`initial_cache`).

        Returns:
            The deep output of the step, its attention weights over the
            source `(batch, S)` and the new cache.

        Example:
        >>> import numpy as np
        >>> backbone = Seq2SeqBackbone(10, 12, embedding_dim=4, units=3)
        >>> cache = backbone.initial_cache(np.array([[4, 5, 3, 0]], "int32"))
        >>> features, attention, cache = backbone.decode_step(
        ...     np.array([2], "int32"), cache)  # [START]
        >>> attention = ops.convert_to_numpy(attention)
        >>> tuple(features.shape), attention.shape, float(attention[0, 3])  # pad: 0
        ((1, 4), (1, 4), 0.0)
        >>> bool(np.allclose(attention.sum(-1), 1.0))
        True
        """
        x = self.target_embedding(token_ids)
        hidden, cache = self.decoder_cell(x, list(cache))
        readout = self.deep_output(ops.concatenate([hidden, x], axis=-1))
        return readout, self.decoder_cell.attention_weights(cache), cache
