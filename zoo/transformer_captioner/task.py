"""`TransformerCaptioner`: the captioning task on a `TransformerCaptionerBackbone`."""

import keras
import numpy as np
from keras import ops

from zoo.base.cached_decoder import decoder_caches, decoder_step
from zoo.base.constructor_arguments import ArgumentsOf
from zoo.captioning.preprocessor import fitted
from zoo.captioning.task import CaptioningTask
from zoo.transformer_captioner.backbone import TransformerCaptionerBackbone


@keras.saving.register_keras_serializable(package="zoo")
class TransformerCaptioner(CaptioningTask):
    """Image captioner: self-attention over CNN features, Transformer decoder.

    A `TransformerCaptionerBackbone` (small CNN grid, Transformer encoder
    blocks over its cells, Transformer decoder blocks with cross-attention
    over them) followed by the transposed token embedding as the
    pre-softmax projection. It trains with `compile` / `fit` on raw
    `(images, captions)` with a `zoo.captioning.CaptionPreprocessor`
    (teacher forcing) and captions through the zoo's one generation front
    end (`zoo.base.generation.GenerativeTask`): `encode` runs the CNN and the
    encoder blocks once and projects every decoder block's cross-attention
    keys/values; each `next` step runs the decoder on the new word alone,
    against self-attention key/value caches. The attention maps of a word
    are the last decoder block's cross-attention over the grid cells,
    averaged over the heads.

    A `zoo.captioning.CaptioningTask`: the captioning verbs (`caption`,
    `attention_maps`), the evaluation (`zoo.captioning.evaluation`), the
    plots, the SavedModel export and `python -m zoo caption` come from the
    kind.

    Args:
        *args, **kwargs: the `TransformerCaptionerBackbone` arguments
            (`vocabulary_size`, `image_shape`, `encoder_layers`,
            `decoder_layers`, `hidden_dim`, `intermediate_dim`,
            `num_heads`, `dropout`, `layer_norm_epsilon`), in its order and
            with its defaults; read back as attributes (`model.hidden_dim`).
            Left out, or agreeing with it, when `backbone` is given. Also
            `keras.Model`'s `name` and `trainable`; any other name raises a
            `TypeError`.
        backbone: optional `TransformerCaptionerBackbone` to build on.
            Defaults to `None`.
        preprocessor: optional `CaptionPreprocessor`; an `image_size` or
            `channels` it leaves `None` is set from `image_shape`.
        dtype: optional dtype policy. Defaults to the backbone's (the
            global policy).

    Example:
    >>> import numpy as np
    >>> model = TransformerCaptioner(
    ...     10, hidden_dim=8, intermediate_dim=16, num_heads=2)
    >>> logits = model({"images": np.zeros((2, 84, 84, 1), "float32"),
    ...                 "decoder_token_ids": np.array([[2, 5, 6], [2, 7, 0]])})
    >>> tuple(logits.shape)
    (2, 3, 10)

    Reference:
        Vaswani et al., 2017, "Attention Is All You Need"; Xu et al., 2015,
        "Show, Attend and Tell" (the attention maps and their evaluation).
    """

    backbone_arguments = ArgumentsOf(TransformerCaptionerBackbone)
    static_cache_keys = ("cross_attention_cache",)

    #: What `zoo.captioning.evaluation` prints as the attention kind:
    #: the cross-attention is a softmax over the grid cells.
    attention = "soft"

    def __init__(self, *args, backbone=None, preprocessor=None, dtype=None, **kwargs):
        # === Layers ===
        backbone = self.build_backbone(
            args, backbone, kwargs, dtype, name="transformer_captioner_backbone"
        )
        self.backbone = backbone

        # === Functional graph ===
        inputs = backbone.input
        hidden = backbone(inputs)["decoder_sequence_output"]
        logits = backbone.token_embedding(hidden, reverse=True)
        super().__init__(
            inputs=inputs,
            outputs=logits,
            backbone=backbone,
            preprocessor=fitted(preprocessor, backbone.image_shape),
            dtype=dtype,
            **kwargs,
        )

        # === Config ===
        self.grid_shape = backbone.grid_shape

    @property
    def backbone_layers(self):
        """The CNN's layers, in order (e.g. to pretrain or freeze them).

        Example:
        >>> model = TransformerCaptioner(
        ...     10, hidden_dim=8, intermediate_dim=16, num_heads=2)
        >>> [layer.name for layer in model.backbone_layers][:3]
        ['conv_1', 'conv_1_bn', 'conv_1_relu']
        """
        return self.backbone.cnn_layers

    # Generation --------------------------------------------------------------

    def encode(self, inputs, max_length):
        """Encodes prepared images once; returns the decoding cache of `next`.

        Args:
            inputs: float images `(B, H, W, C)` in `[0, 1]` of the model's
                `image_shape` (`preprocessor.images`), or a dict with them
                under `"images"`.
            max_length: int. Decoding steps (the self-attention cache size).

        Returns:
            A dict: `self_attention_cache`, per decoder block a pair of
            zero tensors `(B, num_heads, max_length, head_dim)`, and
            `cross_attention_cache`, per block the projected keys and values
            of the grid `(B, num_heads, L, head_dim)` (never changed while
            decoding: `static_cache_keys`).

        Example:
        >>> import numpy as np
        >>> model = TransformerCaptioner(
        ...     10, hidden_dim=8, intermediate_dim=16, num_heads=2)
        >>> cache = model.encode(np.zeros((3, 84, 84, 1), "float32"), max_length=5)
        >>> tuple(cache["self_attention_cache"][0][0].shape)
        (3, 2, 5, 4)
        >>> tuple(cache["cross_attention_cache"][0][1].shape)
        (3, 2, 49, 4)
        """
        if isinstance(inputs, dict):
            inputs = inputs["images"]
        grid = self.backbone.call_encoder(inputs)
        return decoder_caches(
            self.backbone.decoder_blocks,
            grid,
            self.num_heads,
            max_length,
            self.compute_dtype,
        )

    def next(self, prompt, cache, index):
        """One cached decoding step: `(logits (B, V), attention (B, L), cache)`.

        Reads the word at `index - 1` of `prompt` and runs the decoder on it
        alone: its keys/values join the self-attention caches at
        `index - 1`; the cross-attention caches are read, never recomputed.
        The attention is the last decoder block's cross-attention of the
        step over the `L` grid cells (row by row), averaged over the heads,
        in float32.

        Example:
        >>> import numpy as np
        >>> model = TransformerCaptioner(
        ...     10, hidden_dim=8, intermediate_dim=16, num_heads=2)
        >>> cache = model.encode(np.zeros((2, 84, 84, 1), "float32"), max_length=3)
        >>> logits, attention, cache = model.next(np.full((2, 4), 2), cache, 1)
        >>> tuple(logits.shape), tuple(attention.shape)
        ((2, 10), (2, 49))
        >>> bool(np.allclose(ops.convert_to_numpy(attention).sum(-1), 1.0))
        True
        """
        start = index - 1
        token = ops.expand_dims(ops.take(prompt, start, axis=1), 1)
        backbone = self.backbone
        x = backbone.embed(token, start_index=start)
        x, attention, cache = decoder_step(backbone.decoder_blocks, x, cache, start)
        logits = backbone.token_embedding(backbone.decoder_norm(x), reverse=True)
        return logits[:, 0], attention, cache

    def head_attention(self, images, tokens):
        """Each head's cross-attention of the last decoder block over the grid.

        The teacher-forced, uncached counterpart of the attention of `next`
        (which is its mean over the heads).

        Args:
            images: prepared float images `(B, H, W, C)`.
            tokens: int array `(B, T + 1)` starting with `[START]` (as
                `generate` returns it).

        Returns:
            float32 NumPy array `(B, num_heads, T, L)`: `[:, :, t]` is the
            attention of the step that produced `tokens[:, t + 1]`.

        Example:
        >>> import numpy as np
        >>> model = TransformerCaptioner(
        ...     10, hidden_dim=8, intermediate_dim=16, num_heads=2)
        >>> weights = model.head_attention(
        ...     np.zeros((1, 84, 84, 1), "float32"), np.array([[2, 7, 8]]))
        >>> weights.shape, bool(np.allclose(weights.sum(-1), 1.0, atol=1e-5))
        ((1, 2, 2, 49), True)
        """
        grid = self.backbone.call_encoder(images)
        tokens = ops.convert_to_tensor(np.asarray(tokens)[:, :-1], "int32")
        _, weights = self.backbone.call_decoder(
            tokens, grid, return_attention_scores=True
        )
        return ops.convert_to_numpy(ops.cast(weights, "float32"))
