"""`Transformer`: the encoder-decoder of Vaswani et al. (2017) for translation."""

import math

import keras
import numpy as np
import tensorflow as tf
from keras import ops
from keras.src.backend import set_keras_mask

from keras_attention.layers import (
    SinusoidalPositionEncoding,
    TransformerDecoderBlock,
    TransformerEncoderBlock,
)
from zoo.generation import as_texts, decoding_options, make_search
from zoo.seq2seq.preprocessor import TranslationPreprocessor
from zoo.task import Task
from zoo.transformer import configs

PAD_ID = 0


@keras.saving.register_keras_serializable(package="zoo")
class Transformer(Task):
    """Encoder-decoder Transformer with cached incremental decoding.

    Token ids are embedded (one table shared by source and target when the
    vocabulary is shared), scaled by `sqrt(hidden_dim)`, summed with the
    sinusoidal position encoding and dropped out; `num_layers`
    `keras_attention.layers.TransformerEncoderBlock`s encode the source and
    `num_layers` `TransformerDecoderBlock`s (causal self-attention,
    cross-attention, feed-forward) decode the target. The pre-softmax
    projection is the transposed target embedding (`tie_embeddings=True`).
    Post-norm blocks as in the paper, or pre-norm (`normalize_first=True`,
    with a final layer normalisation after each stack). Any alignment
    function of `keras_attention.scores` can replace the scaled dot product
    in every head (`score=`).

    Inputs are `encoder_token_ids` and `decoder_token_ids` (id 0 is padding:
    padded source positions are hidden from the attention; target padding
    only ever follows the real tokens, so the causal mask hides it); the
    output is the next-token logits `(batch, T, vocabulary)`. Trains through
    `fit` on raw `(source, target)` string pairs with a
    `zoo.TranslationPreprocessor` (the same vocabulary for both sides when
    it is shared), and translates with `keras_attention.decoding`: the
    encoder output and the cross-attention keys/values of every decoder
    layer are computed once, and each step runs the decoder on the new
    token only, against a self-attention key/value cache.

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
            pre-softmax weights. Defaults to `True`.
        target_vocabulary_size: int or None. A separate target vocabulary
            (and embedding table); `None` shares the source's. Defaults to
            `None`.
        max_wavelength: float. Of the sinusoidal encoding. Defaults to
            `10000`.
        layer_norm_epsilon: float. Defaults to `1e-6`.
        preprocessor: optional `zoo.TranslationPreprocessor`.
        **kwargs: `keras.Model` arguments (e.g. `name`, `dtype`).

    Example:
    >>> model = Transformer.from_name("tiny", vocabulary_size=100)
    >>> ids = np.array([[5, 6, 3, 0]])
    >>> tuple(model({"encoder_token_ids": ids, "decoder_token_ids": ids}).shape)
    (1, 4, 100)

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
        preprocessor=None,
        dtype=None,
        **kwargs,
    ):
        for name, value in (
            ("vocabulary_size", vocabulary_size),
            ("num_layers", num_layers),
            ("hidden_dim", hidden_dim),
            ("intermediate_dim", intermediate_dim),
            ("num_heads", num_heads),
        ):
            _check_positive_int(name, value)
        if target_vocabulary_size is not None:
            _check_positive_int("target_vocabulary_size", target_vocabulary_size)
        if hidden_dim % num_heads:
            raise ValueError(
                "`hidden_dim` must be divisible by `num_heads`. Received: "
                f"hidden_dim={hidden_dim}, num_heads={num_heads}"
            )
        if not isinstance(dropout, (int, float)) or not 0 <= dropout < 1:
            raise ValueError(
                f"`dropout` must be a float in [0, 1). Received: dropout={dropout!r}"
            )
        if isinstance(score, keras.layers.Layer):
            score = keras.saving.serialize_keras_object(score)
        shared = target_vocabulary_size is None

        # === Layers ===
        def embedding(size, name, tie):
            return keras.layers.ReversibleEmbedding(
                size,
                hidden_dim,
                tie_weights=tie,
                embeddings_initializer=keras.initializers.RandomNormal(
                    stddev=hidden_dim**-0.5
                ),
                dtype=dtype,
                name=name,
            )

        target_embedding = embedding(
            vocabulary_size if shared else target_vocabulary_size,
            "token_embedding" if shared else "target_embedding",
            tie_embeddings,
        )
        source_embedding = (
            target_embedding
            if shared
            else embedding(vocabulary_size, "source_embedding", True)
        )
        position_encoding = SinusoidalPositionEncoding(
            max_wavelength, dtype=dtype, name="position_encoding"
        )
        embedding_dropout = keras.layers.Dropout(
            dropout, dtype=dtype, name="embedding_dropout"
        )
        block_args = dict(
            intermediate_dim=intermediate_dim,
            num_heads=num_heads,
            dropout=dropout,
            normalize_first=normalize_first,
            layer_norm_epsilon=layer_norm_epsilon,
            score=score,
            dtype=dtype,
        )
        encoder_blocks = [
            TransformerEncoderBlock(**block_args, name=f"encoder_block_{i}")
            for i in range(num_layers)
        ]
        decoder_blocks = [
            TransformerDecoderBlock(**block_args, name=f"decoder_block_{i}")
            for i in range(num_layers)
        ]
        encoder_norm = decoder_norm = None
        if normalize_first:
            encoder_norm, decoder_norm = (
                keras.layers.LayerNormalization(
                    epsilon=layer_norm_epsilon, dtype=dtype, name=name
                )
                for name in ("encoder_output_norm", "decoder_output_norm")
            )

        self.hidden_dim = hidden_dim
        self.source_embedding = source_embedding
        self.target_embedding = target_embedding
        self.position_encoding = position_encoding
        self.embedding_dropout = embedding_dropout
        self.encoder_blocks = encoder_blocks
        self.decoder_blocks = decoder_blocks
        self.encoder_norm = encoder_norm
        self.decoder_norm = decoder_norm

        # === Functional graph ===
        encoder_ids = keras.Input((None,), dtype="int32", name="encoder_token_ids")
        decoder_ids = keras.Input((None,), dtype="int32", name="decoder_token_ids")
        memory, memory_mask = self._encode(encoder_ids)
        hidden = self._decode(decoder_ids, memory, memory_mask)
        logits = target_embedding(hidden, reverse=True)
        super().__init__(
            inputs={"encoder_token_ids": encoder_ids, "decoder_token_ids": decoder_ids},
            outputs=logits,
            dtype=dtype,
            **kwargs,
        )

        # === Config ===
        self.vocabulary_size = vocabulary_size
        self.num_layers = num_layers
        self.hidden_dim = hidden_dim
        self.intermediate_dim = intermediate_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.normalize_first = normalize_first
        self.score = score
        self.tie_embeddings = tie_embeddings
        self.target_vocabulary_size = target_vocabulary_size
        self.max_wavelength = max_wavelength
        self.layer_norm_epsilon = layer_norm_epsilon
        self.preprocessor = preprocessor
        self._generators = {}

    @classmethod
    def from_name(cls, name, vocabulary_size, **overrides):
        """Builds a named size (`tiny`, `small`, `base`, `big`) with overrides.

        Example:
        >>> Transformer.from_name("base", vocabulary_size=8000).num_layers
        6
        """
        return cls(vocabulary_size=vocabulary_size, **configs.get(name, **overrides))

    # === Building blocks, shared by the graph, `next` and the alignments ===

    def _embed(self, ids, embedding, start_index=0):
        x = embedding(ids)
        x = ops.multiply(x, ops.cast(math.sqrt(self.hidden_dim), x.dtype))
        x = x + self.position_encoding(x, start_index=start_index)
        return self.embedding_dropout(x)

    def _encode(self, encoder_token_ids):
        """Source ids -> `(memory, memory_mask)`."""
        mask = ops.not_equal(encoder_token_ids, PAD_ID)
        x = self._embed(encoder_token_ids, self.source_embedding)
        for block in self.encoder_blocks:
            x = block(x, padding_mask=mask)
        if self.encoder_norm is not None:
            x = self.encoder_norm(x)
        return x, mask

    def _decode(self, decoder_token_ids, memory, memory_mask, return_attention=False):
        """Teacher-forced decoder over the whole target prefix."""
        x = self._embed(decoder_token_ids, self.target_embedding)
        weights = None
        last = len(self.decoder_blocks) - 1
        for i, block in enumerate(self.decoder_blocks):
            outputs = block(
                x,
                memory,
                encoder_padding_mask=memory_mask,
                return_attention_scores=return_attention and i == last,
            )
            x, weights = outputs if return_attention and i == last else (outputs, None)
        if self.decoder_norm is not None:
            x = self.decoder_norm(x)
        return (x, weights) if return_attention else x

    # === Incremental decoding ===

    def compute_loss(
        self, x=None, y=None, y_pred=None, sample_weight=None, training=True
    ):
        """The compiled loss over real target tokens only.

        The label mask (`y != 0`) is put on the logits so that Keras and
        `Task.compute_loss` count real tokens, not sentences: under
        `tf.distribute` the loss is then the mean over every real target
        token of the global batch, as on one device.
        """
        if y is not None and y_pred is not None:
            set_keras_mask(y_pred, ops.not_equal(y, PAD_ID))
        return super().compute_loss(x, y, y_pred, sample_weight, training=training)

    def encode(self, encoder_token_ids, max_length):
        """Encodes the source once; returns the decoding cache of `next`.

        Args:
            encoder_token_ids: int tensor `(batch, S)`.
            max_length: int. Length of the prompt that will be decoded (the
                self-attention cache size).

        Returns:
            A dict: `self` (a self-attention cache per decoder layer, zeros
            `(batch, 2, max_length, num_heads, head_dim)`), `cross` (the
            projected encoder keys/values per layer, `(batch, 2, S,
            num_heads, head_dim)`) and `memory_mask` `(batch, S)`.
        """
        encoder_token_ids = ops.convert_to_tensor(encoder_token_ids, "int32")
        memory, mask = self._encode(encoder_token_ids)
        batch = ops.shape(encoder_token_ids)[0]
        head_dim = self.hidden_dim // self.num_heads
        shape = (batch, 2, max_length, self.num_heads, head_dim)
        return {
            "self": tuple(
                ops.zeros(shape, self.compute_dtype) for _ in self.decoder_blocks
            ),
            "cross": tuple(
                block.compute_cross_attention_cache(memory)
                for block in self.decoder_blocks
            ),
            "memory_mask": mask,
        }

    def next(self, prompt, cache, index):
        """One cached decoding step: `(logits, hidden, cache)`.

        Reads the token at `index - 1` of `prompt`, runs the decoder on it
        alone (its keys/values join the self-attention caches at
        `index - 1`; the cross-attention caches are read, never recomputed)
        and returns the `(batch, vocabulary)` logits of position `index`,
        the decoder output `(batch, hidden_dim)` and the new cache.
        """
        start = index - 1
        token = ops.expand_dims(ops.take(prompt, start, axis=1), 1)
        x = self._embed(token, self.target_embedding, start_index=start)
        self_caches = []
        for block, self_cache, cross_cache in zip(
            self.decoder_blocks, cache["self"], cache["cross"]
        ):
            # The encoder sequence argument is ignored when the
            # cross-attention cache is given (it holds the projections).
            x, self_cache, _ = block(
                x,
                x,
                encoder_padding_mask=cache["memory_mask"],
                self_attention_cache=self_cache,
                self_attention_cache_update_index=start,
                cross_attention_cache=cross_cache,
            )
            self_caches.append(self_cache)
        if self.decoder_norm is not None:
            x = self.decoder_norm(x)
        logits = self.target_embedding(x, reverse=True)[:, 0]
        cache = {**cache, "self": tuple(self_caches)}
        return logits, x[:, 0], cache

    def encode_uncached(self, encoder_token_ids):
        """The cache of `next_uncached`: the encoder output and its mask."""
        memory, mask = self._encode(ops.convert_to_tensor(encoder_token_ids, "int32"))
        return {"memory": memory, "memory_mask": mask}

    def next_uncached(self, prompt, cache, index):
        """`next` without a key/value cache: re-runs the whole prefix.

        Decodes `prompt[:, :index]` from scratch each step (as the keras.io
        recipe does); a reference for tests and benchmarks.
        """
        prefix = prompt[:, :index]
        hidden = self._decode(prefix, cache["memory"], cache["memory_mask"])[:, -1]
        return self.target_embedding(hidden, reverse=True), hidden, cache

    # === Translation ===

    def generate(self, encoder_token_ids, search, max_length):
        """Decodes source ids with a search; returns `(batch, max_length + 1)`.

        The loop runs inside one `tf.function` per search configuration
        (traced again only for new shapes).
        """
        key = (type(search).__name__, tuple(sorted(search.get_config().items())))
        if key not in self._generators:
            start = self.preprocessor.target_start_id
            stop = [self.preprocessor.target_end_id]
            pad = self.preprocessor.target_pad_id

            def run(ids, prompt):
                cache = self.encode(ids, ops.shape(prompt)[1])
                return search(
                    self.next,
                    prompt,
                    cache=cache,
                    index=1,
                    stop_token_ids=stop,
                    pad_token_id=pad,
                )

            self._generators[key] = (tf.function(run, reduce_retracing=True), start)
        run, start = self._generators[key]
        batch = ops.shape(encoder_token_ids)[0]
        prompt = np.zeros((batch, max_length + 1), "int32")
        prompt[:, 0] = start
        return ops.convert_to_numpy(run(encoder_token_ids, tf.constant(prompt)))

    def translate(
        self,
        texts,
        beam_width=4,
        length_penalty=0.6,
        max_length=None,
        batch_size=64,
        return_attention=False,
    ):
        """Translates source sentences.

        Sentences are decoded in batches of similar source length.

        Args:
            texts: str or list of str.
            beam_width: int. `1` (or `None`) decodes greedily. Defaults to 4.
            length_penalty: float. GNMT length penalty alpha. Defaults to 0.6.
            max_length: int. Longest output in subwords; defaults to the
                preprocessor's target length.
            batch_size: int. Sentences decoded together. Defaults to 64.
            return_attention: bool. Also return, per sentence, a dict with
                the last decoder layer's cross-attention: `head_weights`
                `(num_heads, target, source)`, their mean over the heads
                `weights` `(target, source)` (the alignment matrix of
                `Seq2Seq.translate`), and the `source_tokens` /
                `target_tokens` labels.

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
        search = make_search(beam_width, length_penalty=length_penalty)
        ids = [
            row[row != PAD_ID]
            for row in ops.convert_to_numpy(
                self.preprocessor(tf.constant(texts or [""]))["encoder_token_ids"]
            )
        ][: len(texts)]
        order = sorted(range(len(texts)), key=lambda i: len(ids[i]))
        outputs, alignments = [None] * len(texts), [None] * len(texts)
        for begin in range(0, len(order), batch_size):
            chunk = order[begin : begin + batch_size]
            width = max(len(ids[i]) for i in chunk)
            batch = np.zeros((len(chunk), width), "int32")
            for row, i in enumerate(chunk):
                batch[row, : len(ids[i])] = ids[i]
            tokens = self.generate(tf.constant(batch), search, max_length)
            texts_out = self.preprocessor.detokenize(tokens[:, 1:])
            found = self._alignments(batch, tokens) if return_attention else chunk
            for i, text, alignment in zip(chunk, texts_out, found):
                outputs[i], alignments[i] = text, alignment
        if single:
            outputs, alignments = outputs[0], alignments[0]
        return (outputs, alignments) if return_attention else outputs

    def _alignments(self, encoder_ids, tokens):
        """Cross-attention of the last decoder layer over chosen tokens."""
        memory, mask = self._encode(ops.convert_to_tensor(encoder_ids))
        _, weights = self._decode(
            ops.convert_to_tensor(tokens[:, :-1]), memory, mask, return_attention=True
        )
        weights = ops.convert_to_numpy(ops.cast(weights, "float32"))
        results = []
        for b in range(tokens.shape[0]):
            result = self.preprocessor.alignment(
                encoder_ids[b], tokens[b, 1:], weights[b]
            )
            heads = result.pop("weights")
            results.append(
                {"weights": heads.mean(axis=0), "head_weights": heads, **result}
            )
        return results

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "vocabulary_size": self.vocabulary_size,
            "num_layers": self.num_layers,
            "hidden_dim": self.hidden_dim,
            "intermediate_dim": self.intermediate_dim,
            "num_heads": self.num_heads,
            "dropout": self.dropout,
            "normalize_first": self.normalize_first,
            "score": self.score,
            "tie_embeddings": self.tie_embeddings,
            "target_vocabulary_size": self.target_vocabulary_size,
            "max_wavelength": self.max_wavelength,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "preprocessor": None
            if self.preprocessor is None
            else keras.saving.serialize_keras_object(self.preprocessor),
        }


def _check_positive_int(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"`{name}` must be a positive int. Received: {name}={value!r}")


__all__ = ["Transformer", "TranslationPreprocessor"]
