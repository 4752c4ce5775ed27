"""`RecurrentAttentionBackbone`: the RAM's functional graph, images -> outputs."""

import keras

from zoo.base import lora
from zoo.base import parameter_budget as budget
from zoo.base.backbone import Backbone, positive_int
from zoo.base.constructor_arguments import ArgumentsOf
from zoo.ram.layers import RecurrentAttention


@keras.saving.register_keras_serializable(package="zoo")
class RecurrentAttentionBackbone(Backbone):
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
        *args, **kwargs: the `RecurrentAttention` arguments (`num_classes`,
            `num_glimpses`, `patch_size`, `num_scales`, `scale_factor`,
            `glimpse_units`, `location_units`, `glimpse_output_units`,
            `units`, `cell`, `location_std`, `test_samples`, `seed`,
            `reinforce_core`, `policy_learning_rate_scale`,
            `random_first_glimpse`, `glimpse_filters`), in its order and
            with its defaults; they build the agent and are read back as
            attributes (`backbone.num_glimpses`). Also `keras.Model`'s `name`
            and `trainable`; any other name raises a `TypeError`.
        channels: int. Image channels the glimpse network is built for, 1
            or 3. Defaults to `1`.
        dtype: optional dtype policy (e.g. `"mixed_bfloat16"`).

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

    passed_arguments = ArgumentsOf(RecurrentAttention)

    def __init__(self, *args, channels=1, dtype=None, **kwargs):
        _check_channels(channels)
        agent = self.passed_arguments.take(type(self).__name__, args, kwargs)
        # === Layers ===
        self.recurrent_attention = self.passed_arguments.build(
            agent, dtype=dtype, name="agent"
        )

        # === Functional graph ===
        images = keras.Input((None, None, channels), name="images")
        outputs = self.recurrent_attention(images)
        super().__init__(inputs=images, outputs=outputs, dtype=dtype, **kwargs)

        # === Config ===
        self.channels = channels
        self.passed_arguments.copy_attributes(self.recurrent_attention, self)

    @classmethod
    def parameter_count(
        cls,
        num_classes,
        patch_size,
        num_scales,
        glimpse_units,
        location_units,
        glimpse_output_units,
        units,
        cell,
        glimpse_filters,
        channels,
        **arguments,
    ):
        """The parameters `RecurrentAttentionBackbone(...)` would create, unbuilt.

        Exact; see `Backbone.parameter_count`.

        Example:
        >>> from zoo.base.constructor_arguments import ArgumentsOf
        >>> config = {"num_classes": 3, "patch_size": 4, "num_scales": 2,
        ...           "glimpse_units": 4, "location_units": 4,
        ...           "glimpse_output_units": 8, "units": 8, "cell": "lstm",
        ...           "glimpse_filters": [2, 3], "channels": 3}
        >>> count = RecurrentAttentionBackbone.parameter_count(
        ...     **ArgumentsOf(RecurrentAttentionBackbone).values(config))
        >>> count == RecurrentAttentionBackbone(**config).count_params()
        True
        """
        _check_channels(channels)
        for name, value in (
            ("num_classes", num_classes),
            ("patch_size", patch_size),
            ("num_scales", num_scales),
            ("glimpse_units", glimpse_units),
            ("location_units", location_units),
            ("glimpse_output_units", glimpse_output_units),
            ("units", units),
        ):
            positive_int(name, value)
        if glimpse_filters is not None and not isinstance(
            glimpse_filters, (list, tuple)
        ):
            raise TypeError(
                "`glimpse_filters` must be a sequence of integers >= 1 or None. "
                f"Received: glimpse_filters={glimpse_filters!r:.80}"
            )
        # The "what" path: optional 3x3 convolutions, each then 2x2 pooling,
        # on every scale's patch, then theta_g^0 on all of them.
        count, side, depth = 0, patch_size, channels
        for filters in glimpse_filters or ():
            count += budget.conv2d(3, depth, positive_int("glimpse_filters", filters))
            side, depth = budget.halved(side, 1), filters
        count += budget.dense(num_scales * side * side * depth, glimpse_units)
        count += budget.dense(2, location_units)  # theta_g^1
        count += budget.dense(glimpse_units, glimpse_output_units)  # theta_g^2
        count += budget.dense(location_units, glimpse_output_units, use_bias=False)
        core = "lstm" if cell == "lstm" else "rnn"
        count += budget.recurrent_cell(core, glimpse_output_units, units)
        count += budget.dense(units, 2)  # The location policy's mean.
        count += budget.dense(units, 1)  # The baseline.
        return count + budget.dense(units, num_classes)

    def default_lora_layer_names(self):
        """LoRA's targets: the glimpse network's layers and the core network.

        The glimpse network's dense (or convolution) layers, and the core
        cell's kernel and recurrent kernel (`keras_attention.lora`).

        Example:
        >>> backbone = RecurrentAttentionBackbone(
        ...     num_classes=3, num_glimpses=2, patch_size=4, glimpse_units=4,
        ...     location_units=4, glimpse_output_units=8, units=8)
        >>> sorted(backbone.default_lora_layer_names())
        ['core', 'glimpse_dense', 'glimpse_output_dense',
         'location_dense', 'location_output_dense']
        """
        return lora.adaptable_names(
            self,
            lambda layer: (
                "/glimpse_network/" in f"/{layer.path}" or layer.path == "agent/core"
            ),
        )

    def call(self, images, training=False):
        # The functional graph's input is float32: it would cast an integer
        # image (every pixel, and [0, 255] read as [0, 1]). The agent takes
        # images as given and converts only the pixels it gathers.
        if isinstance(images, dict):
            images = images["images"]
        return self.recurrent_attention(images, training=training)


def _check_channels(channels):
    if channels not in (1, 3):
        raise ValueError(f"`channels` must be 1 or 3. Received: channels={channels!r}")
