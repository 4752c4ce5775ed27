"""`RecurrentAttentionModel`: classify images from a few glimpses.

The task around `RecurrentAttentionBackbone`: the paper's hybrid loss
(cross-entropy + REINFORCE + baseline), `fit` / `evaluate` / `predict` on
images as given, and the user verbs `classify` and `glimpses`.
"""

import os
import tempfile

import keras
import numpy as np
from keras import ops

from zoo.base.constructor_arguments import ArgumentsOf
from zoo.base.distributed_loss import global_batch_mean
from zoo.base.raw_inputs import checked_images
from zoo.classification.task import ClassificationTask
from zoo.data import fashion_mnist
from zoo.ram import canvas
from zoo.ram.backbone import RecurrentAttentionBackbone
from zoo.ram.evaluation import evaluate_classifier
from zoo.ram.export import export_classifier
from zoo.ram.preprocessor import ImagePreprocessor

# The weights of presets saved before the backbone existed sit at the top
# level; the backbone's functional graph holds them one level down.
_LEGACY_AGENT = "layers/recurrent_attention"
_BACKBONE = "layers/recurrent_attention_backbone"


@keras.saving.register_keras_serializable(package="zoo")
class RecurrentAttentionModel(ClassificationTask):
    """Recurrent Attention Model (RAM): classify an image from a few glimpses.

    A functional `Task` around a `RecurrentAttentionBackbone`. Its outputs
    are a dict (`logits`, `locations`, `log_probs`, `baselines`); `compile`
    a classification loss on the logits (e.g.
    `SparseCategoricalCrossentropy(from_logits=True)`) and `compute_loss`
    adds the REINFORCE and baseline terms of the hybrid loss:

    ```
    R      = 1[argmax logits == y]               # reward of the sampled path
    R_t    = discount**(T - 1 - t) * R           # return seen at step t
    L      = CE(y, logits)
             - reinforce_weight * mean_b sum_t log pi(l_t) * sg(R_t - b_t)
             + mean_b sum_t (R_t - b_t)**2
    ```

    (`sg` is `stop_gradient`: the baseline is trained by its squared error
    only, and only the policy by the REINFORCE term.) Under `tf.distribute`
    the extra terms are averaged over the replica's batch and divided by the
    number of replicas, as Keras scales compiled losses, so the summed
    gradients are those of the global-batch mean; sampling differs per
    replica. `compile` metrics (e.g. `"accuracy"`) see the logits; the model
    also reports `reward`, `reinforce_loss` and `baseline_loss`.

    `fit` / `evaluate` / `predict` take images as uint8 (0-255) or float
    (0-1), `(batch, height, width)` or with a channel axis, grayscale or RGB
    (checked by the `ImagePreprocessor`); any image size works at
    inference, since glimpse locations are relative to the image, but a
    preset classifies well only near the canvas size it was trained on
    (`training_canvas`; `classify`, `glimpses` and `look` warn with a
    `zoo.ram.canvas.CanvasSizeWarning` when a side is outside `[canvas / 2,
    canvas * 1.25]`: 60x60 presets lose 13-36 points at 90x90). `predict`
    returns the logits, `classify(images)` the class names and
    probabilities, `glimpses(images)` where the agent looked; these user
    verbs also take floats in `[0, 255]` (the Keras convention, read so
    when their maximum exceeds 1: `zoo.base.raw_inputs.checked_images`).

    Args:
        *args, **kwargs: the `RecurrentAttentionBackbone` arguments: those
            of its `RecurrentAttention` layer (`num_classes`,
            `num_glimpses`, `patch_size`, `num_scales`, `scale_factor`,
            `glimpse_units`, `location_units`, `glimpse_output_units`,
            `units`, `cell`, `location_std`, `test_samples`, `seed`,
            `reinforce_core`, `policy_learning_rate_scale`,
            `random_first_glimpse`, `glimpse_filters`), in its order and
            with its defaults, and `channels` (1 or 3, default 1). They
            build the backbone and are read back as attributes
            (`model.num_glimpses`). Left out, or agreeing with it, when
            `backbone` is given. Also `keras.Model`'s `name` and `trainable`;
            any other name raises a `TypeError`.
        backbone: optional `RecurrentAttentionBackbone` to build on.
            Defaults to `None`.
        discount: float in (0, 1]. Reward discount per step. Defaults to `1`.
        reinforce_weight: float. Weight of the REINFORCE term. Defaults to `1`.
        class_names: optional sequence of `num_classes` str, the name of
            each class (what `classify` returns). Defaults to `None`.
        preprocessor: optional `ImagePreprocessor`; defaults to one for
            `channels`.
        dtype: optional dtype policy (e.g. `"mixed_bfloat16"`). Defaults to
            the backbone's (the global policy).

    Example:
    >>> import keras
    >>> from zoo.data import fashion_mnist
    >>> model = RecurrentAttentionModel(
    ...     num_glimpses=4, patch_size=8, units=32, glimpse_units=16,
    ...     location_units=16, glimpse_output_units=32,
    ...     class_names=fashion_mnist.CLASS_NAMES)
    >>> model.compile("adam", keras.losses.SparseCategoricalCrossentropy(
    ...     from_logits=True), metrics=["accuracy"])
    >>> images, labels = fashion_mnist.load("train", sample=True)
    >>> history = model.fit(images[:64], labels[:64], batch_size=32, verbose=0)
    >>> sorted(history.history)
    ['accuracy', 'baseline_loss', 'loss', 'reinforce_loss', 'reward']
    >>> model.predict(images[:2], verbose=0).shape  # logits
    (2, 10)
    >>> names, probabilities = model.classify(images[:2])
    >>> names.shape, probabilities.shape
    ((2, 1), (2, 1))
    >>> model.glimpses(images[:2]).shape  # (y, x) of each glimpse
    (2, 4, 2)

    Reference:
        Mnih, Heess, Graves and Kavukcuoglu, 2014, "Recurrent Models of
        Visual Attention" (NIPS).
    """

    backbone_arguments = ArgumentsOf(RecurrentAttentionBackbone)

    def __init__(
        self,
        *args,
        backbone=None,
        discount=1.0,
        reinforce_weight=1.0,
        class_names=None,
        preprocessor=None,
        dtype=None,
        **kwargs,
    ):
        if not isinstance(discount, (int, float)) or not 0 < discount <= 1:
            raise ValueError(
                f"`discount` must be in (0, 1]. Received: discount={discount!r}"
            )
        # === Layers ===
        backbone = self.build_backbone(args, backbone, kwargs, dtype, name="backbone")
        class_names = _checked_class_names(class_names, backbone.num_classes)
        # === Functional graph ===
        images = keras.Input((None, None, backbone.channels), name="images")
        outputs = backbone(images)
        if preprocessor is None:
            preprocessor = ImagePreprocessor(
                backbone.channels, name="image_preprocessor"
            )
        super().__init__(
            inputs=images,
            outputs=outputs,
            backbone=backbone,
            preprocessor=preprocessor,
            dtype=dtype,
            **kwargs,
        )

        # === Config ===
        self.discount = float(discount)
        self.reinforce_weight = float(reinforce_weight)
        self._class_names = class_names
        self.reward_tracker = keras.metrics.Mean(name="reward")
        self.reinforce_tracker = keras.metrics.Mean(name="reinforce_loss")
        self.baseline_tracker = keras.metrics.Mean(name="baseline_loss")

    def call(self, images, training=False):
        # The functional graph's input is float32; the backbone keeps an
        # image as given (e.g. uint8), so neither this call nor
        # `predict_on_batch` casts or copies every pixel.
        return self.backbone(images, training=training)

    @property
    def class_names(self):
        """The name of each class, or `None` when the model has none.

        Given as `class_names` when the model was built. Presets saved before
        models stored their class names fall back to the names of the data
        their metadata says they were trained on (Fashion-MNIST).

        Example:
        >>> RecurrentAttentionModel(num_classes=2, num_glimpses=1,
        ...     class_names=["cat", "dog"]).class_names
        ('cat', 'dog')
        """
        if self._class_names is not None:
            return self._class_names
        return _names_from_metadata(getattr(self, "preset_metadata", None), self)

    @class_names.setter
    def class_names(self, value):
        self._class_names = _checked_class_names(value, self.num_classes)

    @property
    def training_canvas(self):
        """The side of the square canvases the preset learned, or `None`.

        From the preset's metadata (`zoo.ram.canvas.training_canvas`);
        `None` for a model built in Python. Images with a side outside
        `zoo.ram.canvas.good_sides(training_canvas)` are classified poorly,
        and the user verbs warn about them.

        Example:
        >>> RecurrentAttentionModel(num_classes=2, num_glimpses=1).training_canvas
        >>> RecurrentAttentionModel.from_preset(
        ...     "ram_fashion_mnist_translated_seeking_annealed").training_canvas
        60
        """
        return canvas.training_canvas(getattr(self, "preset_metadata", None))

    def _user_images(self, images, stacklevel):
        """Images as the user verbs take them: checked, warned about if far.

        A batch `(batch, height, width, c)` as NumPy uint8 or float32 in
        `[0, 1]` (floats in `[0, 255]` divided by 255). `stacklevel` is
        that of the warning, counted from here (`2`: this method's caller).
        """
        images = checked_images(self.preprocessor.standardize(images))
        canvas.warn_if_far(
            images.shape[1],
            images.shape[2],
            self.training_canvas,
            stacklevel=stacklevel + 1,
        )
        return images

    # Loss and metrics --------------------------------------------------------

    def compute_loss(
        self, x=None, y=None, y_pred=None, sample_weight=None, training=True
    ):
        """The hybrid loss: the compiled loss on the logits + REINFORCE + baseline.

        The reward of each image is 1 when its class is right (see the class
        docstring for the formula); the reward, the REINFORCE term and the
        baseline's squared error are logged as `reward`, `reinforce_loss`
        and `baseline_loss`. With `y=None` only the compiled loss is
        returned.

        Example:
        >>> import numpy as np
        >>> model = RecurrentAttentionModel(num_classes=3, num_glimpses=2)
        >>> cross_entropy = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        >>> model.compile(loss=cross_entropy)
        >>> images, labels = np.zeros((4, 28, 28, 1), "float32"), np.array([0, 1, 2, 1])
        >>> y_pred = model(images)
        >>> loss = model.compute_loss(images, labels, y_pred)
        >>> predicted = ops.convert_to_numpy(y_pred["logits"]).argmax(-1)
        >>> bool(np.isclose(model.reward_tracker.result(), (predicted == labels).mean()))
        True
        >>> extra = model.reinforce_tracker.result() + model.baseline_tracker.result()
        >>> bool(np.isclose(loss, cross_entropy(labels, y_pred["logits"]) + extra))
        True
        """
        logits = y_pred["logits"]
        loss = super().compute_loss(x, y, logits, sample_weight, training=training)
        if y is None:
            return loss
        labels = ops.reshape(ops.cast(y, "int32"), (-1,))
        predicted = ops.cast(ops.argmax(logits, axis=-1), "int32")
        reward = ops.cast(ops.equal(predicted, labels), "float32")
        log_probs, baselines = y_pred["log_probs"], y_pred["baselines"]
        steps = self.num_glimpses - 1
        self.reward_tracker.update_state(reward)
        if steps == 0:
            return loss
        discounts = self.discount ** np.arange(steps - 1, -1, -1, dtype="float32")
        returns = reward[:, None] * ops.convert_to_tensor(discounts)[None, :]
        advantage = ops.stop_gradient(returns - baselines)
        reinforce = -ops.sum(log_probs * advantage, axis=1)
        baseline_loss = ops.sum(ops.square(returns - baselines), axis=1)
        self.reinforce_tracker.update_state(ops.mean(reinforce))
        self.baseline_tracker.update_state(ops.mean(baseline_loss))
        extra = self.reinforce_weight * reinforce + baseline_loss
        return loss + ops.cast(global_batch_mean(extra), loss.dtype)

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        """Keras's compiled metrics on the `"logits"`, and the loss trackers.

        Example:
        >>> import numpy as np
        >>> model = RecurrentAttentionModel(num_classes=3, num_glimpses=2)
        >>> model.compile(loss=keras.losses.SparseCategoricalCrossentropy(
        ...     from_logits=True), metrics=["accuracy"])
        >>> images, labels = np.zeros((4, 28, 28, 1), "float32"), np.array([0, 1, 2, 1])
        >>> y_pred = model(images)
        >>> logs = model.compute_metrics(images, labels, y_pred)
        >>> sorted(logs)
        ['accuracy', 'baseline_loss', 'loss', 'reinforce_loss', 'reward']
        >>> predicted = ops.convert_to_numpy(y_pred["logits"]).argmax(-1)
        >>> bool(np.isclose(logs["accuracy"], (predicted == labels).mean()))
        True
        """
        return super().compute_metrics(x, y, y_pred["logits"], sample_weight)

    #: `predict` keeps only the `"logits"` output.
    prediction_key = "logits"

    def predict(self, x, batch_size=None, **kwargs):
        """Class logits `(batch, num_classes)` of images as `fit` takes them.

        Args:
            x: images `(batch, height, width[, channels])`, uint8 (0-255) or
                float (0-1), any size, gray or RGB; or a `tf.data.Dataset`
                of them.
            batch_size: optional int. Defaults to `32`.
            **kwargs: `keras.Model.predict` arguments (e.g. `verbose`).

        Returns:
            NumPy float32 logits `(batch, num_classes)`.

        Raises:
            ValueError: an image (a float NumPy array's) holds NaN or
                infinite pixels, or gave non-finite logits, rather than a
                class that `argmax` would read from NaN.

        Example:
        >>> import numpy as np
        >>> model = RecurrentAttentionModel(num_classes=3, num_glimpses=2)
        >>> model.predict(np.zeros((2, 28, 28), "uint8"), verbose=0).shape
        (2, 3)
        """
        if isinstance(x, np.ndarray) and np.issubdtype(x.dtype, np.floating):
            # Checked here: TensorFlow's optimized graph (oneDNN's fused
            # MatMul + ReLU) turns NaN into 0, so NaN pixels need not reach
            # the logits.
            flat = x.reshape(len(x), -1)
            bad = np.flatnonzero(~np.all(np.isfinite(flat), axis=-1))
            if bad.size:
                raise ValueError(
                    f"Images {bad[:10].tolist()} hold NaN or infinite pixels: "
                    "no class can be read from them."
                )
        logits = super().predict(x, batch_size=batch_size, **kwargs)
        bad = np.flatnonzero(~np.all(np.isfinite(logits), axis=-1))
        if bad.size:
            raise ValueError(
                f"Images {bad[:10].tolist()} gave non-finite logits: they hold "
                "NaN or infinite pixels where the agent looked."
            )
        return logits

    # Inference -------------------------------------------------------------

    def classify(self, images, top_k=1, batch_size=None):
        """The `top_k` most probable class names of each image.

        Args:
            images: images `(batch, height, width[, channels])` as `predict`
                takes them (uint8 0-255 or float 0-1, any size, gray or RGB),
                or floats in `[0, 255]`. Sides far from `training_canvas`
                give a `CanvasSizeWarning`.
            top_k: int in `[1, num_classes]`. Classes returned per image,
                most probable first. Defaults to `1`.
            batch_size: optional int. Defaults to `32`.

        Returns:
            `(names, probabilities)`: a NumPy str array `(batch, top_k)` of
            class names and a float32 array `(batch, top_k)` of their
            probabilities.

        Raises:
            ValueError: a bad `top_k`, bad `images`, or a model without
                class names (build it with `class_names=`).
            TypeError: `images` is not an array of numbers.

        Example:
        >>> import numpy as np
        >>> model = RecurrentAttentionModel(
        ...     num_classes=3, num_glimpses=2, class_names=["a", "b", "c"])
        >>> names, probabilities = model.classify(
        ...     np.zeros((2, 28, 28), "uint8"), top_k=3)
        >>> sorted(names[0].tolist()), bool(np.all(np.diff(probabilities[0]) <= 0))
        (['a', 'b', 'c'], True)
        >>> float(round(probabilities[0].sum(), 4))
        1.0
        """
        if isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer)):
            raise TypeError(f"`top_k` must be an int. Received: top_k={top_k!r}")
        if not 1 <= top_k <= self.num_classes:
            raise ValueError(
                f"`top_k` must be in [1, num_classes={self.num_classes}]. "
                f"Received: top_k={top_k}"
            )
        names = self.class_names
        if names is None:
            raise ValueError(
                "This model has no class names: build it with `class_names=` "
                "(one str per class), or pass them to `from_preset(..., "
                "class_names=[...])`."
            )
        images = self._user_images(images, stacklevel=3)
        logits = self.predict(images, batch_size=batch_size, verbose=0)
        probabilities = ops.convert_to_numpy(ops.softmax(logits, axis=-1))
        best = np.argsort(-probabilities, axis=-1, kind="stable")[:, :top_k]
        names = np.asarray(names)[best]
        return names, np.take_along_axis(probabilities, best, axis=-1)

    @classmethod
    def preset_note(cls, metadata):
        """The image sides a preset is good for, from its training canvas.

        Example:
        >>> RecurrentAttentionModel.preset_note(
        ...     {"data": {"variant": "cluttered", "canvas_size": 100}})
        'trained on 100x100 canvases: good for image sides 50 to 125'
        """
        return canvas.preset_note(metadata)

    def write_export(self, filepath):
        """Writes the glimpse classifier's SavedModel (`export_classifier`).

        `model.export(path)` calls it (see `Task.export` for a run).

        Example:
        >>> import os
        >>> import tempfile
        >>> model = RecurrentAttentionModel(
        ...     num_classes=3, num_glimpses=2, patch_size=4, glimpse_units=4,
        ...     location_units=4, glimpse_output_units=8, units=8, seed=0)
        >>> path = model.write_export(tempfile.mkdtemp())
        >>> os.path.isfile(os.path.join(path, "saved_model.pb"))
        True
        """
        return export_classifier(self, filepath)

    def evaluate_split(
        self, split="test", limit=None, beam_width=None, sword_path=None, data_path=None
    ):
        """The error (%) on the preset's images (`evaluate_classifier`).

        See `Task.evaluate_split` for the arguments.

        Example:
        >>> model = RecurrentAttentionModel(num_classes=3, num_glimpses=2)
        >>> model.evaluate_split("validation")
        Traceback (most recent call last):
        ...
        ValueError: `split` must be 'train' or 'test' (Fashion-MNIST has no validation split). Received: split='validation'
        """
        return evaluate_classifier(self, split, limit, data_path)

    def glimpses(self, images, batch_size=256):
        """Returns where the agent looks: `(batch, num_glimpses, 2)` `(y, x)`.

        Args:
            images: images as accepted by `fit` (uint8 or float, any size).
            batch_size: int. Defaults to `256`.

        Returns:
            NumPy float32 array of locations in `[-1, 1]` (`(-1, -1)` is the
            top-left corner), the first the image centre; with
            `test_samples > 1`, one sampled path.

        Example:
        >>> import numpy as np
        >>> model = RecurrentAttentionModel(num_classes=3, num_glimpses=2)
        >>> locations = model.glimpses(np.zeros((1, 28, 28), "uint8"))
        >>> locations.shape, locations[0, 0].tolist()  # the first: the centre
        ((1, 2, 2), [0.0, 0.0])
        """
        return self._look(images, None, batch_size)[0]

    def look(self, images, first_locations=None, batch_size=256):
        """Where the agent looks and what it concludes, as at inference.

        Args:
            images: images as accepted by `fit` (uint8 or float, any size).
            first_locations: optional `(batch, 2)` `(y, x)` in `[-1, 1]`:
                each image's first glimpse (default: the centre), e.g. to
                see whether the policy reaches the item from anywhere.
            batch_size: int. Defaults to `256`.

        Returns:
            `(locations, logits)` as NumPy arrays, `(batch, num_glimpses, 2)`
            and `(batch, num_classes)`.

        Example:
        >>> import numpy as np
        >>> model = RecurrentAttentionModel(num_classes=3, num_glimpses=2)
        >>> locations, logits = model.look(
        ...     np.zeros((2, 28, 28), "uint8"), first_locations=[[0.5, 0.5], [-1, 0]])
        >>> locations.shape, logits.shape, locations[:, 0].tolist()
        ((2, 2, 2), (2, 3), [[0.5, 0.5], [-1.0, 0.0]])
        """
        return self._look(images, first_locations, batch_size)

    def _look(self, images, first_locations, batch_size):
        """`look`, called by it and `glimpses` (one frame below the user)."""
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(
                f"`batch_size` must be a positive int. Received: batch_size={batch_size!r}"
            )
        standardized = self._user_images(images, stacklevel=4)
        count = int(standardized.shape[0])
        if first_locations is not None:
            first_locations = np.asarray(first_locations, "float32")
            if first_locations.shape != (count, 2):
                raise ValueError(
                    f"`first_locations` must be (batch, 2) = ({count}, 2), one "
                    "(y, x) per image. Received: "
                    f"first_locations.shape={first_locations.shape}"
                )
        agent = self.backbone.recurrent_attention
        locations, logits = [], []
        for start in range(0, count, batch_size):
            first = None
            if first_locations is not None:
                first = first_locations[start : start + batch_size]
            outputs = agent(
                standardized[start : start + batch_size], first_locations=first
            )
            locations.append(ops.convert_to_numpy(outputs["locations"]))
            logits.append(ops.convert_to_numpy(outputs["logits"]))
        return np.concatenate(locations), np.concatenate(logits)

    # Saving ------------------------------------------------------------------

    def load_weights(self, filepath, skip_mismatch=False, **kwargs):
        """Loads weights, also from presets saved before the backbone existed.

        Those files hold the agent's weights at `layers/recurrent_attention`;
        they are copied under the backbone's path into a temporary file
        first. Other files load as `keras.Model.load_weights` does.

        Args:
            filepath: str or path-like. A weights file.
            skip_mismatch: bool. As in `keras.Model.load_weights`. Defaults
                to `False`.
            **kwargs: other `keras.Model.load_weights` arguments.

        Example:
        >>> import tempfile
        >>> model = RecurrentAttentionModel(num_classes=3, num_glimpses=2)
        >>> copy = RecurrentAttentionModel(num_classes=3, num_glimpses=2)
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     path = os.path.join(folder, "model.weights.h5")
        ...     model.save_weights(path)
        ...     copy.load_weights(path)
        >>> all(np.array_equal(a, b)
        ...     for a, b in zip(model.get_weights(), copy.get_weights()))
        True

        A shipped preset's weights file:

        >>> from zoo.base.task import list_presets
        >>> shipped = list_presets()["ram_fashion_mnist_translated_seeking_annealed"]
        >>> old = RecurrentAttentionModel.from_preset(shipped, load_weights=False)
        >>> fresh = old.get_weights()
        >>> old.load_weights(os.path.join(shipped, "model.weights.h5"))
        >>> any(np.array_equal(a, b)  # every weight was read
        ...     for a, b in zip(fresh, old.get_weights()))
        False
        """
        filepath = os.fspath(filepath)
        if not filepath.endswith(".weights.h5") or not _legacy_layout(filepath):
            return super().load_weights(filepath, skip_mismatch=skip_mismatch, **kwargs)
        with tempfile.TemporaryDirectory(prefix="ram-weights-") as folder:
            moved = os.path.join(folder, "model.weights.h5")
            _move_agent_under_backbone(filepath, moved)
            return super().load_weights(moved, skip_mismatch=skip_mismatch, **kwargs)

    def get_config(self):
        config = super().get_config()
        names = config["class_names"]
        config["class_names"] = None if names is None else list(names)
        return config


def _checked_class_names(class_names, num_classes):
    """`class_names` as a tuple of `num_classes` str (or None), else an error."""
    if class_names is None:
        return None
    if isinstance(class_names, (str, bytes)) or not hasattr(class_names, "__len__"):
        raise TypeError(
            "`class_names` must be a sequence of str, one per class. "
            f"Received: class_names={class_names!r:.80}"
        )
    names = tuple(class_names)
    if not all(isinstance(name, str) for name in names):
        raise TypeError(
            "`class_names` must hold str only. "
            f"Received: class_names={class_names!r:.80}"
        )
    if len(names) != num_classes:
        raise ValueError(
            f"`class_names` must name the {num_classes} classes (num_classes). "
            f"Received: {len(names)} names, class_names={class_names!r:.80}"
        )
    return names


def _names_from_metadata(metadata, model):
    """Fashion-MNIST's names for an older preset trained on it, else None."""
    if not isinstance(metadata, dict) or model.num_classes != 10:
        return None
    described = " ".join(
        str(metadata.get(key, "")) for key in ("task", "data", "command")
    )
    if "fashion" in described.lower().replace("_", "-"):
        return tuple(fashion_mnist.CLASS_NAMES)
    return None


def _legacy_layout(path):
    """Whether a `.weights.h5` file holds the agent at the top level."""
    import h5py

    with h5py.File(path, "r") as f:
        return _LEGACY_AGENT in f and _BACKBONE not in f


def _move_agent_under_backbone(source, destination):
    """Writes `source` with its agent under the backbone's path."""
    import h5py

    with h5py.File(source, "r") as old, h5py.File(destination, "w") as new:
        for key, value in old.attrs.items():
            new.attrs[key] = value
        for name in old:
            old.copy(old[name], new, name=name)
        backbone = new.require_group(_BACKBONE)
        backbone.require_group("vars")
        backbone.require_group("layers/input_layer/vars")
        new.move(_LEGACY_AGENT, f"{_BACKBONE}/layers/recurrent_attention")
