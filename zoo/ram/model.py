"""`RecurrentAttentionModel`: the glimpse agent of Mnih et al. (2014).

At each of `num_glimpses` steps the agent reads a small multi-resolution
glimpse around a location (`keras_attention.layers.GlimpseNetwork`), updates
its recurrent state (the core network `f_h`), and a Gaussian location policy
(`f_l`) picks where to look next. After the last glimpse the action network
`f_a` classifies the image. The location policy is not differentiable, so it
is trained with REINFORCE (reward 1 for a correct classification) with a
learned baseline `b_t`, next to the usual cross-entropy: the paper's hybrid
loss, computed in `compute_loss`, so `compile` / `fit` / `evaluate` work as
for any Keras model, under `tf.distribute` too.

Only `num_glimpses * sum_k (patch_size * scale_factor**k)**2` pixels are ever
read, so inference cost does not grow with the image.
"""

import math

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from keras_attention.layers import GlimpseNetwork
from zoo.task import Task, given_dataset, global_batch_mean, sliced

CELLS = ("rnn", "lstm")


def _positive_int(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"`{name}` must be a positive int. Received: {name}={value!r}")
    return value


def replica_normal(shape, seed_generator, dtype="float32"):
    """Standard normal noise that differs on every `tf.distribute` replica.

    A `keras.random.SeedGenerator` holds a mirrored variable under a
    `MirroredStrategy`, so every replica would draw the same seed and the
    same noise; the replica id is folded into the seed here.

    Args:
        shape: shape of the noise.
        seed_generator: a `keras.random.SeedGenerator`.
        dtype: float dtype. Defaults to `"float32"`.

    Returns:
        A tensor of standard normal samples.
    """
    seed = ops.cast(seed_generator.next(), "int64")
    context = tf.distribute.get_replica_context()
    if context is not None:
        replica = ops.cast(context.replica_id_in_sync_group, "int64")
        seed = seed + ops.stack([replica * 1_000_003, replica])
    return tf.random.stateless_normal(shape, seed=seed, dtype=dtype)


LUMA = (0.2989, 0.5870, 0.1140)  # ITU-R 601, as tf.image.rgb_to_grayscale


def to_model_pixels(pixels, integer, channels):
    """Model values of pixels already gathered from an image as given.

    Integer images (e.g. uint8) are scaled from `[0, 255]` to `[0, 1]`;
    float images are taken as already in `[0, 1]`. RGB becomes grayscale
    (ITU-R 601 luma) for a one-channel model and grayscale is repeated for a
    three-channel one. Every step is a per-pixel linear map, so applying it
    to the average-pooled glimpse equals applying it to the image first.

    Args:
        pixels: float tensor `(..., c)`, `c` in {1, 3}.
        integer: bool. Whether the image they came from has an integer dtype.
        channels: int. Channels the model expects, 1 or 3.

    Returns:
        `pixels` as `(..., channels)` in `[0, 1]`.

    Example:
    >>> rgb = np.full((1, 2, 2, 3), 255.0, "float32")
    >>> gray = to_model_pixels(rgb, integer=True, channels=1)
    >>> tuple(gray.shape), round(float(gray[0, 0, 0, 0]), 4)
    ((1, 2, 2, 1), 0.9999)
    """
    if integer:
        pixels = pixels / ops.cast(255.0, pixels.dtype)
    have = pixels.shape[-1]
    if have == channels:
        return pixels
    if channels == 3 and have in (1, None):
        # Gray repeated; an unknown count (a retraced function) is 1 or 3.
        return pixels * ops.ones((3,), pixels.dtype)
    if channels == 1 and have == 3:
        return ops.sum(pixels * ops.cast(LUMA, pixels.dtype), axis=-1, keepdims=True)
    if channels == 1 and have is None:
        count = ops.shape(pixels)[-1]
        weights = ops.where(count == 3, LUMA, (1.0, 0.0, 0.0))
        weights = ops.cast(ops.slice(weights, [0], [count]), pixels.dtype)
        return ops.sum(pixels * weights, axis=-1, keepdims=True)
    raise ValueError(
        f"Images with {have} channels cannot feed a {channels}-channel model. "
        f"Received: pixels.shape={tuple(pixels.shape)}"
    )


@keras.saving.register_keras_serializable(package="zoo")
class ImagePreprocessor(keras.layers.Layer):
    """Checks image batches of any dtype and colour layout for the model.

    `(batch, height, width)` gets a channel axis; the channel count must be
    1 or 3. Nothing else happens to the image: it is not cast, scaled or
    converted, so the cost does not grow with its size. The agent converts
    only the pixels its glimpses read (`to_model_pixels`: integer values
    `[0, 255]` -> `[0, 1]`, float values taken as `[0, 1]`, RGB <-> gray).
    Runs inside `tf.data` (TensorFlow ops).

    Args:
        channels: int. Channels the model expects, 1 or 3. Defaults to `1`.
        **kwargs: base layer arguments.

    Call arguments:
        x: images `(batch, height, width)` or `(batch, height, width, c)`,
            `c` in {1, 3}, any numeric dtype.
        y: optional labels, passed through.
        sample_weight: optional sample weights, passed through.

    Returns:
        `x` as `(batch, height, width, c)` in its own dtype, packed with `y`
        and `sample_weight` as `keras.utils.pack_x_y_sample_weight` does.

    Example:
    >>> images = ImagePreprocessor()(np.zeros((2, 28, 28), "uint8"))
    >>> tuple(images.shape), images.dtype.name
    ((2, 28, 28, 1), 'uint8')
    """

    def __init__(self, channels=1, **kwargs):
        super().__init__(**kwargs)
        if channels not in (1, 3):
            raise ValueError(
                f"`channels` must be 1 or 3. Received: channels={channels!r}"
            )
        self.channels = channels

    def standardize(self, images):
        """Returns `(batch, height, width, c)` images, dtype and values kept."""
        images = tf.convert_to_tensor(images)
        if images.shape.rank == 3:
            images = images[..., None]
        if images.shape.rank != 4:
            raise ValueError(
                "Expected images (batch, height, width[, channels]). "
                f"Received: shape={images.shape}"
            )
        if not (images.dtype.is_integer or images.dtype.is_floating):
            raise TypeError(
                "Expected images of an integer or float dtype. "
                f"Received: dtype={images.dtype.name}"
            )
        if images.shape[-1] not in (1, 3):
            raise ValueError(
                f"Images with {images.shape[-1]} channels cannot feed a "
                f"{self.channels}-channel model (1 or 3 channels). "
                f"Received: shape={images.shape}"
            )
        return images

    def call(self, x, y=None, sample_weight=None):
        return keras.utils.pack_x_y_sample_weight(self.standardize(x), y, sample_weight)

    def get_config(self):
        config = super().get_config()
        config.update(channels=self.channels)
        return config


@keras.saving.register_keras_serializable(package="zoo")
class LocationPolicy(keras.layers.Layer):
    """Location network `f_l`: a Gaussian policy over the next glimpse location.

    The mean is `tanh(W h)`, so it lies in `[-1, 1]^2`; the standard deviation
    is fixed. In training the location is sampled, `l ~ N(mean, std^2)`, and
    cut off from the graph (`stop_gradient`): the next glimpse network sees
    it, but no gradient flows back through it. Only the log-probability
    `log pi(l | h)` carries gradient, to `W` (REINFORCE). By default the
    policy reads the core state through a `stop_gradient` too, so the core
    network is trained by the classification loss alone (the policy-gradient
    estimate is noisy); with `stop_hidden_gradient=False` the REINFORCE
    gradient also reaches the core, as in the paper.
    The location is clipped to `[-1, 1]` after its log-probability is taken.
    At inference (`training=False`) the location is the mean.

    Args:
        std: float > 0. Standard deviation of the policy. Defaults to `0.1`.
        seed: optional int seeding the sampler.
        stop_hidden_gradient: bool. Keep the REINFORCE gradient out of
            `hidden`. Defaults to `True`.
        **kwargs: base layer arguments.

    Call arguments:
        hidden: core state `(batch, units)`.
        training: bool. Sample (True) or take the mean (False).

    Returns:
        `(location, log_prob)`: `(batch, 2)` and `(batch,)`.

    Example:
    >>> policy = LocationPolicy(std=0.1, seed=0)
    >>> location, log_prob = policy(np.ones((4, 8), "float32"), training=True)
    >>> tuple(location.shape), tuple(log_prob.shape)
    ((4, 2), (4,))

    Reference:
        Mnih et al., 2014, "Recurrent Models of Visual Attention", sec. 3.2.
    """

    def __init__(self, std=0.1, seed=None, stop_hidden_gradient=True, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(std, (int, float)) or std <= 0:
            raise ValueError(f"`std` must be a positive float. Received: std={std!r}")
        self.std = float(std)
        self.seed = seed
        self.stop_hidden_gradient = bool(stop_hidden_gradient)
        self.seed_generator = keras.random.SeedGenerator(seed, name="sampler")

    def build(self, hidden_shape):
        self.mean_dense = keras.layers.Dense(
            2, activation="tanh", dtype=self.dtype_policy, name="mean"
        )
        self.mean_dense.build(hidden_shape)

    def call(self, hidden, training=False):
        if self.stop_hidden_gradient:
            hidden = ops.stop_gradient(hidden)
        mean = ops.cast(self.mean_dense(hidden), "float32")
        location = mean
        if training:
            noise = replica_normal(ops.shape(mean), self.seed_generator)
            location = mean + self.std * noise
        location = ops.stop_gradient(location)
        z = (location - mean) / self.std
        log_prob = ops.sum(
            -0.5 * ops.square(z) - math.log(self.std) - 0.5 * math.log(2 * math.pi),
            axis=-1,
        )
        return ops.clip(location, -1.0, 1.0), log_prob

    def compute_output_spec(self, hidden, training=False):
        batch = hidden.shape[0]
        return (
            keras.KerasTensor((batch, 2), "float32"),
            keras.KerasTensor((batch,), "float32"),
        )

    def get_config(self):
        config = super().get_config()
        config.update(
            std=self.std,
            seed=self.seed,
            stop_hidden_gradient=self.stop_hidden_gradient,
        )
        return config


@keras.saving.register_keras_serializable(package="zoo")
class RecurrentAttention(keras.layers.Layer):
    """The RAM agent unrolled over `num_glimpses` steps.

    ```
    l_0   = (0, 0)                              # the image centre
    g_t   = f_g(x, l_{t-1})                     # GlimpseNetwork
    h_t   = f_h(h_{t-1}, g_t)                   # ReLU RNN or LSTM
    l_t   ~ N(tanh(W_l h_t), std^2)             # LocationPolicy, t < T
    b_t   = W_b h_t + c                         # baseline (stop-gradient h_t)
    y     = f_a(h_T)                            # class logits
    ```

    Args:
        num_classes: int. Classes of the action network.
        num_glimpses: int. Glimpses `T`. Defaults to `6`.
        patch_size, num_scales, scale_factor: the retina
            (`GlimpseSensor`). Default to `8`, `1`, `2`.
        glimpse_units, location_units, glimpse_output_units: sizes of
            `h_g`, `h_l` and `g` (`GlimpseNetwork`). Default to `128`, `128`,
            `256`.
        units: int. Core state size. Defaults to `256`.
        cell: str. `"rnn"` (ReLU units, as in the paper) or `"lstm"`.
            Defaults to `"rnn"`.
        location_std: float. Policy standard deviation. Defaults to `0.1`.
        test_samples: int. At inference, with 1 the agent follows the policy
            mean; with `M > 1` it samples `M` glimpse paths per image and
            averages their class probabilities. Defaults to `1`.
        seed: optional int seeding the location sampler.
        reinforce_core: bool. Let the REINFORCE gradient reach the core
            network (and the glimpse network) through the policy's input,
            as in the paper; by default only the classification loss trains
            them. Defaults to `False`.
        **kwargs: base layer arguments.

    Call arguments:
        images: `(batch, height, width[, channels])`, any height and width,
            1 or 3 channels; integer (0-255) or float (0-1) values, read as
            given: only the gathered pixels are cast and converted.
        training: bool. Sample locations (True) or follow the mean.

    Returns:
        A dict: `logits` `(batch, num_classes)` (log of the averaged
        probabilities when `test_samples > 1`), `locations` `(batch, T, 2)`
        (the `(y, x)` of each glimpse, in `[-1, 1]`), `log_probs`
        `(batch, T - 1)` (log-probability of each sampled location) and
        `baselines` `(batch, T - 1)`. With `test_samples > 1` the last three
        describe the first sampled path.

    Example:
    >>> agent = RecurrentAttention(10, num_glimpses=3, patch_size=4)
    >>> out = agent(np.zeros((2, 28, 28, 1), "float32"))
    >>> tuple(out["locations"].shape)
    (2, 3, 2)

    Reference:
        Mnih et al., 2014, "Recurrent Models of Visual Attention".
    """

    def __init__(
        self,
        num_classes,
        num_glimpses=6,
        patch_size=8,
        num_scales=1,
        scale_factor=2,
        glimpse_units=128,
        location_units=128,
        glimpse_output_units=256,
        units=256,
        cell="rnn",
        location_std=0.1,
        test_samples=1,
        seed=None,
        reinforce_core=False,
        **kwargs,
    ):
        # Images are not cast on the way in (under mixed precision either):
        # the glimpse sensor casts the pixels it gathers, nothing else.
        kwargs.setdefault("autocast", False)
        super().__init__(**kwargs)
        for name, value in (
            ("num_classes", num_classes),
            ("num_glimpses", num_glimpses),
            ("units", units),
            ("test_samples", test_samples),
        ):
            _positive_int(name, value)
        if cell not in CELLS:
            raise ValueError(f"`cell` must be one of {CELLS}. Received: cell={cell!r}")
        self.num_classes = num_classes
        self.num_glimpses = num_glimpses
        self.patch_size = patch_size
        self.num_scales = num_scales
        self.scale_factor = scale_factor
        self.glimpse_units = glimpse_units
        self.location_units = location_units
        self.glimpse_output_units = glimpse_output_units
        self.units = units
        self.cell = cell
        self.location_std = location_std
        self.test_samples = test_samples
        self.seed = seed
        self.reinforce_core = bool(reinforce_core)
        # Created here (not in build) so a bad std fails at construction.
        self.location_policy = LocationPolicy(
            location_std,
            seed=seed,
            stop_hidden_gradient=not self.reinforce_core,
            dtype=self.dtype_policy,
            name="location_policy",
        )

    def build(self, images_shape):
        batch = images_shape[0]
        # Channels the glimpse network is built for; other inputs are
        # converted glimpse by glimpse (`to_model_pixels`).
        self.input_channels = images_shape[-1]
        self.glimpse_network = GlimpseNetwork(
            self.glimpse_units,
            self.location_units,
            self.glimpse_output_units,
            patch_size=self.patch_size,
            num_scales=self.num_scales,
            scale_factor=self.scale_factor,
            dtype=self.dtype_policy,
            name="glimpse_network",
        )
        self.glimpse_network.build(images_shape, (batch, 2))
        if self.cell == "lstm":
            self.core = keras.layers.LSTMCell(
                self.units, dtype=self.dtype_policy, name="core"
            )
        else:
            self.core = keras.layers.SimpleRNNCell(
                self.units, activation="relu", dtype=self.dtype_policy, name="core"
            )
        self.core.build((batch, self.glimpse_output_units))
        self.location_policy.build((batch, self.units))
        self.baseline = keras.layers.Dense(1, dtype=self.dtype_policy, name="baseline")
        self.baseline.build((batch, self.units))
        self.classifier = keras.layers.Dense(
            self.num_classes, dtype=self.dtype_policy, name="classifier"
        )
        self.classifier.build((batch, self.units))
        self.built = True

    def call(self, images, training=False):
        images = ops.convert_to_tensor(images)
        if len(images.shape) == 3:
            images = ops.expand_dims(images, -1)
        integer = "int" in keras.backend.standardize_dtype(images.dtype)
        samples = 1 if training else self.test_samples
        if samples > 1:
            images = ops.repeat(images, samples, axis=0)
        n = ops.shape(images)[0]
        num_states = 2 if self.cell == "lstm" else 1
        states = [ops.zeros((n, self.units), self.compute_dtype)] * num_states
        location = ops.zeros((n, 2), "float32")
        locations, log_probs, baselines = [location], [], []
        for t in range(self.num_glimpses):
            # Gather from the image as given; convert the gathered pixels only.
            glimpse = self.glimpse_network.sensor(images, location)
            glimpse = to_model_pixels(glimpse, integer, self.input_channels)
            g = self.glimpse_network.features(glimpse, location)
            hidden, states = self.core(g, states)
            if t == self.num_glimpses - 1:
                break
            location, log_prob = self.location_policy(
                hidden, training=training or samples > 1
            )
            baseline = self.baseline(ops.stop_gradient(hidden))
            locations.append(location)
            log_probs.append(log_prob)
            baselines.append(ops.cast(baseline[:, 0], "float32"))
        logits = ops.cast(self.classifier(hidden), "float32")
        locations = ops.stack(locations, axis=1)
        if log_probs:
            log_probs = ops.stack(log_probs, axis=1)
            baselines = ops.stack(baselines, axis=1)
        else:
            log_probs = ops.zeros((n, 0), "float32")
            baselines = ops.zeros((n, 0), "float32")
        if samples > 1:

            def first(x):
                return ops.reshape(x, (-1, samples, *x.shape[1:]))[:, 0]

            log_p = ops.log_softmax(logits, axis=-1)
            log_p = ops.reshape(log_p, (-1, samples, self.num_classes))
            logits = ops.logsumexp(log_p, axis=1) - math.log(samples)
            locations, log_probs, baselines = map(
                first, (locations, log_probs, baselines)
            )
        return {
            "logits": logits,
            "locations": locations,
            "log_probs": log_probs,
            "baselines": baselines,
        }

    def compute_output_spec(self, images, training=False):
        batch = images.shape[0]
        steps = self.num_glimpses - 1
        return {
            "logits": keras.KerasTensor((batch, self.num_classes), "float32"),
            "locations": keras.KerasTensor((batch, self.num_glimpses, 2), "float32"),
            "log_probs": keras.KerasTensor((batch, steps), "float32"),
            "baselines": keras.KerasTensor((batch, steps), "float32"),
        }

    def get_config(self):
        config = super().get_config()
        config.update(
            num_classes=self.num_classes,
            num_glimpses=self.num_glimpses,
            patch_size=self.patch_size,
            num_scales=self.num_scales,
            scale_factor=self.scale_factor,
            glimpse_units=self.glimpse_units,
            location_units=self.location_units,
            glimpse_output_units=self.glimpse_output_units,
            units=self.units,
            cell=self.cell,
            location_std=self.location_std,
            test_samples=self.test_samples,
            seed=self.seed,
            reinforce_core=self.reinforce_core,
        )
        return config


@keras.saving.register_keras_serializable(package="zoo")
class RecurrentAttentionModel(Task):
    """Recurrent Attention Model (RAM): classify an image from a few glimpses.

    A functional `Task` around a `RecurrentAttention` agent. Its outputs are
    a dict (`logits`, `locations`, `log_probs`, `baselines`); `compile` a
    classification loss on the logits (e.g.
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
    (converted by the `ImagePreprocessor`); any image size works at
    inference, since glimpse locations are relative to the image. `predict`
    returns the logits; `glimpses(images)` returns where the agent looked.

    Args:
        num_classes: int. Defaults to `10`.
        channels: int. Image channels of the model, 1 or 3. Defaults to `1`.
        num_glimpses: int. Defaults to `6`.
        patch_size: int. Retina patch side in pixels. Defaults to `8`.
        num_scales: int. Retina resolutions. Defaults to `1`.
        scale_factor: int. Side ratio of successive patches. Defaults to `2`.
        glimpse_units: int. Size of `h_g`. Defaults to `128`.
        location_units: int. Size of `h_l`. Defaults to `128`.
        glimpse_output_units: int. Size of `g`. Defaults to `256`.
        units: int. Core state size. Defaults to `256`.
        cell: str. `"rnn"` (ReLU) or `"lstm"`. Defaults to `"rnn"`.
        location_std: float. Policy standard deviation, in units of half
            the image side. Defaults to `0.1`.
        test_samples: int. Monte-Carlo glimpse paths averaged at inference
            (1: follow the policy mean). Defaults to `1`.
        discount: float in (0, 1]. Reward discount per step. Defaults to `1`.
        reinforce_weight: float. Weight of the REINFORCE term. Defaults to `1`.
        seed: optional int seeding the location sampler.
        reinforce_core: bool. Let the REINFORCE gradient also train the core
            and glimpse networks (as in the paper); by default they learn
            from the cross-entropy only. Defaults to `False`.
        preprocessor: optional `ImagePreprocessor`; defaults to one for
            `channels`.
        **kwargs: `keras.Model` arguments (e.g. `name`).

    Example:
    >>> import keras
    >>> from zoo.data import fashion_mnist
    >>> model = RecurrentAttentionModel(num_glimpses=4, patch_size=8)
    >>> model.compile("adam", keras.losses.SparseCategoricalCrossentropy(
    ...     from_logits=True), metrics=["accuracy"])
    >>> images, labels = fashion_mnist.load("train", sample=True)
    >>> history = model.fit(images[:256], labels[:256], batch_size=64, verbose=0)
    >>> sorted(history.history)
    ['accuracy', 'baseline_loss', 'loss', 'reinforce_loss', 'reward']
    >>> model.predict(images[:2], verbose=0).shape  # logits
    (2, 10)
    >>> model.glimpses(images[:2]).shape  # (y, x) of each glimpse
    (2, 4, 2)

    Reference:
        Mnih, Heess, Graves and Kavukcuoglu, 2014, "Recurrent Models of
        Visual Attention" (NIPS).
    """

    def __init__(
        self,
        num_classes=10,
        channels=1,
        num_glimpses=6,
        patch_size=8,
        num_scales=1,
        scale_factor=2,
        glimpse_units=128,
        location_units=128,
        glimpse_output_units=256,
        units=256,
        cell="rnn",
        location_std=0.1,
        test_samples=1,
        discount=1.0,
        reinforce_weight=1.0,
        seed=None,
        reinforce_core=False,
        preprocessor=None,
        dtype=None,
        **kwargs,
    ):
        if channels not in (1, 3):
            raise ValueError(
                f"`channels` must be 1 or 3. Received: channels={channels!r}"
            )
        if not isinstance(discount, (int, float)) or not 0 < discount <= 1:
            raise ValueError(
                f"`discount` must be in (0, 1]. Received: discount={discount!r}"
            )
        # === Layers ===
        agent = RecurrentAttention(
            num_classes,
            num_glimpses=num_glimpses,
            patch_size=patch_size,
            num_scales=num_scales,
            scale_factor=scale_factor,
            glimpse_units=glimpse_units,
            location_units=location_units,
            glimpse_output_units=glimpse_output_units,
            units=units,
            cell=cell,
            location_std=location_std,
            test_samples=test_samples,
            seed=seed,
            reinforce_core=reinforce_core,
            dtype=dtype,
            name="agent",
        )
        # === Functional graph ===
        images = keras.Input((None, None, channels), name="images")
        outputs = agent(images)
        super().__init__(inputs=images, outputs=outputs, dtype=dtype, **kwargs)

        # === Config ===
        self.num_classes = num_classes
        self.channels = channels
        self.num_glimpses = num_glimpses
        self.patch_size = patch_size
        self.num_scales = num_scales
        self.scale_factor = scale_factor
        self.glimpse_units = glimpse_units
        self.location_units = location_units
        self.glimpse_output_units = glimpse_output_units
        self.units = units
        self.cell = cell
        self.location_std = location_std
        self.test_samples = test_samples
        self.discount = float(discount)
        self.reinforce_weight = float(reinforce_weight)
        self.seed = seed
        self.reinforce_core = bool(reinforce_core)
        self.preprocessor = preprocessor or ImagePreprocessor(
            channels, name="image_preprocessor"
        )
        self.agent = agent
        self.reward_tracker = keras.metrics.Mean(name="reward")
        self.reinforce_tracker = keras.metrics.Mean(name="reinforce_loss")
        self.baseline_tracker = keras.metrics.Mean(name="baseline_loss")

    def call(self, images, training=False):
        # The functional graph's input is float32; calling the agent directly
        # keeps an image as given (e.g. uint8), so neither this call nor
        # `predict_on_batch` casts or copies every pixel.
        return self.agent(images, training=training)

    # Data ------------------------------------------------------------------

    def _as_dataset(
        self,
        x,
        y=None,
        sample_weight=None,
        batch_size=None,
        shuffle=False,
        drop_remainder=False,
    ):
        """Batches arrays (or takes a dataset) and standardizes the images."""
        dataset = given_dataset(x, y, sample_weight)
        if dataset is not None:
            spec = tf.nest.flatten(dataset.element_spec)[0]
            rank = spec.shape.rank
            if rank == 2 or (rank == 3 and spec.shape[-1] in (1, 3)):
                dataset = self._batch(dataset, batch_size, drop_remainder)
        else:
            if len(x) == 0:
                raise ValueError(
                    f"No images: `x` is empty. Received: x.shape={np.shape(x)}"
                )
            data = keras.utils.pack_x_y_sample_weight(x, y, sample_weight)
            dataset = self._batch(sliced(data, shuffle), batch_size, drop_remainder)

        def preprocess(*sample):
            return self.preprocess_samples(*sample)

        return dataset.map(preprocess, num_parallel_calls=tf.data.AUTOTUNE).prefetch(
            tf.data.AUTOTUNE
        )

    # Loss and metrics --------------------------------------------------------

    def compute_loss(
        self, x=None, y=None, y_pred=None, sample_weight=None, training=True
    ):
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
        return super().compute_metrics(x, y, y_pred["logits"], sample_weight)

    def predict_step(self, data):
        return super().predict_step(data)["logits"]

    def predict(self, x, batch_size=None, **kwargs):
        """Class logits `(batch, num_classes)` of images as `fit` takes them.

        Raises:
            ValueError: an image gave non-finite logits (NaN or infinite
                pixels where the agent looked), rather than a class that
                `argmax` would read from NaN.
        """
        logits = super().predict(x, batch_size=batch_size, **kwargs)
        bad = np.flatnonzero(~np.all(np.isfinite(logits), axis=-1))
        if bad.size:
            raise ValueError(
                f"Images {bad[:10].tolist()} gave non-finite logits: they hold "
                "NaN or infinite pixels where the agent looked."
            )
        return logits

    # Inference -------------------------------------------------------------

    def glimpses(self, images, batch_size=256):
        """Returns where the agent looks: `(batch, num_glimpses, 2)` `(y, x)`.

        Args:
            images: images as accepted by `fit` (uint8 or float, any size).
            batch_size: int. Defaults to `256`.

        Returns:
            NumPy float32 array of locations in `[-1, 1]` (`(-1, -1)` is the
            top-left corner), the first the image centre; with
            `test_samples > 1`, one sampled path.
        """
        standardized = self.preprocessor.standardize(images)
        found = []
        for start in range(0, int(standardized.shape[0]), batch_size):
            batch = standardized[start : start + batch_size]
            found.append(ops.convert_to_numpy(self(batch, training=False)["locations"]))
        return np.concatenate(found, axis=0)

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "num_classes": self.num_classes,
            "channels": self.channels,
            "num_glimpses": self.num_glimpses,
            "patch_size": self.patch_size,
            "num_scales": self.num_scales,
            "scale_factor": self.scale_factor,
            "glimpse_units": self.glimpse_units,
            "location_units": self.location_units,
            "glimpse_output_units": self.glimpse_output_units,
            "units": self.units,
            "cell": self.cell,
            "location_std": self.location_std,
            "test_samples": self.test_samples,
            "discount": self.discount,
            "reinforce_weight": self.reinforce_weight,
            "seed": self.seed,
            "reinforce_core": self.reinforce_core,
            "preprocessor": keras.saving.serialize_keras_object(self.preprocessor),
        }


__all__ = [
    "ImagePreprocessor",
    "LocationPolicy",
    "RecurrentAttention",
    "RecurrentAttentionModel",
]
