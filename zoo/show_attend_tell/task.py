"""`ShowAttendTell`: the image captioner (training, captions, attention maps)."""

import keras
from keras import ops

from zoo.base import parameter_budget as budget
from zoo.base.backbone import dropout_rate
from zoo.base.constructor_arguments import ArgumentsOf
from zoo.base.distributed_loss import global_batch_mean
from zoo.captioning.preprocessor import fitted as _fitted
from zoo.captioning.task import CaptioningTask
from zoo.show_attend_tell.backbone import ShowAttendTellBackbone
from zoo.show_attend_tell.losses import (
    ReinforceBaseline,
    caption_log_likelihood,
    doubly_stochastic_terms,
)


@keras.saving.register_keras_serializable(package="zoo")
class ShowAttendTell(CaptioningTask):
    """Show, Attend and Tell (Xu et al. 2015): CNN encoder, attentive LSTM.

    The network is a `ShowAttendTellBackbone` (encoder CNN, annotation
    vectors, attentive LSTM decoder; built from this class's arguments)
    followed by the deep output layer `p(y_t) ~ exp(L_o tanh(E y_{t-1} +
    L_h h_t + L_z z_t))`. While training, the doubly stochastic penalty
    `lambda * sum_i (1 - sum_t alpha_{t,i})^2` (soft attention) or the
    REINFORCE surrogate with a moving-average baseline and an entropy bonus
    (hard attention) is added to the compiled caption loss.

    Trains with `compile` / `fit` on raw `(images, captions)` (teacher
    forcing; the preprocessor converts images and tokenizes captions inside
    `tf.data`). `caption(images)` (of the captioning kind,
    `zoo.captioning.CaptioningTask`) converts raw images of any size and
    channel count, decodes with `generate` (`zoo.base.generation`: greedy or
    beam search, length and coverage penalties) and detokenizes. Called on
    prepared inputs, the model returns a dict: `logits`
    `(B, T, vocabulary)`, `coverage` `(B, L)` and, for hard attention, the
    summed `log_prob` and `entropy` `(B, 1)` of the sampled locations;
    `predict` returns the logits.

    Args:
        *args, **kwargs: the `ShowAttendTellBackbone` arguments, in its order
            and with its defaults, its `encoder*` ones named `backbone*`
            here: `vocabulary_size`, `image_shape`, `backbone` (its
            `encoder`: `"small"` or a `keras.applications` name),
            `backbone_weights`, `backbone_preprocessing`, `freeze_backbone`,
            `annotation_dim`, `embedding_dim`, `units`, `score`, `attention`,
            `gating`, `feedback`, `seed`. They build the backbone and are read
            back as attributes (`model.units`); a config saves
            `backbone_weights=None` (a preset stores every weight). Left
            out, or agreeing with it, when `backbone` is a
            `ShowAttendTellBackbone`. Also `keras.Model`'s `name` and
            `trainable`; any other name raises a `TypeError`.
        backbone: a `ShowAttendTellBackbone` to build on, or the encoder's
            name (see above). Defaults to `None` (the `"small"` encoder).
        attention_regularization: float. `lambda` of the doubly stochastic
            penalty (soft attention). Defaults to `1.0`.
        reinforce_weight: float. `lambda_r` (hard attention). Defaults to
            `1.0`.
        entropy_weight: float. `lambda_e` (hard attention). Defaults to
            `0.01`.
        baseline_decay: float. Decay of the REINFORCE baseline. Defaults to
            `0.9`.
        dropout: float. Dropout in the deep output. Defaults to `0.2`.
        end_token_id: int. `[END]` id (hard attention's reward). Defaults to
            `3`.
        preprocessor: optional `CaptionPreprocessor`; an `image_size` or
            `channels` it leaves `None` is set from `image_shape`.
        dtype: optional dtype policy (e.g. `"mixed_bfloat16"`). Defaults to
            the backbone's (the global policy).

    Example:
    >>> from zoo.data import scenes
    >>> test = scenes.load("test", num_scenes=3, sample=True)
    >>> test["captions"][1:]
    ['a coat', 'a sneaker to the left of a sandal']
    >>> model = ShowAttendTell.from_preset("show_attend_tell_fashion_scenes")
    >>> model.caption(test["images"][1:], beam_width=3)
    ['a coat', 'a sneaker to the left of a sandal']

    Any size and channel count: an RGB photo-sized version of a scene.

    >>> import numpy as np
    >>> rgb = np.repeat(test["images"][2][..., None], 3, axis=-1)
    >>> model.caption(np.kron(rgb, np.ones((2, 2, 1), "uint8")))
    'a sneaker to the left of a sandal'

    Reference:
        Xu et al., 2015, "Show, Attend and Tell: Neural Image Caption
        Generation with Visual Attention", ICML.
        https://arxiv.org/abs/1502.03044
    """

    static_cache_keys = ("annotations",)
    backbone_arguments = ArgumentsOf(
        ShowAttendTellBackbone,
        renamed={
            "backbone": "encoder",
            "backbone_weights": "encoder_weights",
            "backbone_preprocessing": "encoder_preprocessing",
            "freeze_backbone": "freeze_encoder",
        },
    )

    def __init__(
        self,
        *args,
        backbone=None,
        attention_regularization=1.0,
        reinforce_weight=1.0,
        entropy_weight=0.01,
        baseline_decay=0.9,
        dropout=0.2,
        end_token_id=3,
        preprocessor=None,
        dtype=None,
        **kwargs,
    ):
        dropout_rate("dropout", dropout)
        backbone = self.build_backbone(
            args, backbone, kwargs, dtype, name="show_attend_tell_backbone"
        )
        dtype_policy = backbone.dtype_policy

        # === Layers ===
        self.backbone = backbone
        self.output_h = keras.layers.Dense(
            backbone.embedding_dim, dtype=dtype_policy, name="output_h"
        )
        self.output_z = keras.layers.Dense(
            backbone.embedding_dim, dtype=dtype_policy, name="output_z"
        )
        self.output_dropout = keras.layers.Dropout(dropout, name="output_dropout")
        self.projection = keras.layers.Dense(
            backbone.vocabulary_size, dtype=dtype_policy, name="logits"
        )
        self.reinforce = None
        if backbone.attention == "hard":
            self.reinforce = ReinforceBaseline(
                reinforce_weight,
                entropy_weight,
                baseline_decay,
                dtype=dtype_policy,
                name="reinforce",
            )
            self.reinforce.build()

        # === Functional graph ===
        # The backbone's own graph, extended (not nested): its layers are
        # this model's layers, so weight files keep one layout, that of
        # presets saved before the backbone existed.
        features = backbone.output
        readout = keras.layers.Add(name="deep_output")(
            [
                features["word_embeddings"],
                self.output_h(features["hidden_states"]),
                self.output_z(features["contexts"]),
            ]
        )
        readout = keras.layers.Activation("tanh", name="deep_output_tanh")(readout)
        logits = self.projection(self.output_dropout(readout))
        super().__init__(
            inputs=backbone.input,
            outputs={
                "logits": logits,
                "coverage": features["coverage"],
                "log_prob": features["log_prob"],
                "entropy": features["entropy"],
            },
            backbone=backbone,
            preprocessor=_fitted(preprocessor, backbone.image_shape),
            dtype=dtype,
            **kwargs,
        )

        # === Config ===
        self.attention_regularization = attention_regularization
        self.reinforce_weight = reinforce_weight
        self.entropy_weight = entropy_weight
        self.baseline_decay = baseline_decay
        self.dropout = dropout
        self.end_token_id = end_token_id
        self.grid_shape = backbone.grid_shape

    @property
    def backbone_layers(self):
        """The encoder CNN's layers, in order (e.g. to pretrain or freeze it).

        Example:
        >>> model = ShowAttendTell(10, annotation_dim=8, embedding_dim=4, units=6)
        >>> [layer.name for layer in model.backbone_layers][:4]
        ['conv_1', 'conv_1_bn', 'conv_1_relu', 'conv_2']
        >>> trainable = len(model.trainable_weights)
        >>> for layer in model.backbone_layers:
        ...     layer.trainable = False
        >>> trainable - len(model.trainable_weights)  # 4 kernels, 4 x (gamma, beta)
        12
        """
        return self.backbone.encoder_layers

    @property
    def decoder_cell(self):
        """The backbone's `ShowAttendTellCell` (the attentive LSTM step).

        Example:
        >>> model = ShowAttendTell(10, annotation_dim=8, embedding_dim=4, units=6)
        >>> cell = model.decoder_cell
        >>> type(cell).__name__, cell.units, cell is model.backbone.decoder_cell
        ('ShowAttendTellCell', 6, True)
        """
        return self.backbone.decoder_cell

    # Training ----------------------------------------------------------------

    def compute_loss(
        self, x=None, y=None, y_pred=None, sample_weight=None, training=True
    ):
        """The compiled caption loss plus the attention terms.

        Soft attention adds `lambda * sum_i (1 - sum_t alpha_{t,i})^2`, hard
        attention the REINFORCE terms (`ReinforceBaseline`), both as the
        mean over the global batch, so mirrored replicas add up to one
        device's gradient.

        Example:
        >>> import numpy as np
        >>> from zoo.show_attend_tell.losses import doubly_stochastic_penalty
        >>> model = ShowAttendTell(10, annotation_dim=8, embedding_dim=4, units=6,
        ...                        attention_regularization=0.5)
        >>> model.compile(loss=keras.losses.SparseCategoricalCrossentropy(
        ...     from_logits=True))
        >>> x = {"images": np.zeros((2, 84, 84, 1), "float32"),
        ...      "decoder_token_ids": np.array([[2, 5, 6], [2, 7, 0]], "int32")}
        >>> y = np.array([[5, 6, 3], [7, 3, 0]], "int32")
        >>> y_pred = model(x)
        >>> loss = model.compute_loss(x, y, y_pred, training=False)
        >>> model.attention_regularization = 0.0  # the caption loss alone
        >>> caption_loss = model.compute_loss(x, y, y_pred, training=False)
        >>> penalty = doubly_stochastic_penalty(y_pred["coverage"], strength=0.5)
        >>> tuple(loss.shape), bool(np.allclose(loss - caption_loss, penalty))
        ((), True)
        """
        loss = super().compute_loss(
            x, y, y_pred["logits"], sample_weight, training=training
        )
        if self.attention == "soft":
            if self.attention_regularization <= 0:
                return loss
            extra = self.attention_regularization * doubly_stochastic_terms(
                y_pred["coverage"]
            )
        elif training:
            reward = caption_log_likelihood(
                y_pred["logits"], x["decoder_token_ids"], self.end_token_id
            )
            extra = self.reinforce.terms(reward, y_pred["log_prob"], y_pred["entropy"])
        else:
            return loss
        return loss + ops.cast(global_batch_mean(extra), loss.dtype)

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        """Keras's compiled metrics, on the `"logits"` output.

        Padded steps count unless weighted out: compile the accuracy as a
        `weighted_metrics` entry, and the preprocessor's sample weights
        (0 on padding) leave them out.

        Example:
        >>> import numpy as np
        >>> model = ShowAttendTell(10, annotation_dim=8, embedding_dim=4, units=6)
        >>> model.compile(loss=keras.losses.SparseCategoricalCrossentropy(
        ...     from_logits=True), weighted_metrics=["accuracy"])
        >>> x = {"images": np.zeros((2, 84, 84, 1), "float32"),
        ...      "decoder_token_ids": np.array([[2, 5, 6], [2, 7, 0]], "int32")}
        >>> y = np.array([[5, 6, 3], [7, 3, 0]], "int32")
        >>> real = y != 0  # the 5 real words
        >>> y_pred = model(x)
        >>> logs = model.compute_metrics(x, y, y_pred, sample_weight=real * 1.0)
        >>> predicted = ops.convert_to_numpy(y_pred["logits"]).argmax(-1)
        >>> want = (predicted == y)[real].mean()
        >>> sorted(logs), bool(np.isclose(logs["accuracy"], want))
        (['accuracy', 'loss'], True)
        """
        return super().compute_metrics(x, y, y_pred["logits"], sample_weight)

    #: `predict` keeps only the `"logits"` output.
    prediction_key = "logits"

    # Generation --------------------------------------------------------------

    def encode(self, inputs, max_length=None):
        """The decoder's starting cache for prepared images.

        Args:
            inputs: float images `(B, H, W, C)` in `[0, 1]` of the model's
                `image_shape` (`preprocessor.images`), or a dict with them
                under `"images"`.
            max_length: ignored (the LSTM state has no length).

        Returns:
            dict of batch-first tensors named by `backbone.STATE_NAMES`
            (LSTM state, annotations, attention sums).

        Example:
        >>> import numpy as np
        >>> model = ShowAttendTell(10, annotation_dim=8, embedding_dim=4, units=6)
        >>> cache = model.encode(np.zeros((2, 84, 84, 1), "float32"))
        >>> tuple(cache["annotations"].shape)
        (2, 49, 8)
        """
        if isinstance(inputs, dict):
            inputs = inputs["images"]
        return self.backbone.initial_state(inputs)

    def next(self, prompt, cache, index):
        """One decoding step: `(logits (B, V), attention (B, L), cache)`.

        Reads the word at `index - 1` of `prompt`, advances the decoder
        state in `cache` and returns the logits of the word at `index`
        (deep output, no dropout) with the step's float32 attention over
        the `L` grid cells (row by row).

        Example:
        >>> import numpy as np
        >>> model = ShowAttendTell(10, annotation_dim=8, embedding_dim=4, units=6)
        >>> cache = model.encode(np.zeros((2, 84, 84, 1), "float32"))
        >>> logits, attention, cache = model.next(np.full((2, 3), 2), cache, 1)
        >>> tuple(logits.shape), tuple(attention.shape)
        ((2, 10), (2, 49))
        """
        token = ops.take(prompt, index - 1, axis=1)
        words, hidden, context, cache = self.backbone.step(token, cache)
        readout = ops.tanh(words + self.output_h(hidden) + self.output_z(context))
        return self.projection(readout), ops.cast(cache["weights"], "float32"), cache

    # Config ------------------------------------------------------------------

    @classmethod
    def parameter_count(cls, config):
        """The backbone's parameters and the deep output layer's (see `Task`).

        Example:
        >>> config = {"vocabulary_size": 10, "annotation_dim": 8, "units": 8,
        ...           "score": "dot", "attention": "hard"}
        >>> ShowAttendTell.parameter_count(config) - ShowAttendTell(**config).count_params()
        0
        """
        count = super().parameter_count(config)
        arguments = cls.backbone_arguments.values(config)
        words, embedding_dim = arguments["vocabulary_size"], arguments["embedding_dim"]
        count += budget.dense(arguments["units"], embedding_dim)  # output_h
        count += budget.dense(arguments["annotation_dim"], embedding_dim)  # output_z
        count += budget.dense(embedding_dim, words)  # The logits.
        if arguments["attention"] == "hard":
            count += 2  # REINFORCE's moving baseline and its flag.
        return count

    @classmethod
    def from_config(cls, config):
        """Rebuilds the model from `get_config()` (today's or an older one).

        A config naming backbone weights is refused: a preset stores every
        weight, and a file name or `"imagenet"` would read any `.h5` or
        download.
        """
        weights = config.get("backbone_weights")
        if weights is not None:
            raise ValueError(
                "A ShowAttendTell config may not name backbone weights (a "
                "preset stores all weights). Received: "
                f"backbone_weights={weights!r:.80}"
            )
        return super().from_config(config)
