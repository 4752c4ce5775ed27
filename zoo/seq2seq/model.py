"""`Seq2Seq`: RNN encoder-decoder with Bahdanau or Luong attention."""

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from keras_attention.layers import AttentionDecoder, AttentionDecoderCell
from zoo.generation import as_texts, decoding_options, make_search
from zoo.seq2seq.preprocessor import TranslationPreprocessor
from zoo.task import Task

RNN_LAYERS = {"lstm": keras.layers.LSTM, "gru": keras.layers.GRU}


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
class Seq2Seq(Task):
    """Attention-based RNN encoder-decoder for translation.

    The encoder embeds the source and runs `encoder_layers` (bi)LSTM/GRU
    layers; a `tanh` bridge maps its final state to the decoder's initial
    state. The decoder is a `keras.layers.RNN` over an
    `keras_attention.layers.AttentionDecoderCell` that attends over the
    encoder outputs (the memory) each step, Bahdanau- or Luong-style, with
    any alignment function; a deep output layer (`tanh`) and a softmax
    projection give next-token logits. Trains with teacher forcing through
    `fit` on raw `(source, target)` string pairs (the preprocessor tokenizes
    inside `tf.data`), and translates with `keras_attention.decoding`.

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
        dropout: float. Dropout on embeddings and the deep output. Defaults
            to `0.2`.
        preprocessor: optional `TranslationPreprocessor`.
        **kwargs: `keras.Model` arguments (e.g. `name`).

    Example:
    >>> model = Seq2Seq.from_preset("seq2seq_bahdanau_bible_en_es")
    >>> model.translate(["Jesus wept."])
    ['Y Jesús lloró.']

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
        preprocessor=None,
        dtype=None,
        **kwargs,
    ):
        for name, value in (
            ("source_vocabulary_size", source_vocabulary_size),
            ("target_vocabulary_size", target_vocabulary_size),
            ("embedding_dim", embedding_dim),
            ("units", units),
            ("encoder_layers", encoder_layers),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(
                    f"`{name}` must be a positive int. Received: {name}={value!r}"
                )
        if cell not in RNN_LAYERS:
            raise ValueError(f"`cell` must be 'lstm' or 'gru'. Received: cell={cell!r}")
        if not isinstance(dropout, (int, float)) or not 0 <= dropout < 1:
            raise ValueError(
                f"`dropout` must be a float in [0, 1). Received: dropout={dropout!r}"
            )
        if isinstance(score, keras.layers.Layer):
            score = keras.saving.serialize_keras_object(score)
        num_states = 2 if cell == "lstm" else 1
        memory_dim = units * (2 if bidirectional else 1)

        # === Layers ===
        source_embedding = keras.layers.Embedding(
            source_vocabulary_size,
            embedding_dim,
            mask_zero=True,
            dtype=dtype,
            name="source_embedding",
        )
        target_embedding = keras.layers.Embedding(
            target_vocabulary_size,
            embedding_dim,
            mask_zero=True,
            dtype=dtype,
            name="target_embedding",
        )
        encoders = []
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
            encoders.append(rnn)
        bridges = [
            keras.layers.Dense(
                units, activation="tanh", dtype=dtype, name=f"bridge_{i}"
            )
            for i in range(num_states)
        ]
        decoder_cell = AttentionDecoderCell(
            units,
            memory_dim=memory_dim,
            cell=cell,
            style=style,
            score=score,
            window=window,
            local=local,
            dtype=dtype,
            name="decoder_cell",
        )
        decoder = AttentionDecoder(decoder_cell, dtype=dtype, name="decoder")
        embedding_dropout = keras.layers.Dropout(dropout, name="embedding_dropout")
        output_dropout = keras.layers.Dropout(dropout, name="output_dropout")
        deep_output = Maxout(embedding_dim, dtype=dtype, name="deep_output")
        projection = keras.layers.Dense(
            target_vocabulary_size, dtype=dtype, name="logits"
        )

        # === Functional graph ===
        encoder_ids = keras.Input((None,), dtype="int32", name="encoder_token_ids")
        decoder_ids = keras.Input((None,), dtype="int32", name="decoder_token_ids")
        memory, memory_mask, cell_states = self._encode(
            encoder_ids,
            source_embedding,
            embedding_dropout,
            encoders,
            bridges,
            cell,
            bidirectional,
        )
        x = embedding_dropout(target_embedding(decoder_ids))
        # AttentionDecoder builds the cell's state (memory, projected keys)
        # inside its call, so the score's key weights train.
        hidden = decoder(x, memory, memory_mask=memory_mask, initial_state=cell_states)
        # A layer, not `ops.concatenate`: it keeps the target padding mask on
        # the logits, so Keras losses average over real tokens only.
        readout = deep_output(keras.layers.Concatenate(name="readout")([hidden, x]))
        logits = projection(output_dropout(readout))
        super().__init__(
            inputs={"encoder_token_ids": encoder_ids, "decoder_token_ids": decoder_ids},
            outputs=logits,
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
        self.preprocessor = preprocessor
        self.source_embedding = source_embedding
        self.target_embedding = target_embedding
        self.encoders = encoders
        self.bridges = bridges
        self.decoder_cell = decoder_cell
        self.deep_output = deep_output
        self.projection = projection

    @staticmethod
    def _encode(ids, embedding, dropout, encoders, bridges, cell, bidirectional):
        """Runs the encoder: `(memory, memory_mask, decoder initial states)`."""
        memory_mask = ops.not_equal(ids, 0)
        x = dropout(embedding(ids))
        final = None
        for rnn in encoders:
            x, *final = rnn(x)
        num_states = len(bridges)
        if bidirectional:
            # Forward states then backward states, each [h, (c)].
            forward, backward = final[:num_states], final[num_states:]
            final = [ops.concatenate([f, b], -1) for f, b in zip(forward, backward)]
        states = [bridge(s) for bridge, s in zip(bridges, final)]
        return x, memory_mask, states

    def encode(self, encoder_token_ids):
        """Encodes source ids; returns the decoder's initial cache."""
        memory, mask, states = self._encode(
            encoder_token_ids,
            self.source_embedding,
            self.get_layer("embedding_dropout"),
            self.encoders,
            self.bridges,
            self.cell,
            self.bidirectional,
        )
        return self.decoder_cell.initial_state(memory, mask, states)

    def next(self, prompt, cache, index):
        """One decoding step: `(logits, attention weights, cache)`.

        Reads the token at `index - 1` of `prompt`, advances the decoder
        state held in `cache`, and returns the logits of the token at
        `index`, the step's attention over the source `(batch, Tv)` (used by
        the coverage penalty) and the new cache.
        """
        token = ops.take(prompt, index - 1, axis=1)
        x = self.target_embedding(token)
        hidden, cache = self.decoder_cell(x, list(cache))
        readout = self.deep_output(ops.concatenate([hidden, x], axis=-1))
        logits = self.projection(readout)
        return logits, self.decoder_cell.attention_weights(cache), cache

    def translate(
        self,
        texts,
        beam_width=4,
        max_length=None,
        length_penalty=0.6,
        coverage_penalty=0.0,
        batch_size=64,
        return_attention=False,
    ):
        """Translates source sentences.

        Args:
            texts: str or list of str.
            beam_width: int. `1` (or `None`) decodes greedily. Defaults to 4.
            max_length: int. Longest output in subwords; defaults to the
                preprocessor's target length.
            length_penalty: float. GNMT length penalty alpha. Defaults to 0.6.
            coverage_penalty: float. GNMT coverage penalty beta. Defaults to 0.
            batch_size: int. Sentences decoded together. Defaults to 64.
            return_attention: bool. Also return, per sentence, a dict with
                the alignment matrix `weights` `(target, source)` and the
                `source_tokens` / `target_tokens` labels.

        Returns:
            A list of strings (a string for a single input), and the
            alignments when asked.
        """
        if self.preprocessor is None:
            raise ValueError("translate() needs a preprocessor to read text.")
        texts, single = as_texts(texts)
        beam_width, max_length, batch_size = decoding_options(
            beam_width, max_length, batch_size, self.preprocessor.target_sequence_length
        )
        search = make_search(
            beam_width, length_penalty=length_penalty, coverage_penalty=coverage_penalty
        )
        outputs, alignments = [], []
        for start in range(0, len(texts), batch_size):
            chunk = texts[start : start + batch_size]
            ids = self.preprocessor(tf.constant(chunk))["encoder_token_ids"]
            tokens = self._generate(search, ids, max_length)
            outputs.extend(self.preprocessor.detokenize(tokens[:, 1:]))
            if return_attention:
                alignments.extend(self._alignments(ids, tokens))
        if single:
            outputs = outputs[0]
            alignments = alignments[0] if alignments else alignments
        return (outputs, alignments) if return_attention else outputs

    def _generate(self, search, encoder_ids, max_length):
        cache = self.encode(ops.convert_to_tensor(encoder_ids))
        batch = ops.shape(encoder_ids)[0]
        prompt = np.zeros((batch, max_length + 1), "int32")
        prompt[:, 0] = self.preprocessor.target_start_id
        tokens = search(
            self.next,
            ops.convert_to_tensor(prompt),
            cache=cache,
            index=1,
            stop_token_ids=[self.preprocessor.target_end_id],
            pad_token_id=self.preprocessor.target_pad_id,
        )
        return ops.convert_to_numpy(tokens)

    def _alignments(self, encoder_ids, tokens):
        """Re-runs the decoder on chosen tokens to collect attention rows."""
        cache = self.encode(ops.convert_to_tensor(encoder_ids))
        rows = []
        for t in range(1, tokens.shape[1]):
            _, weights, cache = self.next(ops.convert_to_tensor(tokens), cache, t)
            rows.append(ops.convert_to_numpy(weights))
        rows = np.stack(rows, axis=1)  # (batch, target, source)
        encoder_ids = ops.convert_to_numpy(encoder_ids)
        return [
            self.preprocessor.alignment(encoder_ids[b], tokens[b, 1:], rows[b])
            for b in range(tokens.shape[0])
        ]

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "source_vocabulary_size": self.source_vocabulary_size,
            "target_vocabulary_size": self.target_vocabulary_size,
            "embedding_dim": self.embedding_dim,
            "units": self.units,
            "encoder_layers": self.encoder_layers,
            "bidirectional": self.bidirectional,
            "cell": self.cell,
            "style": self.style,
            "score": self.score,
            "window": self.window,
            "local": self.local,
            "dropout": self.dropout,
            "preprocessor": None
            if self.preprocessor is None
            else keras.saving.serialize_keras_object(self.preprocessor),
        }


__all__ = ["Seq2Seq", "TranslationPreprocessor"]
