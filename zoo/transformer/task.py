"""`Transformer`: the translation task on a `TransformerBackbone`."""

import h5py
import keras
import numpy as np
from keras import ops
from keras.src.backend import set_keras_mask

# Imported for their registration: presets store the compiled loss and the
# learning-rate schedule, which must be known when a preset is loaded.
from keras_attention.training import schedules  # noqa: F401
from zoo.base.cached_decoder import decoder_caches, decoder_step, resized_caches
from zoo.base.constructor_arguments import ArgumentsOf
from zoo.transformer import configs, losses  # noqa: F401
from zoo.transformer.backbone import PAD_ID, TransformerBackbone
from zoo.translation import TranslationTask


@keras.saving.register_keras_serializable(package="zoo")
class Transformer(TranslationTask):
    """Encoder-decoder Transformer for translation, with cached decoding.

    The model maps `encoder_token_ids` and `decoder_token_ids` (id 0 is
    padding) to the next-token logits `(batch, T, vocabulary)`: a
    `TransformerBackbone` followed by the transposed target embedding as the
    pre-softmax projection. It trains through `fit` on raw
    `(source, target)` string pairs with a `zoo.TranslationPreprocessor`
    (the same vocabulary for both sides when it is shared) and translates
    through the zoo's one generation front end (`translate`, `generate`):
    `encode` runs the encoder and projects the cross-attention keys/values
    of every decoder layer once; each `next` step runs the decoder on the
    new token only, against self-attention key/value caches.

    Args:
        *args, **kwargs: the `TransformerBackbone` arguments
            (`vocabulary_size`, `num_layers`, `hidden_dim`,
            `intermediate_dim`, `num_heads`, `dropout`, `normalize_first`,
            `score`, `tie_embeddings`, `target_vocabulary_size`,
            `max_wavelength`, `layer_norm_epsilon`), in its order and with
            its defaults; they build the backbone and are read back as
            attributes (`model.hidden_dim`). Left out, or agreeing with it,
            when `backbone` is given. Also `keras.Model`'s `name` and
            `trainable`; any other name raises a `TypeError`.
        backbone: optional `TransformerBackbone` to build on. Defaults to
            `None`.
        preprocessor: optional `zoo.TranslationPreprocessor`.
        dtype: optional dtype or `keras.DTypePolicy` (e.g.
            `"mixed_bfloat16"`). Defaults to the backbone's (the global
            policy).

    Example:
    >>> import numpy as np
    >>> model = Transformer.from_name("tiny", vocabulary_size=100)
    >>> ids = np.array([[5, 6, 3, 0]])
    >>> tuple(model({"encoder_token_ids": ids, "decoder_token_ids": ids}).shape)
    (1, 4, 100)

    Reference:
        Vaswani et al., 2017, "Attention Is All You Need".
    """

    backbone_arguments = ArgumentsOf(TransformerBackbone)
    static_cache_keys = ("cross_attention_cache", "encoder_padding_mask")
    #: On TensorFlow a search drops its finished rows every 8 steps, and its
    #: self-attention caches grow with the steps (`resize_cache`): the same
    #: ids in less time (`experiments/benchmarks/decode_s31.md`).
    drop_finished_every = 8

    def __init__(self, *args, backbone=None, preprocessor=None, dtype=None, **kwargs):
        # === Layers ===
        backbone = self.build_backbone(
            args, backbone, kwargs, dtype, name="transformer_backbone"
        )
        self.backbone = backbone

        # === Functional graph ===
        inputs = backbone.input
        hidden = backbone(inputs)["decoder_sequence_output"]
        logits = backbone.target_embedding(hidden, reverse=True)
        super().__init__(
            inputs=inputs,
            outputs=logits,
            backbone=backbone,
            preprocessor=preprocessor,
            dtype=dtype,
            **kwargs,
        )

    @classmethod
    def from_name(cls, name, vocabulary_size, **overrides):
        """Builds a named size (`tiny`, `small`, `base`, `big`) with overrides.

        Example:
        >>> Transformer.from_name("base", vocabulary_size=8000).num_layers
        6
        """
        return cls(vocabulary_size=vocabulary_size, **configs.get(name, **overrides))

    def compute_loss(
        self, x=None, y=None, y_pred=None, sample_weight=None, training=True
    ):
        """The compiled loss over real target tokens only.

        The label mask (`y != 0`) is put on the logits so that Keras and
        `Task.compute_loss` count real tokens, not sentences: under
        `tf.distribute` the loss is then the mean over every real target
        token of the global batch, as on one device.

        Example (padded positions, id 0, add nothing to the loss):
        >>> import numpy as np
        >>> model = Transformer.from_name("tiny", vocabulary_size=20)
        >>> cross_entropy = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        >>> model.compile(loss=cross_entropy)
        >>> y = np.array([[5, 6, 0, 0]])  # two real tokens, two pads
        >>> logits = np.random.default_rng(0).normal(size=(1, 4, 20)).astype("float32")
        >>> loss = model.compute_loss(y=y, y_pred=ops.convert_to_tensor(logits))
        >>> bool(np.isclose(loss, cross_entropy(y[:, :2], logits[:, :2])))
        True
        """
        if y is not None and y_pred is not None:
            set_keras_mask(y_pred, ops.not_equal(y, PAD_ID))
        return super().compute_loss(x, y, y_pred, sample_weight, training=training)

    # === Generation: `encode` and `next` for `GenerativeTask.generate` ===

    def encode(self, inputs, max_length):
        """Encodes source ids once; returns the decoding cache of `next`.

        Args:
            inputs: int tensor `(batch, S)` of encoder token ids (or the
                preprocessor's dict holding `encoder_token_ids`).
            max_length: int. Decoding steps (the self-attention cache size).

        Returns:
            A dict: `self_attention_cache`, per decoder layer a pair of zero
            tensors (keys, values) `(batch, num_heads, max_length,
            head_dim)`; `cross_attention_cache`, per layer the pair of
            projected encoder keys and values `(batch, num_heads, S,
            head_dim)`; and `encoder_padding_mask` `(batch, S)`. The last
            two never change while decoding (`static_cache_keys`). These
            are the layers' split, heads-first caches: a step neither
            re-stacks nor transposes them.

        Example:
        >>> import numpy as np
        >>> model = Transformer.from_name("tiny", vocabulary_size=20)
        >>> cache = model.encode(np.array([[5, 6, 3, 0]]), max_length=7)
        >>> keys, values = cache["self_attention_cache"][0]
        >>> tuple(keys.shape), tuple(values.shape)
        ((1, 4, 7, 16), (1, 4, 7, 16))
        >>> tuple(cache["cross_attention_cache"][0][0].shape)
        (1, 4, 4, 16)
        """
        if isinstance(inputs, dict):
            inputs = inputs["encoder_token_ids"]
        output, mask = self.backbone.call_encoder(inputs)
        blocks = self.backbone.decoder_blocks
        cache = decoder_caches(
            blocks, output, self.num_heads, max_length, self.compute_dtype
        )
        return {**cache, "encoder_padding_mask": mask}

    def next(self, prompt, cache, index):
        """One cached decoding step: `(logits, attention, cache)`.

        Reads the token at `index - 1` of `prompt` and runs the decoder on
        it alone: its keys/values join the self-attention caches at
        `index - 1`; the cross-attention caches are read, never recomputed.

        Args:
            prompt: int tensor `(batch, max_length + 1)`.
            cache: the dict `encode` returned, as updated by `next`.
            index: int scalar. The position whose logits are returned.

        Returns:
            The logits `(batch, vocabulary)` of position `index`; the last
            decoder layer's cross-attention of the step, averaged over the
            heads, float32 `(batch, S)`; and the updated cache.

        Example:
        >>> import numpy as np
        >>> model = Transformer.from_name("tiny", vocabulary_size=20)
        >>> cache = model.encode(np.array([[5, 6, 3, 0]]), max_length=3)
        >>> prompt = np.array([[2, 0, 0, 0]], "int32")
        >>> logits, attention, cache = model.next(prompt, cache, 1)
        >>> attention = ops.convert_to_numpy(attention)
        >>> tuple(logits.shape), attention.shape, float(attention[0, 3])
        ((1, 20), (1, 4), 0.0)
        >>> bool(np.allclose(attention.sum(-1), 1.0))
        True
        """
        start = index - 1
        token = ops.expand_dims(ops.take(prompt, start, axis=1), 1)
        backbone = self.backbone
        x = backbone.embed(token, backbone.target_embedding, start_index=start)
        x, attention, cache = decoder_step(
            backbone.decoder_blocks,
            x,
            cache,
            start,
            encoder_padding_mask=cache["encoder_padding_mask"],
        )
        if backbone.decoder_norm is not None:
            x = backbone.decoder_norm(x)
        logits = backbone.target_embedding(x, reverse=True)[:, 0]
        return logits, attention, cache

    def resize_cache(self, cache, index):
        """The self-attention caches with room for the steps before `index`.

        A step `index` writes position `index - 1` (see `next`). What a
        search that drops its finished rows calls every
        `drop_finished_every` steps, so that a step attends over the
        positions written so far (`GenerativeTask.resize_cache`).

        Example:
        >>> import numpy as np
        >>> model = Transformer.from_name("tiny", vocabulary_size=20)
        >>> cache = model.encode(np.array([[5, 6, 3, 0]]), max_length=7)
        >>> keys, _ = model.resize_cache(cache, 4)["self_attention_cache"][0]
        >>> tuple(keys.shape)  # room for steps 1, 2 and 3
        (1, 4, 3, 16)
        """
        return resized_caches(cache, index - 1)

    def head_attention(self, inputs, tokens):
        """Each head's cross-attention of the last decoder layer over tokens.

        The teacher-forced counterpart of the `attention` of `next` (which
        is its mean over the heads), for plots of single heads.

        Args:
            inputs: int array `(batch, S)` of encoder token ids.
            tokens: int array `(batch, T + 1)` starting with the start token
                (as `generate` returns it).

        Returns:
            float32 NumPy array `(batch, num_heads, T, S)`: `[:, :, t]`
            is the attention of the step that produced `tokens[:, t + 1]`.

        Example:
        >>> import numpy as np
        >>> model = Transformer.from_name("tiny", vocabulary_size=20)
        >>> weights = model.head_attention(
        ...     np.array([[5, 6, 3, 0]]), np.array([[2, 7, 8]]))
        >>> weights.shape, np.allclose(weights.sum(-1), 1.0, atol=1e-5)
        ((1, 4, 2, 4), True)
        """
        if isinstance(inputs, dict):
            inputs = inputs["encoder_token_ids"]
        output, mask = self.backbone.call_encoder(inputs)
        tokens = ops.convert_to_tensor(np.asarray(tokens)[:, :-1], "int32")
        _, weights = self.backbone.call_decoder(
            tokens, output, mask, return_attention_scores=True
        )
        return ops.convert_to_numpy(ops.cast(weights, "float32"))

    def alignments(self, encoder_token_ids, tokens):
        """`TranslationTask.alignments`, with each head's weights as well.

        Args:
            encoder_token_ids: int array `(batch, S)`, the source ids.
            tokens: int array `(batch, T + 1)` from `generate`.

        Returns:
            A list of dicts: `weights` `(target, source)` (the mean over the
            heads), `head_weights` `(num_heads, target, source)` (see
            `head_attention`), `source_tokens` and `target_tokens`, cropped
            to the sentence's real tokens.

        Example:
        >>> import tensorflow as tf
        >>> from zoo.translation import TranslationPreprocessor
        >>> vocab = ["[PAD]", "[UNK]", "[START]", "[END]", "light", "luz"]
        >>> pre = TranslationPreprocessor(vocab, vocab, sequence_length=8)
        >>> model = Transformer.from_name("tiny", vocabulary_size=6, preprocessor=pre)
        >>> ids = pre(tf.constant(["light"]))["encoder_token_ids"]
        >>> alignment = model.alignments(ids, model.generate(ids, max_length=3))[0]
        >>> heads = alignment["head_weights"]
        >>> heads.shape[0], heads.shape[1:] == alignment["weights"].shape
        (4, True)
        """
        found = super().alignments(encoder_token_ids, tokens)
        heads = self.head_attention(encoder_token_ids, tokens)
        for b, alignment in enumerate(found):
            target, source = alignment["weights"].shape
            alignment["head_weights"] = heads[b, :, :target, :source]
        return found

    # === Weights ===

    def load_weights(self, filepath, *args, **kwargs):
        """Loads weights, also from a file written before the backbone existed.

        Presets saved by the old one-class `Transformer` hold the layers at
        the top of `model.weights.h5` (`layers/reversible_embedding/...`);
        they are the backbone's layers, in the same order, so such a file
        is loaded into the backbone.

        Example:
        >>> import os, tempfile
        >>> import numpy as np
        >>> model = Transformer.from_name("tiny", vocabulary_size=20)
        >>> other = Transformer.from_name("tiny", vocabulary_size=20)
        >>> with tempfile.TemporaryDirectory() as directory:
        ...     path = os.path.join(directory, "model.weights.h5")
        ...     model.backbone.save_weights(path)  # the old one-class layout
        ...     other.load_weights(path)  # a new-layout file loads as usual
        >>> all(map(np.array_equal, model.get_weights(), other.get_weights()))
        True
        """
        if _is_pre_backbone_file(filepath):
            return self.backbone.load_weights(filepath, *args, **kwargs)
        return super().load_weights(filepath, *args, **kwargs)


def _is_pre_backbone_file(filepath):
    """Whether a `.weights.h5` file has the old one-class layout."""
    if not str(filepath).endswith(".weights.h5"):
        return False
    with h5py.File(filepath, "r") as f:
        layers = f.get("layers")
        return (
            layers is not None
            and "reversible_embedding" in layers
            and "transformer_backbone" not in layers
        )
