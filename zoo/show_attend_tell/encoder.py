"""The image encoder: a CNN whose last feature map is the annotation grid."""

import os

import keras
from keras import ops

PREPROCESSING_MODES = ("none", "tf", "torch", "caffe")
_IMAGENET_MEAN = (0.485, 0.456, 0.406)
_IMAGENET_STD = (0.229, 0.224, 0.225)
_CAFFE_MEAN_BGR = (103.939, 116.779, 123.68)


@keras.saving.register_keras_serializable(package="zoo")
class GridCoordinates(keras.layers.Layer):
    """Appends each cell's `(row, column)`, scaled to `[-1, 1]`, to a grid.

    Soft attention averages annotation vectors, so where an item lies is
    only known to the decoder if the vectors say it (CoordConv); captions
    with spatial relations need it.

    Call arguments:
        grid: tensor `(B, H, W, C)`.

    Returns:
        Tensor `(B, H, W, C + 2)`.

    Example:
    >>> import numpy as np
    >>> tuple(GridCoordinates()(np.zeros((1, 2, 3, 4))).shape)
    (1, 2, 3, 6)

    Reference:
        Liu et al., 2018, "An Intriguing Failing of Convolutional Neural
        Networks and the CoordConv Solution".
    """

    def call(self, grid):
        height, width = grid.shape[1], grid.shape[2]
        rows = ops.linspace(-1.0, 1.0, height) if height > 1 else ops.zeros((1,))
        cols = ops.linspace(-1.0, 1.0, width) if width > 1 else ops.zeros((1,))
        rows = ops.broadcast_to(rows[:, None, None], (height, width, 1))
        cols = ops.broadcast_to(cols[None, :, None], (height, width, 1))
        coords = ops.cast(ops.concatenate([rows, cols], axis=-1), grid.dtype)
        coords = ops.broadcast_to(coords[None], (ops.shape(grid)[0], height, width, 2))
        return ops.concatenate([grid, coords], axis=-1)

    def compute_output_shape(self, grid_shape):
        return (*grid_shape[:-1], grid_shape[-1] + 2)


@keras.saving.register_keras_serializable(package="zoo")
class BackbonePreprocessing(keras.layers.Layer):
    """Maps `[0, 1]` images to what a `keras.applications` backbone expects.

    Args:
        mode: str. `"tf"` (`[-1, 1]`: MobileNet, Inception, Xception,
            ResNet-V2), `"torch"` (ImageNet mean/std: DenseNet), `"caffe"`
            (BGR, mean subtracted, `[0, 255]`: VGG, ResNet) or `"none"`
            (`[0, 255]`: EfficientNet, ConvNeXt, which rescale inside).
            Grayscale images are repeated to 3 channels first.
        **kwargs: base layer arguments.

    Call arguments:
        images: float tensor `(B, H, W, 1 or 3)` in `[0, 1]`.

    Returns:
        Float tensor `(B, H, W, 3)`.

    Example:
    >>> import numpy as np
    >>> gray = np.full((1, 2, 2, 1), 0.5, "float32")
    >>> ops.convert_to_numpy(BackbonePreprocessing("tf")(gray)).shape
    (1, 2, 2, 3)
    >>> white = np.ones((1, 1, 1, 3), "float32")
    >>> for mode in ("tf", "none"):
    ...     print(mode, ops.convert_to_numpy(BackbonePreprocessing(mode)(white)).ravel())
    tf [1. 1. 1.]
    none [255. 255. 255.]
    >>> preprocessing = BackbonePreprocessing("caffe")  # BGR, mean subtracted
    >>> ops.convert_to_numpy(preprocessing(white)).ravel().round(2)
    array([151.06, 138.22, 131.32], dtype=float32)
    """

    def __init__(self, mode="tf", **kwargs):
        super().__init__(**kwargs)
        if mode not in PREPROCESSING_MODES:
            raise ValueError(
                f"`mode` must be one of {PREPROCESSING_MODES}. Received: mode={mode!r}"
            )
        self.mode = mode

    def call(self, images):
        if images.shape[-1] == 1:
            images = ops.concatenate([images] * 3, axis=-1)
        if self.mode == "tf":
            return images * 2.0 - 1.0
        if self.mode == "torch":
            mean = ops.convert_to_tensor(_IMAGENET_MEAN, images.dtype)
            std = ops.convert_to_tensor(_IMAGENET_STD, images.dtype)
            return (images - mean) / std
        images = images * 255.0
        if self.mode == "caffe":
            mean = ops.convert_to_tensor(_CAFFE_MEAN_BGR, images.dtype)
            return images[..., ::-1] - mean
        return images

    def compute_output_shape(self, images_shape):
        return (*images_shape[:-1], 3)

    def get_config(self):
        config = super().get_config()
        config.update(mode=self.mode)
        return config


def small_cnn(dtype=None):
    """Layers of the built-in CNN for small images (84x84 -> 7x7 grid).

    Four 'same' convolutions, each followed by (synchronised) batch
    normalisation and a ReLU (32 5x5 stride 2, 64 3x3 stride 2, 3x3 max pooling, 128 3x3, 128
    3x3): a stride of 12 pixels and a receptive field of 65, so each of the
    7x7 cells sees a whole 28x28 item around it.

    Returns:
        A list of layers to apply in order.
    """

    def block(filters, size, strides, name):
        return [
            keras.layers.Conv2D(
                filters,
                size,
                strides=strides,
                padding="same",
                use_bias=False,
                dtype=dtype,
                name=name,
            ),
            # Synchronised: under `tf.distribute` every replica normalises
            # with the global batch's statistics (same gradients as one
            # device); nothing changes on one device. Keras offers it on the
            # TensorFlow backend only (same weights either way).
            keras.layers.BatchNormalization(
                momentum=0.9,
                synchronized=keras.backend.backend() == "tensorflow",
                dtype=dtype,
                name=f"{name}_bn",
            ),
            keras.layers.ReLU(dtype=dtype, name=f"{name}_relu"),
        ]

    first, second, *last = SMALL_CNN_BLOCKS
    return [
        *block(*first, "conv_1"),
        *block(*second, "conv_2"),
        keras.layers.MaxPooling2D(
            SMALL_CNN_POOL, padding="same", dtype=dtype, name="pool"
        ),
        *block(*last[0], "conv_3"),
        *block(*last[1], "conv_4"),
    ]


#: The small CNN's convolutions, `(filters, kernel side, stride)`; the max
#: pooling (side and stride `SMALL_CNN_POOL`) follows the second.
SMALL_CNN_BLOCKS = ((32, 5, 2), (64, 3, 2), (128, 3, 1), (128, 3, 1))
SMALL_CNN_POOL = 3


def small_cnn_size(image_shape):
    """`(grid height, grid width, features, parameters)` of `small_cnn`.

    Computed from the image shape alone (nothing built), for the loader's
    parameter budget (`zoo.base.parameter_budget`).

    Example:
    >>> small_cnn_size((84, 84, 1))
    (7, 7, 128, 241824)
    """
    height, width, depth = image_shape
    parameters = 0
    for i, (filters, side, stride) in enumerate(SMALL_CNN_BLOCKS):
        # A convolution without bias, then batch normalisation's 4 vectors.
        parameters += side * side * depth * filters + 4 * filters
        height, width, depth = -(-height // stride), -(-width // stride), filters
        if i == 1:
            height = -(-height // SMALL_CNN_POOL)
            width = -(-width // SMALL_CNN_POOL)
    return height, width, depth, parameters


def application(name, input_shape, weights=None, dtype=None):
    """A `keras.applications` model by name, without its classifier.

    Args:
        name: str. A `keras.applications` constructor, e.g. `"MobileNetV2"`.
        input_shape: `(H, W, 3)`.
        weights: `None` (random, offline), `"imagenet"` (downloads) or the
            path of a local weights file (e.g. a `*_notop.h5`).
        dtype: optional dtype policy.

    Returns:
        A `keras.Model` mapping images to a feature map `(B, h, w, C)`.
    """
    constructor = getattr(keras.applications, name, None)
    if constructor is None or not callable(constructor):
        raise ValueError(
            f"Unknown backbone {name!r}: use 'small' or a keras.applications "
            "model name such as 'MobileNetV2' or 'ResNet50'."
        )
    local = weights is not None and os.path.isfile(str(weights))
    model = constructor(
        include_top=False,
        weights=None if local else weights,
        input_shape=tuple(input_shape),
    )
    if local:
        model.load_weights(str(weights))
    return model
