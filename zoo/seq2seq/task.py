"""`Seq2Seq`: the Bahdanau/Luong translation model (backbone + head + search)."""

import keras
from keras import ops

from zoo.seq2seq import legacy
from zoo.seq2seq.backbone import Seq2SeqBackbone
from zoo.translation import TranslationTask

BACKBONE_ARGUMENTS = (
    "source_vocabulary_size",
    "target_vocabulary_size",
    "embedding_dim",
    "units",
    "encoder_layers",
    "bidirectional",
    "cell",
    "style",
    "score",
    "window",
    "local",
    "dropout",
)


@keras.saving.register_keras_serializable(package="zoo")
class Seq2Seq(TranslationTask):
    """Attention-based RNN encoder-decoder for translation.

    A `Seq2SeqBackbone` (embeddings, (bi)RNN encoder, attention decoder,
    maxout deep output) with a dropout and a softmax projection on top that
    give next-token logits. Trains with teacher forcing through `fit` on
    raw `(source, target)` string pairs (the preprocessor tokenizes inside
    `tf.data`), and translates with `translate` (`zoo.translation.
    TranslationTask`): greedy or beam search from `keras_attention.decoding`
    with GNMT length and coverage penalties, and attention alignments.

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
        preprocessor: optional `zoo.translation.TranslationPreprocessor`.
        backbone: optional `Seq2SeqBackbone`; when given, the arguments
            above are read from it (leave them out). Defaults to `None`.
        dtype: optional dtype policy (e.g. `"mixed_bfloat16"`). Defaults to
            `None` (the global policy).
        **kwargs: `keras.Model` arguments (e.g. `name`).

    Call arguments:
        inputs: dict of int tensors `encoder_token_ids` `(batch, S)` and
            `decoder_token_ids` `(batch, T)`.

    Returns:
        Logits `(batch, T, target_vocabulary_size)`.

    Example:
    >>> model = Seq2Seq.from_preset("seq2seq_bahdanau_bible_en_es")
    >>> model.translate(["Jesus wept."])
    ['Y Jesús lloró.']
    >>> backbone = Seq2SeqBackbone(10, 12, embedding_dim=4, units=3, cell="gru")
    >>> Seq2Seq(backbone=backbone).count_params() > backbone.count_params()
    True

    Reference:
        Bahdanau et al., 2014, "Neural Machine Translation by Jointly
        Learning to Align and Translate". Luong et al., 2015, "Effective
        Approaches to Attention-based Neural Machine Translation".
    """

    def __init__(
        self,
        source_vocabulary_size=None,
        target_vocabulary_size=None,
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
        backbone=None,
        dtype=None,
        **kwargs,
    ):
        if backbone is None:
            backbone = Seq2SeqBackbone(
                source_vocabulary_size,
                target_vocabulary_size,
                embedding_dim=embedding_dim,
                units=units,
                encoder_layers=encoder_layers,
                bidirectional=bidirectional,
                cell=cell,
                style=style,
                score=score,
                window=window,
                local=local,
                dropout=dropout,
                dtype=dtype,
            )
        elif not isinstance(backbone, Seq2SeqBackbone):
            raise TypeError(
                "`backbone` must be a Seq2SeqBackbone. "
                f"Received: backbone={backbone!r:.80}"
            )
        if dtype is None:
            dtype = backbone.dtype_policy

        # === Layers ===
        self.backbone = backbone
        self.output_dropout = keras.layers.Dropout(
            backbone.dropout, name="output_dropout"
        )
        self.projection = keras.layers.Dense(
            backbone.target_vocabulary_size, dtype=dtype, name="logits"
        )

        # === Functional graph ===
        inputs = {
            name: keras.Input((None,), dtype="int32", name=name)
            for name in ("encoder_token_ids", "decoder_token_ids")
        }
        features = backbone(inputs)["decoder_sequence_output"]
        logits = self.projection(self.output_dropout(features))
        super().__init__(inputs=inputs, outputs=logits, dtype=dtype, **kwargs)
        if dtype is not None:
            # A functional `keras.Model` ignores `dtype`; the config keeps it.
            self.dtype_policy = keras.dtype_policies.get(dtype)

        # === Config ===
        for name in BACKBONE_ARGUMENTS:
            setattr(self, name, getattr(backbone, name))
        self.preprocessor = preprocessor

    def encode(self, inputs, max_length=None):
        """The decoder's initial cache for source ids `(batch, S)`.

        Args:
            inputs: int tensor `(batch, S)`, the `encoder_token_ids`.
            max_length: ignored (an RNN state does not grow).

        Returns:
            The attention decoder cell's state list.
        """
        return self.backbone.initial_cache(ops.convert_to_tensor(inputs, "int32"))

    def next(self, prompt, cache, index):
        """One decoding step: `(logits, attention weights, cache)`.

        Reads the token at `index - 1` of `prompt`, advances the decoder
        state held in `cache`, and returns the logits of the token at
        `index`, the step's attention over the source `(batch, S)` and the
        new cache.
        """
        token = ops.take(prompt, index - 1, axis=1)
        features, attention, cache = self.backbone.decode_step(token, cache)
        return self.projection(features), ops.cast(attention, "float32"), cache

    def load_weights(self, filepath, skip_mismatch=False, **kwargs):
        """Loads weights, from today's layout or a preset of the old one.

        Presets saved before the backbone existed store every layer at the
        top level of `model.weights.h5`; they are read into this model's
        layers through a view with that layout (`zoo.seq2seq.legacy`).
        """
        if legacy.is_legacy_weights(filepath):
            return legacy.load_legacy_weights(self, filepath)
        return super().load_weights(filepath, skip_mismatch=skip_mismatch, **kwargs)

    def get_config(self):
        config = {
            "name": self.name,
            "trainable": self.trainable,
            "dtype": keras.dtype_policies.serialize(self.dtype_policy),
        }
        config.update({name: getattr(self, name) for name in BACKBONE_ARGUMENTS})
        config["preprocessor"] = (
            None
            if self.preprocessor is None
            else keras.saving.serialize_keras_object(self.preprocessor)
        )
        return config
