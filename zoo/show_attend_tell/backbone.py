"""`ShowAttendTellBackbone`: CNN annotations and the attentive LSTM decoder."""

import keras
from keras import ops

from zoo.base import lora
from zoo.base import parameter_budget as budget
from zoo.base.backbone import MAX_IMAGE_SHAPE, Backbone, positive_int
from zoo.show_attend_tell import encoder as encoders
from zoo.show_attend_tell.decoder import (
    EXTRA_STATES,
    ShowAttendTellCell,
    ShowAttendTellDecoder,
)

#: The most features a `keras.applications` encoder gives (NASNetLarge's
#: 4,032), for the parameter budget (`ShowAttendTellBackbone.parameter_count`).
MAX_APPLICATION_FEATURES = 4096

#: Names of the decoder cell's states, in the cell's order (the decoding cache).
STATE_NAMES = ("h", "c", *EXTRA_STATES)


@keras.saving.register_keras_serializable(package="zoo")
class ShowAttendTellBackbone(Backbone):
    """Show, Attend and Tell's network up to the deep output layer.

    The encoder (the built-in small CNN, or any `keras.applications` model
    by name) maps an image to an `H x W` grid of feature vectors; each
    cell's `(row, column)` is appended (`GridCoordinates`) and a dense ReLU
    layer gives the `L = H * W` annotation vectors `a_i`. The decoder (a
    `ShowAttendTellCell` run over the caption by `ShowAttendTellDecoder`)
    embeds the previous words `E y_{t-1}` and, at every step, attends over
    the annotations and advances its LSTM. The task
    (`zoo.show_attend_tell.ShowAttendTell`) adds the deep output layer that
    turns these into word logits.

    Inputs are named `images` (float `(B, H, W, C)` in `[0, 1]`, as
    `CaptionPreprocessor` makes them) and `decoder_token_ids` (int
    `(B, T)`, `[START] y_1 ... y_{T-1}`, 0 for padding). Outputs are a dict:
    `word_embeddings` `E y_{t-1}` `(B, T, embedding_dim)`,
    `hidden_states` `h_t` `(B, T, units)`, `contexts` `z_t`
    `(B, T, annotation_dim)`, `coverage` `sum_t alpha_t` `(B, L)` and, for
    hard attention, the summed `log_prob` and `entropy` `(B, 1)` of the
    sampled locations (zeros for soft attention).

    Args:
        vocabulary_size: int. Caption vocabulary size.
        image_shape: tuple `(H, W, C)`. Defaults to `(84, 84, 1)`.
        encoder: str. `"small"` (built-in CNN, `encoder.small_cnn`) or a
            `keras.applications` name such as `"MobileNetV2"`. Defaults to
            `"small"`.
        encoder_weights: `None`, `"imagenet"` or a local weights file for a
            `keras.applications` encoder, read when the model is built.
            Defaults to `None`.
        encoder_preprocessing: str. Input scaling of a `keras.applications`
            encoder (see `BackbonePreprocessing`). Defaults to `"tf"`.
        freeze_encoder: bool. Do not train the encoder. Defaults to `False`.
        annotation_dim: int. Size `D` of the annotation vectors. Defaults to
            `128`.
        embedding_dim: int. Word embedding size `m`. Defaults to `64`.
        units: int. LSTM size `n`. Defaults to `256`.
        score: alignment function (name, config or score layer). Defaults
            to `"additive"`.
        attention: str. `"soft"` or `"hard"`. Defaults to `"soft"`.
        gating: bool. Gating scalar `beta`. Defaults to `True`.
        feedback: str. What the LSTM reads besides the previous word:
            `"context"` (`z_t`, the paper) or `"weights"` (`alpha_t`; see
            `ShowAttendTellCell`). Defaults to `"context"`.
        seed: int or None. Seed of hard-attention sampling. Defaults to
            `None`.
        dtype: optional dtype policy. Defaults to `None` (the global one).
        **kwargs: `keras.Model` arguments (e.g. `name`).

    Example:
    >>> import numpy as np
    >>> backbone = ShowAttendTellBackbone(
    ...     10, annotation_dim=8, embedding_dim=4, units=6, seed=0)
    >>> outputs = backbone({
    ...     "images": np.zeros((2, 84, 84, 1), "float32"),
    ...     "decoder_token_ids": np.array([[2, 5, 6], [2, 7, 0]], "int32"),
    ... })
    >>> {name: tuple(value.shape) for name, value in sorted(outputs.items())}
    ... # doctest: +NORMALIZE_WHITESPACE
    {'contexts': (2, 3, 8), 'coverage': (2, 49), 'entropy': (2, 1),
     'hidden_states': (2, 3, 6), 'log_prob': (2, 1), 'word_embeddings': (2, 3, 4)}
    >>> backbone.grid_shape
    (7, 7)

    Reference:
        Xu et al., 2015, "Show, Attend and Tell: Neural Image Caption
        Generation with Visual Attention", ICML.
        https://arxiv.org/abs/1502.03044
    """

    def __init__(
        self,
        vocabulary_size,
        image_shape=(84, 84, 1),
        encoder="small",
        encoder_weights=None,
        encoder_preprocessing="tf",
        freeze_encoder=False,
        annotation_dim=128,
        embedding_dim=64,
        units=256,
        score="additive",
        attention="soft",
        gating=True,
        feedback="context",
        seed=None,
        dtype=None,
        **kwargs,
    ):
        image_shape = _checked_sizes(
            image_shape,
            vocabulary_size=vocabulary_size,
            annotation_dim=annotation_dim,
            embedding_dim=embedding_dim,
            units=units,
        )
        if isinstance(score, keras.layers.Layer):
            score = keras.saving.serialize_keras_object(score)

        # === Layers ===
        if encoder == "small":
            self.encoder_layers = encoders.small_cnn(dtype)
        else:
            self.encoder_layers = [
                encoders.BackbonePreprocessing(
                    encoder_preprocessing, dtype=dtype, name="backbone_preprocessing"
                ),
                encoders.application(
                    encoder, (*image_shape[:2], 3), weights=encoder_weights, dtype=dtype
                ),
            ]
        if freeze_encoder:
            for layer in self.encoder_layers:
                layer.trainable = False
        self.coordinates = encoders.GridCoordinates(dtype=dtype, name="coordinates")
        self.annotation_layer = keras.layers.Dense(
            annotation_dim, activation="relu", dtype=dtype, name="annotations"
        )
        self.embedding = keras.layers.Embedding(
            vocabulary_size,
            embedding_dim,
            mask_zero=True,
            dtype=dtype,
            name="embedding",
        )

        # === Functional graph ===
        images = keras.Input(image_shape, name="images")
        decoder_ids = keras.Input((None,), dtype="int32", name="decoder_token_ids")
        grid = self._grid(images)
        annotations = self._annotations(grid)
        # The cell is made once the grid size is known (`feedback="weights"`
        # reads one weight per grid location).
        self.grid_shape = (grid.shape[1], grid.shape[2])
        self.decoder_cell = ShowAttendTellCell(
            units,
            annotation_dim,
            score=score,
            attention=attention,
            gating=gating,
            feedback=feedback,
            num_locations=self.grid_shape[0] * self.grid_shape[1],
            seed=seed,
            dtype=dtype,
            name="decoder_cell",
        )
        self.decoder = ShowAttendTellDecoder(
            self.decoder_cell, dtype=dtype, name="decoder"
        )
        words = self.embedding(decoder_ids)
        outputs, coverage, log_prob, entropy = self.decoder(words, annotations)
        super().__init__(
            inputs={"images": images, "decoder_token_ids": decoder_ids},
            outputs={
                "word_embeddings": words,
                "hidden_states": outputs[..., :units],
                "contexts": outputs[..., units:],
                "coverage": coverage,
                "log_prob": log_prob,
                "entropy": entropy,
            },
            dtype=dtype,
            **kwargs,
        )

        # === Config ===
        self.vocabulary_size = vocabulary_size
        self.image_shape = image_shape
        self.encoder = encoder
        self.encoder_weights = encoder_weights
        self.encoder_preprocessing = encoder_preprocessing
        self.freeze_encoder = freeze_encoder
        self.annotation_dim = annotation_dim
        self.embedding_dim = embedding_dim
        self.units = units
        self.score = score
        self.attention = attention
        self.gating = gating
        self.feedback = feedback
        self.seed = seed

    @classmethod
    def parameter_count(
        cls,
        vocabulary_size,
        image_shape,
        encoder,
        annotation_dim,
        embedding_dim,
        units,
        score,
        gating,
        feedback,
        **arguments,
    ):
        """The parameters `ShowAttendTellBackbone(...)` would create, unbuilt.

        Exact for the small encoder but for the alignment function, bounded
        by `zoo.base.parameter_budget.score_parameters`. A `keras.applications`
        encoder's own weights are not counted (its name fixes them, no size
        in the config does); its grid is bounded by a stride of 32 and its
        features by `MAX_APPLICATION_FEATURES`. See
        `Backbone.parameter_count`.

        Example:
        >>> from zoo.base.constructor_arguments import ArgumentsOf
        >>> config = {"vocabulary_size": 10, "annotation_dim": 8, "units": 6,
        ...           "feedback": "weights"}
        >>> count = ShowAttendTellBackbone.parameter_count(
        ...     **ArgumentsOf(ShowAttendTellBackbone).values(config))
        >>> count - ShowAttendTellBackbone(**config).count_params()  # the score
        8
        """
        image_shape = _checked_sizes(
            image_shape,
            vocabulary_size=vocabulary_size,
            annotation_dim=annotation_dim,
            embedding_dim=embedding_dim,
            units=units,
        )
        if encoder == "small":
            height, width, features, count = encoders.small_cnn_size(image_shape)
        else:
            height, width = (-(-side // 32) for side in image_shape[:2])
            features, count = MAX_APPLICATION_FEATURES, 0
        locations = height * width
        count += budget.dense(features + 2, annotation_dim)  # With coordinates.
        count += vocabulary_size * embedding_dim
        fed = annotation_dim if feedback == "context" else locations
        count += budget.recurrent_cell("lstm", embedding_dim + fed, units)
        count += budget.score_parameters(score, units, annotation_dim)
        count += 2 * budget.dense(annotation_dim, units)  # init_h, init_c.
        if gating:
            count += budget.dense(units, 1)
        return count

    def default_lora_layer_names(self):
        """LoRA's targets: the LSTM, the attention and the decoder's dense layers.

        The LSTM cell's kernel and recurrent kernel and the `Additive`
        score's `W_a`/`U_a` (`keras_attention.lora`), the annotation
        projection, `init_h`/`init_c` and the gate `beta`.

        Example:
        >>> backbone = ShowAttendTellBackbone(10, annotation_dim=8, units=6)
        >>> sorted(backbone.default_lora_layer_names())
        ['annotations', 'beta', 'init_c', 'init_h', 'lstm', 'score']
        """
        return lora.adaptable_names(
            self,
            lambda layer: (
                layer.name
                in ("annotations", "init_h", "init_c", "beta", "lstm", "score")
            ),
        )

    def annotate(self, images):
        """The annotation vectors `(B, L, annotation_dim)` of prepared images.

        Args:
            images: float tensor `(B, H, W, C)` in `[0, 1]` (symbolic or not).

        Returns:
            The `L = H_grid * W_grid` annotation vectors, row by row.

        Example:
        >>> import numpy as np
        >>> backbone = ShowAttendTellBackbone(10, annotation_dim=8, units=6)
        >>> tuple(backbone.annotate(np.zeros((2, 84, 84, 1), "float32")).shape)
        (2, 49, 8)
        """
        return self._annotations(self._grid(ops.convert_to_tensor(images, "float32")))

    def _grid(self, images):
        """The encoder's feature grid with coordinates, `(B, H, W, C + 2)`."""
        x = images
        for layer in self.encoder_layers:
            x = layer(x)
        return self.coordinates(x)

    def _annotations(self, grid):
        height, width, channels = grid.shape[1], grid.shape[2], grid.shape[3]
        return self.annotation_layer(ops.reshape(grid, (-1, height * width, channels)))

    def initial_state(self, images):
        """The decoder state before the first word: a dict named by `STATE_NAMES`.

        `h_0` and `c_0` are MLPs of the mean annotation (section 3.1.2); the
        annotations, their projection by the score, and the running
        attention sums travel with them (see `ShowAttendTellCell`).

        Args:
            images: float tensor `(B, H, W, C)` in `[0, 1]`.

        Returns:
            dict of batch-first tensors, the cache of `step`.

        Example:
        >>> import numpy as np
        >>> backbone = ShowAttendTellBackbone(10, annotation_dim=8, units=6)
        >>> state = backbone.initial_state(np.zeros((2, 84, 84, 1), "float32"))
        >>> tuple(state["h"].shape), tuple(state["annotations"].shape)
        ((2, 6), (2, 49, 8))
        """
        states = self.decoder_cell.initial_state(self.annotate(images))
        return dict(zip(STATE_NAMES, states))

    def step(self, token_ids, state):
        """One decoder step on the previous words `token_ids` `(B,)`.

        Args:
            token_ids: int tensor `(B,)`: `y_{t-1}`.
            state: dict from `initial_state` (or the last `step`).

        Returns:
            `(word_embeddings, hidden_states, contexts, state)`: `E y_{t-1}`,
            `h_t`, `z_t` (each `(B, size)`) and the new state, whose
            `"weights"` entry holds the step's attention `alpha_t` `(B, L)`.

        Example:
        >>> import numpy as np
        >>> backbone = ShowAttendTellBackbone(10, annotation_dim=8, units=6)
        >>> state = backbone.initial_state(np.zeros((2, 84, 84, 1), "float32"))
        >>> _, h, z, state = backbone.step(np.array([2, 2]), state)
        >>> tuple(h.shape), tuple(z.shape), tuple(state["weights"].shape)
        ((2, 6), (2, 8), (2, 49))
        """
        words = self.embedding(token_ids)
        outputs, states = self.decoder_cell(
            words, [state[name] for name in STATE_NAMES]
        )
        hidden, context = outputs[:, : self.units], outputs[:, self.units :]
        return words, hidden, context, dict(zip(STATE_NAMES, states))

    def get_config(self):
        # A preset stores every weight: a config never names a weights file.
        config = super().get_config()
        config.update(image_shape=list(self.image_shape), encoder_weights=None)
        return config

    @classmethod
    def from_config(cls, config):
        # A config naming a file or "imagenet" would read any .h5 or
        # download: refused (a preset stores every weight).
        weights = config.get("encoder_weights")
        if weights is not None:
            raise ValueError(
                "A ShowAttendTellBackbone config may not name encoder weights (a "
                f"preset stores all weights). Received: encoder_weights={weights!r:.80}"
            )
        return super().from_config(config)


def _checked_sizes(image_shape, **sizes):
    """`image_shape` as a tuple of 3 ints within `MAX_IMAGE_SHAPE`, once
    each size is checked (`positive_int`)."""
    for name, value in sizes.items():
        positive_int(name, value)
    image_shape = tuple(int(s) for s in image_shape)
    if len(image_shape) != 3:
        raise ValueError(
            f"`image_shape` must be (H, W, C). Received: image_shape={image_shape}"
        )
    if not all(1 <= s <= m for s, m in zip(image_shape, MAX_IMAGE_SHAPE)):
        raise ValueError(
            "`image_shape` must be positive and at most "
            f"{MAX_IMAGE_SHAPE} (zoo.base.backbone.MAX_IMAGE_SHAPE). Received: "
            f"image_shape={image_shape}"
        )
    return image_shape
