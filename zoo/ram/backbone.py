"""`RecurrentAttentionBackbone`: the RAM's functional graph, images -> outputs."""

import keras

from zoo.ram.layers import RecurrentAttention


@keras.saving.register_keras_serializable(package="zoo")
class RecurrentAttentionBackbone(keras.Model):
    """The glimpse agent of Mnih et al. (2014) as a functional model.

    One named input, `images` `(batch, height, width, channels)`, and a dict
    of outputs: `logits` `(batch, num_classes)`, `locations`
    `(batch, num_glimpses, 2)` (the `(y, x)` of each glimpse in `[-1, 1]`),
    `log_probs` and `baselines` `(batch, num_glimpses - 1)` (see
    `RecurrentAttention`). No data handling and no loss: the task
    (`RecurrentAttentionModel`) adds both. Math in `keras.ops`, so it runs on
    every Keras backend.

    Images are read as given: integer images are `[0, 255]`, float images
    `[0, 1]`, of any size, gray or RGB. The graph's input is float32;
    calling the backbone on an integer image keeps its dtype (only the
    pixels a glimpse gathers are converted), so a uint8 image is neither
    copied nor cast.

    Args:
        num_classes: int. Classes of the action network. Defaults to `10`.
        channels: int. Image channels the glimpse network is built for, 1
            or 3. Defaults to `1`.
        num_glimpses: int. Defaults to `6`.
        patch_size: int. Retina patch side in pixels. Defaults to `8`.
        num_scales: int. Retina resolutions. Defaults to `1`.
        scale_factor: int. Side ratio of successive patches. Defaults to `2`.
        glimpse_units: int. Size of `h_g`. Defaults to `128`.
        location_units: int. Size of `h_l`. Defaults to `128`.
        glimpse_output_units: int. Size of `g`. Defaults to `256`.
        units: int. Core state size. Defaults to `256`.
        cell: str. `"rnn"` (ReLU) or `"lstm"`. Defaults to `"rnn"`.
        location_std: float. Policy standard deviation. Defaults to `0.1`.
        test_samples: int. Monte-Carlo glimpse paths averaged at inference
            (1: follow the policy mean). Defaults to `1`.
        seed: optional int seeding the location sampler.
        reinforce_core: bool. Let the REINFORCE gradient reach the core
            network. Defaults to `False`.
        dtype: optional dtype policy (e.g. `"mixed_bfloat16"`).
        **kwargs: `keras.Model` arguments (e.g. `name`).

    Example:
    >>> import numpy as np
    >>> backbone = RecurrentAttentionBackbone(
    ...     num_classes=3, num_glimpses=2, patch_size=4, glimpse_units=4,
    ...     location_units=4, glimpse_output_units=8, units=8)
    >>> outputs = backbone({"images": np.zeros((2, 20, 20, 1), "float32")})
    >>> sorted(outputs), tuple(outputs["locations"].shape)
    (['baselines', 'locations', 'log_probs', 'logits'], (2, 2, 2))

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
        seed=None,
        reinforce_core=False,
        dtype=None,
        **kwargs,
    ):
        if channels not in (1, 3):
            raise ValueError(
                f"`channels` must be 1 or 3. Received: channels={channels!r}"
            )
        # === Layers ===
        self.recurrent_attention = RecurrentAttention(
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
        outputs = self.recurrent_attention(images)
        super().__init__(inputs=images, outputs=outputs, **kwargs)
        if dtype is not None:
            # A functional model drops `dtype`: set its policy as layers do.
            self.dtype_policy = dtype

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
        self.seed = seed
        self.reinforce_core = bool(reinforce_core)

    def call(self, images, training=False):
        # The functional graph's input is float32: it would cast an integer
        # image (every pixel, and [0, 255] read as [0, 1]). The agent takes
        # images as given and converts only the pixels it gathers.
        if isinstance(images, dict):
            images = images["images"]
        return self.recurrent_attention(images, training=training)

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "dtype": keras.dtype_policies.serialize(self.dtype_policy),
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
            "seed": self.seed,
            "reinforce_core": self.reinforce_core,
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config.get("dtype"), dict):
            config["dtype"] = keras.dtype_policies.deserialize(config["dtype"])
        return cls(**config)
