"""Glimpse sensor and glimpse network of the recurrent attention model.

The recurrent attention model (RAM) never looks at a whole image: at each step
it reads a small, multi-resolution "glimpse" around a location `l` (the
bandwidth-limited retina `rho(x, l)`), and the glimpse network turns what and
where into one feature vector `g = f_g(x, l)`.

Locations are normalised to the image: `l = (y, x)` in `[-1, 1]^2`, the row
(vertical) coordinate first, the column (horizontal) coordinate second, with
`(-1, -1)` the top-left corner of the image, `(0, 0)` its centre and `(1, 1)`
its bottom-right corner. The same location therefore means the same place on
an image of any size.
"""

import keras
from keras import ops

from keras_attention.arguments import int_argument

PACKAGE = "keras_attention"


def relu(x):
    """ReLU written as a selection: the values of `keras.activations.relu`,
    NaN included (NaN stays NaN, so a non-finite input still shows).

    TensorFlow 2.21's graph optimizer breaks on a ReLU of a sum of two
    `Dense` outputs (MatMul, BiasAdd, Add, Relu: this network's last step,
    and the step of a ReLU `SimpleRNNCell`) on oneDNN CPUs: its remapper
    leaves the Relu node without an op, logs W- and E-level lines for every
    traced function, and every optimization of the function is dropped
    ("Ignoring multi-device function optimization failure"). A `Select` is
    not part of that fusion (`Maximum` is not either, but the optimized
    graph's `Maximum` turned NaN into 0).

    Example:
    >>> import numpy as np
    >>> np.asarray(relu(np.array([-2.0, 0.0, 3.0, np.nan], "float32"))).tolist()
    [0.0, 0.0, 3.0, nan]
    """
    return ops.where(ops.logical_not(x <= 0), x, ops.zeros_like(x))


def _check_input_shapes(layer, images_shape, locations_shape):
    """Raises a clear `ValueError` unless images are 4D and locations `(B, 2)`."""
    name = type(layer).__name__
    images_shape = tuple(images_shape)
    locations_shape = tuple(locations_shape)
    if len(images_shape) != 4:
        raise ValueError(
            f"{name} expects images of shape (batch, height, width, channels). "
            f"Received: images.shape={images_shape}"
        )
    if len(locations_shape) != 2 or locations_shape[-1] not in (None, 2):
        raise ValueError(
            f"{name} expects locations of shape (batch, 2) holding (y, x) in "
            f"[-1, 1]. Received: locations.shape={locations_shape}"
        )
    ib, lb = images_shape[0], locations_shape[0]
    if ib is not None and lb is not None and ib != lb:
        raise ValueError(
            f"{name}: images and locations must have the same batch size. "
            f"Received: images.shape={images_shape}, "
            f"locations.shape={locations_shape}"
        )


@keras.saving.register_keras_serializable(package=PACKAGE)
class GlimpseSensor(keras.layers.Layer):
    """Multi-resolution retina `rho(x, l)` of the recurrent attention model.

    Extracts `num_scales` square patches centred at `l`; the `k`-th patch has
    a side of `patch_size * scale_factor**k` pixels and is average-pooled by
    `scale_factor**k` (non-overlapping, exact) down to `patch_size` pixels, so
    the first patch is at full resolution and each next one sees an area
    `scale_factor` times wider at `scale_factor` times lower resolution.
    Pixels of a patch that fall outside the image are zeros, and count as
    zeros in the average.

    Coordinates: `l = (y, x)`, row first, in `[-1, 1]^2` relative to the image
    (`(-1, -1)` is the top-left corner, `(1, 1)` the bottom-right corner). In
    pixels the centre is `c = (l + 1) / 2 * (H, W)` (pixel `i` covers
    `[i, i + 1)`), and a patch of side `s` covers rows
    `floor(c_y - s / 2 + 1/2) + [0, s)` and likewise columns, i.e. its
    corner is `c - s / 2` rounded to the nearest pixel (halves round up).
    Locations outside `[-1, 1]` are allowed and read zeros off the image.

    Cost does not grow with the image size: the layer computes the flat
    indices of the `sum_k (patch_size * scale_factor**k)**2` pixels it needs
    and gathers only those (one gather per call); it never resizes or
    convolves the whole image. The sensor is not differentiable with
    respect to `locations` (RAM trains the location policy with REINFORCE);
    gradients do flow to `images`.

    Args:
        patch_size: int >= 1. Side, in pixels, of every returned patch.
        num_scales: int >= 1. Number of patches (resolutions) per glimpse.
            Defaults to `1`.
        scale_factor: int >= 1. Ratio between the sides of successive
            patches. Defaults to `2`.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        images: tensor `(batch, height, width, channels)`, any height and
            width, float or integer (e.g. uint8): only the gathered pixels
            are cast to the layer's compute dtype.
        locations: float tensor `(batch, 2)`, `(y, x)` in `[-1, 1]`.

    Returns:
        Tensor `(batch, num_scales, patch_size, patch_size, channels)`,
        finest scale first.

    Example:
    >>> import numpy as np
    >>> sensor = GlimpseSensor(patch_size=8, num_scales=3)
    >>> images = np.random.rand(2, 28, 28, 1).astype("float32")
    >>> tuple(sensor(images, np.zeros((2, 2), "float32")).shape)
    (2, 3, 8, 8, 1)

    Reference:
        Mnih et al., 2014, "Recurrent Models of Visual Attention", sec. 3.1
        (the glimpse sensor).
    """

    def __init__(self, patch_size, num_scales=1, scale_factor=2, **kwargs):
        super().__init__(**kwargs)
        self.patch_size = int_argument("patch_size", patch_size)
        self.num_scales = int_argument("num_scales", num_scales)
        self.scale_factor = int_argument("scale_factor", scale_factor)

    @property
    def patch_sides(self):
        """Side in pixels of each patch before pooling, finest first."""
        return [self.patch_size * self.scale_factor**k for k in range(self.num_scales)]

    def build(self, images_shape, locations_shape):
        _check_input_shapes(self, images_shape, locations_shape)
        self.built = True

    def _corner(self, locations, size, side):
        """Top (or left) pixel index `(batch,)` of a patch of side `side`."""
        centre = (locations + 1.0) * 0.5 * ops.cast(size, "float32")
        return ops.cast(ops.floor(centre - 0.5 * side + 0.5), "int32")

    def call(self, images, locations):
        _check_input_shapes(self, images.shape, locations.shape)
        images = ops.convert_to_tensor(images)
        locations = ops.cast(locations, "float32")
        shape = ops.shape(images)
        batch, height, width = shape[0], shape[1], shape[2]
        channels = images.shape[-1] if images.shape[-1] is not None else shape[3]

        # Flat indices of every pixel each patch needs, one gather for all.
        indices, valid = [], []
        for side in self.patch_sides:
            offsets = ops.arange(side, dtype="int32")
            rows = self._corner(locations[:, 0], height, side)[:, None] + offsets
            cols = self._corner(locations[:, 1], width, side)[:, None] + offsets
            rows_ok = ops.logical_and(rows >= 0, rows < height)
            cols_ok = ops.logical_and(cols >= 0, cols < width)
            rows = ops.clip(rows, 0, height - 1)
            cols = ops.clip(cols, 0, width - 1)
            flat = rows[:, :, None] * width + cols[:, None, :]
            ok = ops.logical_and(rows_ok[:, :, None], cols_ok[:, None, :])
            indices.append(ops.reshape(flat, (-1, side * side)))
            valid.append(ops.reshape(ok, (-1, side * side)))
        indices = ops.concatenate(indices, axis=1)
        valid = ops.concatenate(valid, axis=1)

        # One flat gather over (batch * height * width, channels) rows: a
        # reshape of the images (no copy) and work in the gathered pixels
        # only (`take_along_axis` would transpose the whole image). Cast
        # after the gather, so e.g. uint8 images are never cast whole.
        pixels = ops.reshape(images, (-1, channels))
        offsets = ops.arange(batch, dtype="int32") * (height * width)
        flat = ops.reshape(indices + offsets[:, None], (-1,))
        gathered = ops.reshape(ops.take(pixels, flat, axis=0), (batch, -1, channels))
        gathered = ops.cast(gathered, self.compute_dtype)
        gathered = ops.where(valid[:, :, None], gathered, ops.cast(0, gathered.dtype))

        patches, start = [], 0
        p = self.patch_size
        for k, side in enumerate(self.patch_sides):
            patch = gathered[:, start : start + side * side]
            start += side * side
            factor = self.scale_factor**k
            patch = ops.reshape(patch, (-1, p, factor, p, factor, channels))
            patches.append(ops.mean(patch, axis=(2, 4)))
        return ops.stack(patches, axis=1)

    def compute_output_shape(self, images_shape, locations_shape):
        return (
            images_shape[0],
            self.num_scales,
            self.patch_size,
            self.patch_size,
            images_shape[-1],
        )

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "patch_size": self.patch_size,
                "num_scales": self.num_scales,
                "scale_factor": self.scale_factor,
            }
        )
        return config


@keras.saving.register_keras_serializable(package=PACKAGE)
class GlimpseNetwork(keras.layers.Layer):
    """Glimpse network `g = f_g(x, l)`: what the retina sees, and where.

    With `rho` the `GlimpseSensor` output flattened to a vector:

    ```
    h_g = ReLU(theta_g^0 rho(x, l))            # "what", glimpse_units
    h_l = ReLU(theta_g^1 l)                    # "where", location_units
    g   = ReLU(theta_g^2 [h_g; h_l])           # output_units
        = ReLU(W_g h_g + W_l h_l + b)
    ```

    `theta_g^2` is one linear map of the concatenation, stored as two kernels
    (`glimpse_output_dense` on `h_g`, with the bias, and
    `location_output_dense` on `h_l`, without one) so each path can be
    inspected; a second bias would be redundant.

    With `glimpse_filters`, the "what" path reads each patch with a small
    convolutional network before `theta_g^0` (as in the glimpse networks of
    Ba et al., 2015): every entry adds a 3x3 convolution ("same" padding,
    ReLU) with that many filters followed by 2x2 max pooling, the same
    weights for every scale of the retina, so `rho` becomes the pooled
    feature maps of all scales. Its cost still depends on the patch only,
    never on the image size.

    Args:
        glimpse_units: int >= 1. Size of `h_g`. Defaults to `128`.
        location_units: int >= 1. Size of `h_l`. Defaults to `128`.
        output_units: int >= 1. Size of `g`. Defaults to `256`.
        patch_size: int >= 1. Retina patch side. Defaults to `8`.
        num_scales: int >= 1. Retina resolutions. Defaults to `1`.
        scale_factor: int >= 1. Ratio between successive patch sides.
            Defaults to `2`.
        kernel_initializer: initializer of every kernel. Defaults to
            `"glorot_uniform"`.
        bias_initializer: initializer of every bias. Defaults to `"zeros"`.
        glimpse_filters: optional sequence of ints >= 1, the filters of each
            convolution of the "what" path (see above), e.g. `(16, 32)`.
            Defaults to `None`: the paper's network, `theta_g^0` on the
            pixels.
        **kwargs: base layer arguments such as `name` and `dtype`.

    Call arguments:
        images: float tensor `(batch, height, width, channels)`; the channel
            count must be known when the layer is built.
        locations: float tensor `(batch, 2)`, `(y, x)` in `[-1, 1]`, as in
            `GlimpseSensor`.

    Returns:
        Glimpse features `(batch, output_units)`.

    Example:
    >>> import numpy as np
    >>> net = GlimpseNetwork(32, 16, 64, patch_size=4, num_scales=2)
    >>> images = np.random.rand(2, 28, 28, 1).astype("float32")
    >>> tuple(net(images, np.zeros((2, 2), "float32")).shape)
    (2, 64)
    >>> conv = GlimpseNetwork(32, 16, 64, patch_size=4, num_scales=2,
    ...                       glimpse_filters=(8, 16))
    >>> tuple(conv(images, np.zeros((2, 2), "float32")).shape)
    (2, 64)

    References:
        Mnih et al., 2014, "Recurrent Models of Visual Attention", sec. 3.1
        and sec. 4.
        Ba, Mnih and Kavukcuoglu, 2015, "Multiple Object Recognition with
        Visual Attention" (convolutional glimpse networks).
    """

    def __init__(
        self,
        glimpse_units=128,
        location_units=128,
        output_units=256,
        patch_size=8,
        num_scales=1,
        scale_factor=2,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        glimpse_filters=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.glimpse_filters = _filters(glimpse_filters)
        self.glimpse_units = int_argument("glimpse_units", glimpse_units)
        self.location_units = int_argument("location_units", location_units)
        self.output_units = int_argument("output_units", output_units)
        self.patch_size = int_argument("patch_size", patch_size)
        self.num_scales = int_argument("num_scales", num_scales)
        self.scale_factor = int_argument("scale_factor", scale_factor)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)

    def _dense(self, units, name, activation=None, use_bias=True):
        return keras.layers.Dense(
            units,
            activation=activation,
            use_bias=use_bias,
            kernel_initializer=self._initializer(self.kernel_initializer),
            bias_initializer=self._initializer(self.bias_initializer),
            dtype=self.dtype_policy,
            name=name,
        )

    @staticmethod
    def _initializer(initializer):
        # A fresh copy per sublayer: a seeded initializer shared by two
        # layers would give them the same draws.
        return keras.initializers.get(keras.initializers.serialize(initializer))

    def build(self, images_shape, locations_shape):
        _check_input_shapes(self, images_shape, locations_shape)
        channels = images_shape[-1]
        if channels is None:
            raise ValueError(
                "GlimpseNetwork needs the number of image channels at build "
                f"time. Received: images.shape={tuple(images_shape)}"
            )
        batch = images_shape[0]
        self.sensor = GlimpseSensor(
            self.patch_size,
            self.num_scales,
            self.scale_factor,
            dtype=self.dtype_policy,
            name="sensor",
        )
        self.sensor.build(images_shape, locations_shape)
        side, depth = self.patch_size, channels
        self.glimpse_convolutions = []
        for i, filters in enumerate(self.glimpse_filters or ()):
            conv = keras.layers.Conv2D(
                filters,
                3,
                padding="same",
                activation="relu",
                kernel_initializer=self._initializer(self.kernel_initializer),
                bias_initializer=self._initializer(self.bias_initializer),
                dtype=self.dtype_policy,
                name=f"glimpse_conv_{i}",
            )
            conv.build((None, side, side, depth))
            pool = keras.layers.MaxPooling2D(
                2, padding="same", dtype=self.dtype_policy, name=f"glimpse_pool_{i}"
            )
            pool.build((None, side, side, filters))
            self.glimpse_convolutions += [conv, pool]
            side, depth = -(-side // 2), filters
        self._patch_shape = (self.patch_size, self.patch_size, channels)
        rho_size = self.num_scales * side**2 * depth
        self._rho_size = rho_size
        # theta_g^0 and theta_g^1.
        self.glimpse_dense = self._dense(
            self.glimpse_units, "glimpse_dense", activation="relu"
        )
        self.glimpse_dense.build((batch, rho_size))
        self.location_dense = self._dense(
            self.location_units, "location_dense", activation="relu"
        )
        self.location_dense.build((batch, 2))
        # theta_g^2, split into its "what" and "where" halves.
        self.glimpse_output_dense = self._dense(
            self.output_units, "glimpse_output_dense"
        )
        self.glimpse_output_dense.build((batch, self.glimpse_units))
        self.location_output_dense = self._dense(
            self.output_units, "location_output_dense", use_bias=False
        )
        self.location_output_dense.build((batch, self.location_units))
        self.built = True

    def call(self, images, locations):
        return self.features(self.sensor(images, locations), locations)

    def features(self, glimpses, locations):
        """The network on glimpses already read by `self.sensor`.

        `call(images, locations)` is `features(sensor(images, locations),
        locations)`. Calling the two halves separately lets a model change
        the gathered pixels alone (e.g. scale uint8 values to `[0, 1]` or
        turn RGB into gray) without touching the rest of the image.

        Args:
            glimpses: `(batch, num_scales, patch_size, patch_size, channels)`,
                the sensor's output, `channels` as built.
            locations: float tensor `(batch, 2)`, where they were read.

        Returns:
            Glimpse features `(batch, output_units)`.
        """
        if self.glimpse_convolutions:
            # Every scale's patch through the same convolutions.
            glimpses = ops.reshape(glimpses, (-1, *self._patch_shape))
            for layer in self.glimpse_convolutions:
                glimpses = layer(glimpses)
        rho = ops.reshape(glimpses, (-1, self._rho_size))
        h_g = self.glimpse_dense(rho)
        h_l = self.location_dense(ops.cast(locations, self.compute_dtype))
        return relu(self.glimpse_output_dense(h_g) + self.location_output_dense(h_l))

    def compute_output_shape(self, images_shape, locations_shape):
        return (images_shape[0], self.output_units)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "glimpse_units": self.glimpse_units,
                "location_units": self.location_units,
                "output_units": self.output_units,
                "patch_size": self.patch_size,
                "num_scales": self.num_scales,
                "scale_factor": self.scale_factor,
                "kernel_initializer": keras.initializers.serialize(
                    self.kernel_initializer
                ),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
                "glimpse_filters": self.glimpse_filters,
            }
        )
        return config


def _filters(glimpse_filters):
    """`glimpse_filters` as a list of ints >= 1, or `None` for none."""
    if glimpse_filters is None:
        return None
    if isinstance(glimpse_filters, (str, bytes)) or not hasattr(
        glimpse_filters, "__iter__"
    ):
        raise TypeError(
            "`glimpse_filters` must be a sequence of integers >= 1 or None. "
            f"Received: glimpse_filters={glimpse_filters!r}"
        )
    filters = [int_argument("glimpse_filters", v) for v in glimpse_filters]
    return filters or None
