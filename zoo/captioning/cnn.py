"""The built-in CNN for small images that the captioners encode scenes with.

Shared by the captioning families (`zoo.ShowAttendTell`'s `encoder="small"`,
`zoo.TransformerCaptioner`): the layers in order, and their sizes computed
from the image shape alone (the loader's parameter budget).
"""

import keras


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
