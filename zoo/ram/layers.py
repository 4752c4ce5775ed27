"""The RAM's own layers: the location policy `f_l` and the unrolled agent.

`RecurrentAttention` runs the whole glimpse loop of Mnih et al. (2014): the
glimpse network (`keras_attention.layers.GlimpseNetwork`), the core network
`f_h`, the `LocationPolicy` `f_l`, the baseline `b_t` and the action network
`f_a`. Math in `keras.ops`; only `replica_normal` asks `tf.distribute` for the
replica id, on the TensorFlow backend.
"""

import math

import keras
from keras import ops

from keras_attention.layers import GlimpseNetwork
from keras_attention.layers.glimpse import relu
from keras_attention.lora import LoRALSTMCell, LoRASimpleRNNCell
from zoo.base.backbone import MAX_PATCH_SIDE, positive_int
from zoo.ram.preprocessor import to_model_pixels

CELLS = ("rnn", "lstm")


def replica_normal(shape, seed_generator, dtype="float32"):
    """Standard normal noise that differs on every `tf.distribute` replica.

    A `keras.random.SeedGenerator` holds a mirrored variable under a
    `MirroredStrategy`, so every replica would draw the same seed and the
    same noise; on the TensorFlow backend the replica id is folded into the
    seed here. Other backends draw `keras.random.normal` from the generator.

    Args:
        shape: shape of the noise.
        seed_generator: a `keras.random.SeedGenerator`.
        dtype: float dtype. Defaults to `"float32"`.

    Returns:
        A tensor of standard normal samples.

    Example:
    >>> noise = replica_normal((2, 3), keras.random.SeedGenerator(0))
    >>> tuple(noise.shape)
    (2, 3)
    """
    if keras.backend.backend() != "tensorflow":
        return keras.random.normal(shape, dtype=dtype, seed=seed_generator)
    import tensorflow as tf

    seed = ops.cast(seed_generator.next(), "int64")
    context = tf.distribute.get_replica_context()
    if context is not None:
        replica = ops.cast(context.replica_id_in_sync_group, "int64")
        seed = seed + ops.stack([replica * 1_000_003, replica])
    return tf.random.stateless_normal(shape, seed=seed, dtype=dtype)


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
        learning_rate_scale: float > 0. Multiplies the step an optimizer
            that normalises gradients (Adam, RMSprop) takes on the policy's
            weights, relative to the rest of the model: the mean is
            `tanh(s * (h V + c))` with `V` initialised to `W / s`, so the
            function at initialisation is the same for every `s` while an
            update of size `lr` to `V` moves `s V` by `s * lr`. With Adam,
            scaling the REINFORCE loss does not slow the policy down; this
            does. Defaults to `1.0`.
        **kwargs: base layer arguments.

    Call arguments:
        hidden: core state `(batch, units)`.
        training: bool. Sample (True) or take the mean (False).

    Returns:
        `(location, log_prob)`: `(batch, 2)` and `(batch,)`.

    Example:
    >>> import numpy as np
    >>> policy = LocationPolicy(std=0.1, seed=0)
    >>> location, log_prob = policy(np.ones((4, 8), "float32"), training=True)
    >>> tuple(location.shape), tuple(log_prob.shape)
    ((4, 2), (4,))

    Reference:
        Mnih et al., 2014, "Recurrent Models of Visual Attention", sec. 3.2.
    """

    def __init__(
        self,
        std=0.1,
        seed=None,
        stop_hidden_gradient=True,
        learning_rate_scale=1.0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if not isinstance(std, (int, float)) or std <= 0:
            raise ValueError(f"`std` must be a positive float. Received: std={std!r}")
        if (
            isinstance(learning_rate_scale, bool)
            or not isinstance(learning_rate_scale, (int, float))
            or learning_rate_scale <= 0
        ):
            raise ValueError(
                "`learning_rate_scale` must be a positive float. Received: "
                f"learning_rate_scale={learning_rate_scale!r}"
            )
        self.learning_rate_scale = float(learning_rate_scale)
        self.std = float(std)
        self.seed = seed
        self.stop_hidden_gradient = bool(stop_hidden_gradient)
        self.seed_generator = keras.random.SeedGenerator(seed, name="sampler")

    def build(self, hidden_shape):
        scale = self.learning_rate_scale
        self.mean_dense = keras.layers.Dense(
            2,
            # Glorot uniform divided by the scale: `s V` starts as `W` would.
            kernel_initializer=keras.initializers.VarianceScaling(
                1.0 / scale**2, mode="fan_avg", distribution="uniform"
            ),
            dtype=self.dtype_policy,
            name="mean",
        )
        self.mean_dense.build(hidden_shape)

    def call(self, hidden, training=False):
        if self.stop_hidden_gradient:
            hidden = ops.stop_gradient(hidden)
        mean = ops.cast(self.mean_dense(hidden), "float32")
        mean = ops.tanh(mean * self.learning_rate_scale)
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
            learning_rate_scale=self.learning_rate_scale,
        )
        return config


@keras.saving.register_keras_serializable(package="zoo")
class RecurrentAttention(keras.layers.Layer):
    """The RAM agent unrolled over `num_glimpses` steps.

    ```
    l_0   = (0, 0)                              # the image centre (*)
    g_t   = f_g(x, l_{t-1})                     # GlimpseNetwork
    h_t   = f_h(h_{t-1}, g_t)                   # ReLU RNN or LSTM
    l_t   ~ N(tanh(W_l h_t), std^2)             # LocationPolicy, t < T
    b_t   = W_b h_t + c                         # baseline (stop-gradient h_t)
    y     = f_a(h_T)                            # class logits
    ```

    (*) With `random_first_glimpse=True`, in training `l_0` is drawn
    uniformly from `[-1, 1]^2` for every image, so the policy must learn to
    reach the object from anywhere rather than from the centre only; at
    inference the first glimpse stays at the centre.

    Args:
        num_classes: int. Classes of the action network. Defaults to `10`.
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
        policy_learning_rate_scale: float > 0. Relative step size of the
            location policy under Adam (`LocationPolicy`'s
            `learning_rate_scale`). Defaults to `1.0`.
        random_first_glimpse: bool. In training, place each image's first
            glimpse uniformly at random instead of at the centre (see
            above). Defaults to `False`.
        glimpse_filters: optional sequence of ints, convolutions of the
            glimpse network's "what" path (`GlimpseNetwork`), e.g.
            `(16, 32)`. Defaults to `None`: the paper's fully connected one.
        **kwargs: base layer arguments.

    Call arguments:
        images: `(batch, height, width[, channels])`, any height and width,
            1 or 3 channels; integer (0-255) or float (0-1) values, read as
            given: only the gathered pixels are cast and converted.
        training: bool. Sample locations (True) or follow the mean.
        first_locations: optional `(batch, 2)` `(y, x)` in `[-1, 1]`: where
            the first glimpse of each image is taken, instead of the centre
            (or the random training draw); e.g. to see whether the policy
            reaches the object from anywhere.

    Returns:
        A dict: `logits` `(batch, num_classes)` (log of the averaged
        probabilities when `test_samples > 1`), `locations` `(batch, T, 2)`
        (the `(y, x)` of each glimpse, in `[-1, 1]`), `log_probs`
        `(batch, T - 1)` (log-probability of each sampled location) and
        `baselines` `(batch, T - 1)`. With `test_samples > 1` the last three
        describe the first sampled path.

    Example:
    >>> import numpy as np
    >>> agent = RecurrentAttention(10, num_glimpses=3, patch_size=4)
    >>> out = agent(np.zeros((2, 28, 28, 1), "float32"))
    >>> tuple(out["locations"].shape)
    (2, 3, 2)

    Reference:
        Mnih et al., 2014, "Recurrent Models of Visual Attention".
    """

    def __init__(
        self,
        num_classes=10,
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
        policy_learning_rate_scale=1.0,
        random_first_glimpse=False,
        glimpse_filters=None,
        **kwargs,
    ):
        # Images are not cast on the way in (under mixed precision either):
        # the glimpse sensor casts the pixels it gathers, nothing else.
        kwargs.setdefault("autocast", False)
        super().__init__(**kwargs)
        for name, value in (
            ("num_classes", num_classes),
            ("num_glimpses", num_glimpses),
            ("patch_size", patch_size),
            ("num_scales", num_scales),
            ("scale_factor", scale_factor),
            ("glimpse_units", glimpse_units),
            ("location_units", location_units),
            ("glimpse_output_units", glimpse_output_units),
            ("units", units),
            ("test_samples", test_samples),
        ):
            positive_int(name, value)
        side = patch_size * scale_factor ** (num_scales - 1)
        if side > MAX_PATCH_SIDE:
            raise ValueError(
                "The coarsest glimpse patch, patch_size * scale_factor ** "
                f"(num_scales - 1) = {side} pixels a side, must be at most "
                f"{MAX_PATCH_SIDE} (zoo.base.backbone.MAX_PATCH_SIDE). Received: "
                f"patch_size={patch_size}, num_scales={num_scales}, "
                f"scale_factor={scale_factor}"
            )
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
        self.policy_learning_rate_scale = policy_learning_rate_scale
        self.random_first_glimpse = bool(random_first_glimpse)
        # Created here (not in build) so a bad std fails at construction.
        self.location_policy = LocationPolicy(
            location_std,
            seed=seed,
            stop_hidden_gradient=not self.reinforce_core,
            learning_rate_scale=policy_learning_rate_scale,
            dtype=self.dtype_policy,
            name="location_policy",
        )
        self.glimpse_network = GlimpseNetwork(
            glimpse_units,
            location_units,
            glimpse_output_units,
            patch_size=patch_size,
            num_scales=num_scales,
            scale_factor=scale_factor,
            glimpse_filters=glimpse_filters,
            dtype=self.dtype_policy,
            name="glimpse_network",
        )
        self.glimpse_filters = self.glimpse_network.glimpse_filters

    def build(self, images_shape):
        batch = images_shape[0]
        # Channels the glimpse network is built for; other inputs are
        # converted glimpse by glimpse (`to_model_pixels`).
        self.input_channels = images_shape[-1]
        self.glimpse_network.build(images_shape, (batch, 2))
        if self.cell == "lstm":
            self.core = LoRALSTMCell(self.units, dtype=self.dtype_policy, name="core")
        else:
            self.core = LoRASimpleRNNCell(
                self.units, activation=relu, dtype=self.dtype_policy, name="core"
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

    def call(self, images, training=False, first_locations=None):
        images = ops.convert_to_tensor(images)
        if len(images.shape) == 3:
            images = ops.expand_dims(images, -1)
        integer = "int" in keras.backend.standardize_dtype(images.dtype)
        if first_locations is not None:
            first_locations = ops.convert_to_tensor(first_locations, "float32")
            if tuple(first_locations.shape[1:]) != (2,):
                raise ValueError(
                    "first_locations must have shape (batch, 2), (y, x) in "
                    f"[-1, 1]. Received: first_locations.shape={first_locations.shape}"
                )
        samples = 1 if training else self.test_samples
        if samples > 1:
            images = ops.repeat(images, samples, axis=0)
            if first_locations is not None:
                first_locations = ops.repeat(first_locations, samples, axis=0)
        n = ops.shape(images)[0]
        num_states = 2 if self.cell == "lstm" else 1
        states = [ops.zeros((n, self.units), self.compute_dtype)] * num_states
        location = ops.zeros((n, 2), "float32")
        if training and self.random_first_glimpse:
            # erf(z / sqrt(2)) of a standard normal z is uniform on (-1, 1).
            noise = replica_normal((n, 2), self.location_policy.seed_generator)
            location = ops.erf(noise / math.sqrt(2.0))
        if first_locations is not None:
            location = ops.clip(first_locations, -1.0, 1.0)
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

    def compute_output_spec(self, images, training=False, first_locations=None):
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
            policy_learning_rate_scale=self.policy_learning_rate_scale,
            random_first_glimpse=self.random_first_glimpse,
            glimpse_filters=self.glimpse_filters,
        )
        return config
