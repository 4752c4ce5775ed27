"""`ImagePreprocessor`: image batches of any dtype and colour layout -> the RAM.

The image itself is never cast, scaled or resized (the agent reads only a few
pixels of it); `to_model_pixels` converts the pixels a glimpse gathers.
"""

import keras
from keras import ops

from zoo import quiet
from zoo.base import raw_inputs as inputs
from zoo.base.preprocessor import Preprocessor

tf = quiet.LazyModule("tensorflow", "Preprocessing raw images")

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
    >>> import numpy as np
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
class ImagePreprocessor(Preprocessor):
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
    >>> import numpy as np
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
        """Returns `(batch, height, width, c)` images, dtype and values kept.

        Args:
            images: array-like `(batch, height, width[, c])`, `c` in {1, 3},
                of an integer or float dtype.

        Returns:
            A `tf.Tensor` `(batch, height, width, c)`.

        Raises:
            TypeError: `images` is not numeric (e.g. strings).
            ValueError: `images` has the wrong rank or channel count.

        Example:
        >>> import numpy as np
        >>> pre = ImagePreprocessor(channels=1)
        >>> tuple(pre.standardize(np.zeros((1, 5, 7, 3), "float32")).shape)
        (1, 5, 7, 3)
        """
        try:
            images = tf.convert_to_tensor(images)
        except (TypeError, ValueError) as e:
            raise TypeError(
                "`images` must be an array of numbers (batch, height, width"
                f"[, channels]). Received: images={images!r:.80} ({e})"
            ) from None
        if not (images.dtype.is_integer or images.dtype.is_floating):
            raise TypeError(
                "`images` must have an integer or float dtype. "
                f"Received: images.dtype={images.dtype.name}"
            )
        if images.shape.rank == 3:
            images = images[..., None]
        if images.shape.rank != 4:
            raise ValueError(
                "`images` must be a batch (batch, height, width[, channels]). "
                f"Received: images.shape={tuple(images.shape)}"
            )
        if images.shape[-1] not in (1, 3):
            raise ValueError(
                f"`images` with {images.shape[-1]} channels cannot feed a "
                f"{self.channels}-channel model (1 or 3 channels). "
                f"Received: images.shape={tuple(images.shape)}"
            )
        return images

    def input_form(self, spec):
        """Images, one or a batch: the `zoo.base.raw_inputs` contract.

        Args:
            spec: the element spec as `(x,)`, `(x, y)` or `(x, y, w)`.

        Returns:
            `"samples"`, `"batches"` or None (prepared inputs).

        Example:
        >>> import tensorflow as tf
        >>> ImagePreprocessor().input_form((tf.TensorSpec((28, 28), tf.uint8),))
        'samples'
        """
        return inputs.image_form(spec, channels=(1, 3))

    def call(self, x, y=None, sample_weight=None):
        return keras.utils.pack_x_y_sample_weight(self.standardize(x), y, sample_weight)

    def get_config(self):
        config = super().get_config()
        config.update(channels=self.channels)
        return config
