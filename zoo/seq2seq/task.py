"""`Seq2Seq`: the Bahdanau/Luong translation model (backbone + head + search)."""

import keras
from keras import ops

from zoo.base import parameter_budget as budget
from zoo.base.constructor_arguments import ArgumentsOf
from zoo.seq2seq import legacy
from zoo.seq2seq.backbone import Seq2SeqBackbone
from zoo.translation import TranslationTask


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
        *args, **kwargs: the `Seq2SeqBackbone` arguments
            (`source_vocabulary_size`, `target_vocabulary_size`,
            `embedding_dim`, `units`, `encoder_layers`, `bidirectional`,
            `cell`, `style`, `score`, `window`, `local`, `dropout`, here also
            the dropout before the projection), in its order and with its
            defaults; they build the backbone and are read back as attributes
            (`model.units`). Left out, or agreeing with it, when `backbone`
            is given. Also `keras.Model`'s `name` and `trainable`; any other
            name raises a `TypeError`.
        backbone: optional `Seq2SeqBackbone` to build on. Defaults to `None`.
        preprocessor: optional `zoo.translation.TranslationPreprocessor`.
        dtype: optional dtype policy (e.g. `"mixed_bfloat16"`). Defaults to
            the backbone's (the global policy).

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

    backbone_arguments = ArgumentsOf(Seq2SeqBackbone)

    def __init__(self, *args, backbone=None, preprocessor=None, dtype=None, **kwargs):
        backbone = self.build_backbone(args, backbone, kwargs, dtype)

        # === Layers ===
        self.backbone = backbone
        self.output_dropout = keras.layers.Dropout(
            backbone.dropout, name="output_dropout"
        )
        self.projection = keras.layers.Dense(
            backbone.target_vocabulary_size, dtype=backbone.dtype_policy, name="logits"
        )

        # === Functional graph ===
        inputs = {
            name: keras.Input((None,), dtype="int32", name=name)
            for name in ("encoder_token_ids", "decoder_token_ids")
        }
        features = backbone(inputs)["decoder_sequence_output"]
        logits = self.projection(self.output_dropout(features))
        super().__init__(
            inputs=inputs,
            outputs=logits,
            backbone=backbone,
            preprocessor=preprocessor,
            dtype=dtype,
            **kwargs,
        )

    @classmethod
    def parameter_count(cls, config):
        """The backbone's parameters and the projection's (see `Task`).

        Example:
        >>> config = {"source_vocabulary_size": 10, "target_vocabulary_size": 12,
        ...           "embedding_dim": 4, "units": 3, "cell": "gru"}
        >>> # 6: the additive score's bound counts a bias it does not have.
        >>> Seq2Seq.parameter_count(config) - Seq2Seq(**config).count_params()
        6
        """
        count = super().parameter_count(config)
        arguments = cls.backbone_arguments.values(config)
        return count + budget.dense(
            arguments["embedding_dim"], arguments["target_vocabulary_size"]
        )

    def encode(self, inputs, max_length=None):
        """The decoder's initial cache for source ids `(batch, S)`.

        Args:
            inputs: int tensor `(batch, S)`, the `encoder_token_ids`.
            max_length: ignored (an RNN state does not grow).

        Returns:
            The attention decoder cell's state list
            (`Seq2SeqBackbone.initial_cache`).

        Example:
        >>> import numpy as np
        >>> model = Seq2Seq(10, 12, embedding_dim=4, units=3, cell="gru")
        >>> cache = model.encode(np.array([[4, 5, 3, 0]]))  # any int dtype
        >>> len(cache) == len(model.backbone.decoder_cell.state_names)
        True
        >>> tuple(cache[1].shape)  # the GRU state h: (batch, units)
        (1, 3)
        """
        return self.backbone.initial_cache(ops.convert_to_tensor(inputs, "int32"))

    def next(self, prompt, cache, index):
        """One decoding step: `(logits, attention weights, cache)`.

        Reads the token at `index - 1` of `prompt`, advances the decoder
        state held in `cache`, and returns the logits of the token at
        `index`, the step's attention over the source `(batch, S)` and the
        new cache.

        Args:
            prompt: int tensor `(batch, max_length + 1)`.
            cache: the state list `encode` returned, as updated by `next`.
            index: int scalar. The position whose logits are returned.

        Returns:
            The logits `(batch, target_vocabulary_size)`, the float32
            attention `(batch, S)` and the new cache.

        Example:
        >>> import numpy as np
        >>> model = Seq2Seq(10, 12, embedding_dim=4, units=3, cell="gru")
        >>> cache = model.encode(np.array([[4, 5, 3, 0]]))
        >>> prompt = np.array([[2, 0, 0]], "int32")  # [START], two steps to go
        >>> logits, attention, cache = model.next(prompt, cache, 1)
        >>> tuple(logits.shape), keras.backend.standardize_dtype(attention.dtype)
        ((1, 12), 'float32')
        >>> attention = ops.convert_to_numpy(attention)
        >>> float(attention[0, 3]), bool(np.allclose(attention.sum(-1), 1.0))
        (0.0, True)
        """
        token = ops.take(prompt, index - 1, axis=1)
        features, attention, cache = self.backbone.decode_step(token, cache)
        return self.projection(features), ops.cast(attention, "float32"), cache

    def load_weights(self, filepath, skip_mismatch=False, **kwargs):
        """Loads weights, from today's layout or a preset of the old one.

        Presets saved before the backbone existed store every layer at the
        top level of `model.weights.h5`; they are read into this model's
        layers through a view with that layout (`zoo.seq2seq.legacy`).

        Args:
            filepath: str or path-like. A `.weights.h5` file.
            skip_mismatch: bool. As in `keras.Model.load_weights` (today's
                layout only). Defaults to `False`.
            **kwargs: other `keras.Model.load_weights` arguments.

        Example:
        >>> import os, tempfile
        >>> import numpy as np
        >>> model = Seq2Seq(10, 12, embedding_dim=4, units=3, cell="gru")
        >>> copy = Seq2Seq(10, 12, embedding_dim=4, units=3, cell="gru")
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     path = os.path.join(folder, "model.weights.h5")
        ...     model.save_weights(path)
        ...     copy.load_weights(path)
        ...     legacy.is_legacy_weights(path)
        False
        >>> all(np.array_equal(a, b)
        ...     for a, b in zip(model.get_weights(), copy.get_weights()))
        True
        >>> from zoo.base.task import list_presets
        >>> shipped = list_presets()["seq2seq_bahdanau_bible_en_es"]
        >>> legacy.is_legacy_weights(os.path.join(shipped, "model.weights.h5"))
        True
        """
        if legacy.is_legacy_weights(filepath):
            return legacy.load_legacy_weights(self, filepath)
        return super().load_weights(filepath, skip_mismatch=skip_mismatch, **kwargs)
