"""`ShowAttendTell`: an image captioner with soft or hard visual attention."""

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from zoo.generation import decoding_options, make_search
from zoo.show_attend_tell import encoder as encoders
from zoo.show_attend_tell.decoder import ShowAttendTellCell, ShowAttendTellDecoder
from zoo.show_attend_tell.losses import (
    ReinforceBaseline,
    caption_log_likelihood,
    doubly_stochastic_terms,
)
from zoo.show_attend_tell.preprocessor import CaptionPreprocessor
from zoo.task import Task, global_batch_mean, sliced


def checked_images(images, name="images"):
    """Images as a NumPy array of uint8 (0-255) or float32 (0-1) values.

    Any integer dtype holding 0-255 becomes uint8, any float dtype holding
    0-1 becomes float32; other values (a float image of 0-255, a 16-bit
    range, NaN or infinity) are refused rather than captioned as garbage.

    Example:
    >>> checked_images(np.zeros((1, 4, 4), "int64")).dtype
    dtype('uint8')
    >>> checked_images(np.full((1, 4, 4), 255.0))
    Traceback (most recent call last):
    ...
    ValueError: Float `images` must hold values in [0, 1] (uint8 for 0-255). Received: values in [255.0, 255.0]
    """
    images = np.asarray(images)
    if images.size == 0:
        raise ValueError(f"`{name}` is empty. Received: shape={images.shape}")
    if images.dtype.kind in "ui":
        low, high = int(images.min()), int(images.max())
        if low < 0 or high > 255:
            raise ValueError(
                f"Integer `{name}` must hold values in [0, 255]. "
                f"Received: values in [{low}, {high}]"
            )
        return images.astype("uint8", copy=False)
    if images.dtype.kind != "f":
        raise TypeError(
            f"`{name}` must be an integer or float array. "
            f"Received: dtype={images.dtype}"
        )
    if not np.all(np.isfinite(images)):
        raise ValueError(f"`{name}` holds NaN or infinite values.")
    low, high = float(images.min()), float(images.max())
    if low < 0.0 or high > 1.0:
        raise ValueError(
            f"Float `{name}` must hold values in [0, 1] (uint8 for 0-255). "
            f"Received: values in [{low}, {high}]"
        )
    return images.astype("float32", copy=False)


@keras.saving.register_keras_serializable(package="zoo")
class ShowAttendTell(Task):
    """Show, Attend and Tell (Xu et al. 2015): CNN encoder, attentive LSTM.

    The encoder (the built-in small CNN, or any `keras.applications`
    backbone by name, optionally frozen) maps an image to an `H x W` grid of
    feature vectors; each cell's `(row, column)` is appended and a dense
    ReLU layer gives the `L = H * W` annotation vectors `a_i` of size
    `annotation_dim`. The decoder is an LSTM (`ShowAttendTellCell`) that at
    every word attends over the annotations (soft, or stochastic hard
    attention trained with REINFORCE), scales the context by the gating
    scalar `beta`, and starts from MLPs of the mean annotation. The deep
    output layer gives `p(y_t) ~ exp(L_o tanh(E y_{t-1} + L_h h_t + L_z
    z_t))`. While training, the doubly stochastic penalty
    `lambda * sum_i (1 - sum_t alpha_{t,i})^2` (soft) or the REINFORCE
    surrogate with a moving-average baseline and an entropy bonus (hard) is
    added to the compiled caption loss.

    Trains with `compile` / `fit` on raw `(images, captions)` (teacher
    forcing; the preprocessor scales images and tokenizes captions inside
    `tf.data`); `caption(images)` decodes with `keras_attention.decoding`.
    Called on prepared inputs, the model returns a dict: `logits`
    `(B, T, vocabulary)`, `coverage` `(B, L)` and, for hard attention, the
    summed `log_prob` and `entropy` `(B, 1)` of the sampled locations;
    `predict` returns the logits.

    Args:
        vocabulary_size: int. Caption vocabulary size.
        image_shape: tuple `(H, W, C)`. Defaults to `(84, 84, 1)`.
        backbone: str. `"small"` (built-in CNN) or a `keras.applications`
            name such as `"MobileNetV2"`. Defaults to `"small"`.
        backbone_weights: `None`, `"imagenet"` or a local weights file, used
            when the model is first built (a preset stores all weights, so
            the config saves `None`). Defaults to `None`.
        backbone_preprocessing: str. Input scaling of an application
            backbone (see `BackbonePreprocessing`). Defaults to `"tf"`.
        freeze_backbone: bool. Do not train the backbone. Defaults to
            `False`.
        annotation_dim: int. Size `D` of the annotation vectors. Defaults to
            `128`.
        embedding_dim: int. Word embedding size `m`. Defaults to `64`.
        units: int. LSTM size `n`. Defaults to `256`.
        score: alignment function (name, config or score layer). Defaults to
            `"additive"`.
        attention: str. `"soft"` or `"hard"`. Defaults to `"soft"`.
        gating: bool. Gating scalar `beta`. Defaults to `True`.
        feedback: str. What the LSTM reads besides the previous word:
            `"context"` (`z_t`, the paper) or `"weights"` (`alpha_t`, where it
            looked; see `ShowAttendTellCell`). Defaults to `"context"`.
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
        seed: int or None. Seed of hard-attention sampling. Defaults to
            `None`.
        preprocessor: optional `CaptionPreprocessor`.
        **kwargs: `keras.Model` arguments (e.g. `name`).

    Example:
    >>> from zoo.data import scenes
    >>> test = scenes.load("test", num_scenes=3, sample=True)
    >>> test["captions"][1:]
    ['a coat', 'a sneaker to the left of a sandal']
    >>> model = ShowAttendTell.from_preset("show_attend_tell_fashion_scenes")
    >>> model.caption(test["images"][1:], beam_width=3)
    ['a coat', 'a sneaker to the left of a sandal']

    Reference:
        Xu et al., 2015, "Show, Attend and Tell: Neural Image Caption
        Generation with Visual Attention", ICML.
        https://arxiv.org/abs/1502.03044
    """

    def __init__(
        self,
        vocabulary_size,
        image_shape=(84, 84, 1),
        backbone="small",
        backbone_weights=None,
        backbone_preprocessing="tf",
        freeze_backbone=False,
        annotation_dim=128,
        embedding_dim=64,
        units=256,
        score="additive",
        attention="soft",
        gating=True,
        feedback="context",
        attention_regularization=1.0,
        reinforce_weight=1.0,
        entropy_weight=0.01,
        baseline_decay=0.9,
        dropout=0.2,
        end_token_id=3,
        seed=None,
        preprocessor=None,
        dtype=None,
        **kwargs,
    ):
        for name, value in (
            ("vocabulary_size", vocabulary_size),
            ("annotation_dim", annotation_dim),
            ("embedding_dim", embedding_dim),
            ("units", units),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(
                    f"`{name}` must be a positive int. Received: {name}={value!r}"
                )
        image_shape = tuple(int(s) for s in image_shape)
        if len(image_shape) != 3:
            raise ValueError(
                f"`image_shape` must be (H, W, C). Received: image_shape={image_shape}"
            )
        if not isinstance(dropout, (int, float)) or not 0 <= dropout < 1:
            raise ValueError(
                f"`dropout` must be a float in [0, 1). Received: dropout={dropout!r}"
            )
        if isinstance(score, keras.layers.Layer):
            score = keras.saving.serialize_keras_object(score)

        # === Layers ===
        if backbone == "small":
            backbone_layers = encoders.small_cnn(dtype)
        else:
            backbone_layers = [
                encoders.BackbonePreprocessing(
                    backbone_preprocessing, dtype=dtype, name="backbone_preprocessing"
                ),
                encoders.application(
                    backbone,
                    (*image_shape[:2], 3),
                    weights=backbone_weights,
                    dtype=dtype,
                ),
            ]
        if freeze_backbone:
            for layer in backbone_layers:
                layer.trainable = False
        coordinates = encoders.GridCoordinates(dtype=dtype, name="coordinates")
        annotation_layer = keras.layers.Dense(
            annotation_dim, activation="relu", dtype=dtype, name="annotations"
        )
        images = keras.Input(image_shape, name="images")
        decoder_ids = keras.Input((None,), dtype="int32", name="decoder_token_ids")
        annotations, grid_shape = self._annotate(
            images, backbone_layers, coordinates, annotation_layer
        )
        embedding = keras.layers.Embedding(
            vocabulary_size,
            embedding_dim,
            mask_zero=True,
            dtype=dtype,
            name="embedding",
        )
        cell = ShowAttendTellCell(
            units,
            annotation_dim,
            score=score,
            attention=attention,
            gating=gating,
            feedback=feedback,
            num_locations=grid_shape[0] * grid_shape[1],
            seed=seed,
            dtype=dtype,
            name="decoder_cell",
        )
        decoder = ShowAttendTellDecoder(cell, dtype=dtype, name="decoder")
        output_h = keras.layers.Dense(embedding_dim, dtype=dtype, name="output_h")
        output_z = keras.layers.Dense(embedding_dim, dtype=dtype, name="output_z")
        output_dropout = keras.layers.Dropout(dropout, name="output_dropout")
        projection = keras.layers.Dense(vocabulary_size, dtype=dtype, name="logits")
        reinforce = None
        if attention == "hard":
            reinforce = ReinforceBaseline(
                reinforce_weight,
                entropy_weight,
                baseline_decay,
                dtype=dtype,
                name="reinforce",
            )
            reinforce.build()

        # === Functional graph ===
        # (the annotations were wired above: the cell needs the grid size)
        x = embedding(decoder_ids)
        outputs, coverage, log_prob, entropy = decoder(x, annotations)
        hidden = outputs[..., :units]
        context = outputs[..., units:]
        readout = keras.layers.Add(name="deep_output")(
            [x, output_h(hidden), output_z(context)]
        )
        readout = keras.layers.Activation("tanh", name="deep_output_tanh")(readout)
        logits = projection(output_dropout(readout))
        outputs = {
            "logits": logits,
            "coverage": coverage,
            "log_prob": log_prob,
            "entropy": entropy,
        }
        super().__init__(
            inputs={"images": images, "decoder_token_ids": decoder_ids},
            outputs=outputs,
            dtype=dtype,
            **kwargs,
        )

        # === Config ===
        self.vocabulary_size = vocabulary_size
        self.image_shape = image_shape
        self.backbone = backbone
        self.backbone_preprocessing = backbone_preprocessing
        self.freeze_backbone = freeze_backbone
        self.annotation_dim = annotation_dim
        self.embedding_dim = embedding_dim
        self.units = units
        self.score = score
        self.attention = attention
        self.gating = gating
        self.feedback = feedback
        self.attention_regularization = attention_regularization
        self.reinforce_weight = reinforce_weight
        self.entropy_weight = entropy_weight
        self.baseline_decay = baseline_decay
        self.dropout = dropout
        self.end_token_id = end_token_id
        self.seed = seed
        self.preprocessor = preprocessor
        self.backbone_layers = backbone_layers
        self.coordinates = coordinates
        self.annotation_layer = annotation_layer
        self.embedding = embedding
        self.decoder_cell = cell
        self.output_h = output_h
        self.output_z = output_z
        self.projection = projection
        self.reinforce = reinforce
        self.grid_shape = grid_shape

    # Training ----------------------------------------------------------------

    def compute_loss(
        self, x=None, y=None, y_pred=None, sample_weight=None, training=True
    ):
        """The compiled caption loss plus the attention terms.

        Soft attention adds `lambda * sum_i (1 - sum_t alpha_{t,i})^2`, hard
        attention the REINFORCE terms (`ReinforceBaseline`), both as the
        mean over the global batch, so mirrored replicas add up to one
        device's gradient.
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
        return super().compute_metrics(x, y, y_pred["logits"], sample_weight)

    def predict_step(self, data):
        return super().predict_step(data)["logits"]

    def _as_dataset(
        self,
        x,
        y=None,
        sample_weight=None,
        batch_size=None,
        shuffle=False,
        drop_remainder=False,
    ):
        # `Task` tells batched from unbatched data by the rank of the first
        # input, which for images is never 0: batch by the captions' rank.
        if not isinstance(x, tf.data.Dataset):
            if y is None or not _holds_strings(y):
                return super()._as_dataset(
                    x, y, sample_weight, batch_size, shuffle, drop_remainder
                )
            data = keras.utils.pack_x_y_sample_weight(x, list(y), sample_weight)
            dataset = self._batch(sliced(data, shuffle), batch_size, drop_remainder)
            return super()._as_dataset(dataset)
        strings = [s for s in tf.nest.flatten(x.element_spec) if s.dtype == tf.string]
        if strings and strings[0].shape.rank == 0:
            x = self._batch(x, batch_size, drop_remainder)
            batch_size = None
        return super()._as_dataset(
            x, y, sample_weight, batch_size, shuffle, drop_remainder
        )

    @staticmethod
    def _annotate(images, backbone_layers, coordinates, annotation_layer):
        x = images
        for layer in backbone_layers:
            x = layer(x)
        x = coordinates(x)
        height, width, channels = x.shape[1], x.shape[2], x.shape[3]
        x = ops.reshape(x, (-1, height * width, channels))
        return annotation_layer(x), (height, width)

    def encode(self, images):
        """Annotation vectors `(B, L, annotation_dim)` of prepared images."""
        return self._annotate(
            ops.convert_to_tensor(images, "float32"),
            self.backbone_layers,
            self.coordinates,
            self.annotation_layer,
        )[0]

    def next(self, prompt, cache, index):
        """One decoding step: `(logits, attention weights (B, L), cache)`.

        Reads the word at `index - 1` of `prompt`, advances the decoder
        state in `cache` (`ShowAttendTellCell.initial_state` of the
        annotations at the start) and returns the logits of the word at
        `index` with the step's attention over the grid.
        """
        token = ops.take(prompt, index - 1, axis=1)
        x = self.embedding(token)
        outputs, cache = self.decoder_cell(x, list(cache))
        hidden, context = outputs[:, : self.units], outputs[:, self.units :]
        readout = ops.tanh(x + self.output_h(hidden) + self.output_z(context))
        logits = self.projection(readout)
        return logits, self.decoder_cell.attention_weights(cache), cache

    def _prepare(self, images):
        if self.preprocessor is not None:
            return self.preprocessor(images)["images"]
        images = np.asarray(images)
        if images.ndim == 3:
            images = images[..., None]
        if images.dtype == np.uint8:
            images = images.astype("float32") / 255.0
        return images

    def generate(self, images, beam_width=3, max_length=None, length_penalty=0.0):
        """Token ids `(B, max_length + 1)` (starting with `[START]`)."""
        pre = self._require_preprocessor()
        beam_width, max_length, _ = decoding_options(
            beam_width, max_length, 1, pre.sequence_length
        )
        images = checked_images(images)
        cache = self.decoder_cell.initial_state(self.encode(self._prepare(images)))
        prompt = np.full((len(images), max_length + 1), pre.pad_id, "int32")
        prompt[:, 0] = pre.start_id
        tokens = make_search(beam_width, length_penalty=length_penalty)(
            self.next,
            ops.convert_to_tensor(prompt),
            cache=cache,
            index=1,
            stop_token_ids=[pre.end_id],
            pad_token_id=pre.pad_id,
        )
        return ops.convert_to_numpy(tokens)

    def _require_preprocessor(self):
        if self.preprocessor is None:
            raise ValueError("caption() needs a preprocessor to read the words.")
        return self.preprocessor

    def caption(
        self,
        images,
        beam_width=3,
        return_attention=False,
        max_length=None,
        length_penalty=0.0,
        batch_size=64,
    ):
        """Captions images.

        Args:
            images: array `(B, H, W[, C])` (uint8 in `[0, 255]` or floats in
                `[0, 1]`), or one image `(H, W[, C])`.
            beam_width: int. `1` decodes greedily. Defaults to `3`.
            return_attention: bool. Also return, per image, a dict with the
                generated `tokens` (the last one `[END]` when the caption
                ended) and their attention maps `weights`
                `(len(tokens), H_grid, W_grid)`.
            max_length: int. Longest caption in subwords; defaults to the
                preprocessor's sequence length.
            length_penalty: float. GNMT length penalty of the beam search.
                Defaults to `0.0`.
            batch_size: int. Images decoded together. Defaults to `64`.

        Returns:
            A list of strings (one string for one image), and the attention
            dicts when asked.
        """
        pre = self._require_preprocessor()
        beam_width, max_length, batch_size = decoding_options(
            beam_width, max_length, batch_size, pre.sequence_length
        )
        images = checked_images(images)
        single = images.ndim == 2 or (
            images.ndim == 3 and tuple(images.shape) == self.image_shape
        )
        if single:
            images = images[None]
        texts, attention = [], []
        for start in range(0, len(images), batch_size):
            chunk = images[start : start + batch_size]
            tokens = self.generate(chunk, beam_width, max_length, length_penalty)
            texts.extend(pre.detokenize(tokens[:, 1:]))
            if return_attention:
                attention.extend(self.attention_maps(chunk, tokens))
        if single:
            texts = texts[0]
            attention = attention[0] if attention else attention
        return (texts, attention) if return_attention else texts

    def attention_maps(self, images, tokens):
        """Re-runs the decoder on chosen tokens to collect its attention.

        Args:
            images: the images `(B, H, W[, C])`.
            tokens: int array `(B, T)` starting with `[START]` (as returned
                by `generate`).

        Returns:
            A list of dicts `{"tokens": [...], "weights": (n, h, w)}`, one
            per image, up to and including `[END]`.
        """
        pre = self._require_preprocessor()
        cache = self.decoder_cell.initial_state(self.encode(self._prepare(images)))
        tokens = np.asarray(tokens)
        rows = []
        for t in range(1, tokens.shape[1]):
            _, weights, cache = self.next(ops.convert_to_tensor(tokens), cache, t)
            rows.append(ops.convert_to_numpy(weights))
        rows = np.stack(rows, axis=1)
        height, width = self.grid_shape
        results = []
        for b in range(tokens.shape[0]):
            generated = tokens[b, 1:].tolist()
            if pre.end_id in generated:
                length = generated.index(pre.end_id) + 1
            else:
                length = len(generated)
            results.append(
                {
                    "tokens": pre.tokens(generated[:length]),
                    "weights": rows[b, :length].reshape(length, height, width),
                }
            )
        return results

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "vocabulary_size": self.vocabulary_size,
            "image_shape": list(self.image_shape),
            "backbone": self.backbone,
            "backbone_weights": None,
            "backbone_preprocessing": self.backbone_preprocessing,
            "freeze_backbone": self.freeze_backbone,
            "annotation_dim": self.annotation_dim,
            "embedding_dim": self.embedding_dim,
            "units": self.units,
            "score": self.score,
            "attention": self.attention,
            "gating": self.gating,
            "feedback": self.feedback,
            "attention_regularization": self.attention_regularization,
            "reinforce_weight": self.reinforce_weight,
            "entropy_weight": self.entropy_weight,
            "baseline_decay": self.baseline_decay,
            "dropout": self.dropout,
            "end_token_id": self.end_token_id,
            "seed": self.seed,
            "preprocessor": None
            if self.preprocessor is None
            else keras.saving.serialize_keras_object(self.preprocessor),
        }

    @classmethod
    def from_config(cls, config):
        # `get_config` saves `backbone_weights=None` (a preset holds every
        # weight): a config naming a file or "imagenet" would read any .h5
        # or download, so it is refused.
        weights = config.get("backbone_weights")
        if weights is not None:
            raise ValueError(
                "A ShowAttendTell config may not name backbone weights (a "
                "preset stores all weights). Received: "
                f"backbone_weights={weights!r:.80}"
            )
        return super().from_config(config)


def _holds_strings(captions):
    if isinstance(captions, tf.Tensor):
        return captions.dtype == tf.string
    captions = np.asarray(captions)
    return captions.dtype.kind in "OUS"


__all__ = ["CaptionPreprocessor", "ShowAttendTell"]
