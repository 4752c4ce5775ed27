"""ImagePreprocessor and the per-glimpse pixel conversion."""

import numpy as np
import pytest

from zoo.ram import ImagePreprocessor, to_model_pixels

RNG = np.random.default_rng(0)


def test_preprocessor_adds_channels_keeps_dtype_and_converts_gathered_pixels():
    pre = ImagePreprocessor(channels=1)
    gray = RNG.integers(0, 256, (2, 5, 6), dtype="uint8")
    kept = pre.standardize(gray)
    assert kept.dtype == "uint8"
    np.testing.assert_array_equal(kept.numpy(), gray[..., None])
    scaled = to_model_pixels(gray[..., None].astype("float32"), True, 1)
    np.testing.assert_allclose(np.asarray(scaled), gray[..., None] / 255.0, rtol=1e-6)
    rgb = RNG.uniform(size=(2, 5, 6, 3)).astype("float32")
    luma = rgb @ np.array([0.2989, 0.587, 0.114], "float32")
    converted = np.asarray(to_model_pixels(rgb, False, 1))
    np.testing.assert_allclose(converted[..., 0], luma, atol=1e-3)
    three = to_model_pixels(gray[..., None].astype("float32"), True, 3)
    assert tuple(three.shape) == (2, 5, 6, 3)
    with pytest.raises(ValueError, match="2 channels"):
        pre.standardize(np.zeros((1, 4, 4, 2), "float32"))
    with pytest.raises(ValueError, match="channels"):
        ImagePreprocessor(channels=2)


@pytest.mark.parametrize(
    "images, error, match",
    [
        (np.zeros((4, 4), "uint8"), ValueError, r"images\.shape=\(4, 4\)"),
        (np.zeros((1, 4, 4, 2), "uint8"), ValueError, r"images\.shape=\(1, 4, 4, 2\)"),
        (np.array([["a", "b"]]), TypeError, r"images\.dtype=string"),
        (np.zeros((1, 2, 2), bool), TypeError, r"images\.dtype=bool"),
        (object(), TypeError, r"images="),
    ],
)
def test_bad_images_name_the_argument_and_value(images, error, match):
    with pytest.raises(error, match=match):
        ImagePreprocessor().standardize(images)


def test_config_round_trip():
    pre = ImagePreprocessor(channels=3, name="pre")
    clone = ImagePreprocessor.from_config(pre.get_config())
    assert clone.get_config() == pre.get_config()
