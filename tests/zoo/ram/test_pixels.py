"""RAM reads images as given: every input path converts only gathered pixels."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from zoo.ram import RecurrentAttentionModel

pytestmark = pytest.mark.tensorflow_only

RNG = np.random.default_rng(3)


def model(channels=1, **kwargs):
    return RecurrentAttentionModel(
        num_classes=4,
        channels=channels,
        num_glimpses=3,
        patch_size=4,
        num_scales=2,
        glimpse_units=8,
        location_units=8,
        glimpse_output_units=16,
        units=16,
        seed=0,
        **kwargs,
    )


def test_every_input_path_gives_the_logits_of_the_scaled_float_image():
    ram = model()
    pixels = RNG.integers(0, 256, (4, 37, 53, 1), dtype="uint8")
    scaled = pixels.astype("float32") / 255.0
    expected = keras.ops.convert_to_numpy(ram(scaled)["logits"])
    got = {
        "call uint8": ram(pixels)["logits"],
        "predict_on_batch uint8 tensor": ram.predict_on_batch(tf.constant(pixels)),
        "predict_on_batch float tensor": ram.predict_on_batch(tf.constant(scaled)),
        "predict uint8 NumPy": ram.predict(pixels, verbose=0),
        "predict uint8 (B, H, W)": ram.predict(pixels[..., 0], verbose=0),
        "predict float64 NumPy": ram.predict(scaled.astype("float64"), verbose=0),
        "predict int64 NumPy": ram.predict(pixels.astype("int64"), verbose=0),
    }
    for name, logits in got.items():
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(logits), expected, atol=1e-5, err_msg=name
        )


def test_rgb_is_converted_per_glimpse_as_the_whole_image_would_be():
    ram = model()
    rgb = RNG.integers(0, 256, (3, 30, 30, 3), dtype="uint8")
    gray = tf.image.rgb_to_grayscale(rgb.astype("float32") / 255.0).numpy()
    np.testing.assert_allclose(
        ram.predict_on_batch(tf.constant(rgb)),
        ram.predict_on_batch(tf.constant(gray)),
        atol=1e-4,
    )
    three = model(channels=3)
    np.testing.assert_allclose(
        three.predict_on_batch(tf.constant(rgb[..., :1])),
        three.predict_on_batch(tf.constant(np.repeat(rgb[..., :1], 3, axis=-1))),
        atol=1e-5,
    )


def test_mixed_precision_model_takes_uint8_and_float32_images():
    keras.config.set_dtype_policy("mixed_float16")
    try:
        ram = model()
    finally:
        keras.config.set_dtype_policy("float32")
    pixels = RNG.integers(0, 256, (2, 40, 40, 1), dtype="uint8")
    from_uint8 = ram.predict_on_batch(tf.constant(pixels))
    from_float = ram.predict_on_batch(tf.constant(pixels.astype("float32") / 255))
    assert from_uint8.dtype == "float32"
    np.testing.assert_allclose(from_uint8, from_float, atol=1e-2)


def test_two_channel_images_are_refused_with_the_shape():
    with pytest.raises(ValueError, match="2 channels"):
        model().predict(np.zeros((1, 8, 8, 2), "uint8"), verbose=0)
