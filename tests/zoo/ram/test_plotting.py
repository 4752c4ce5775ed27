"""Glimpse-path figures: pixel mapping and PNG output."""

import numpy as np
import pytest

from keras_attention.layers import GlimpseSensor
from zoo.ram.plotting import plot_glimpses, to_pixels

pytestmark = pytest.mark.tensorflow_only


def test_to_pixels_matches_the_sensor_crop():
    # The sensor's patch around l covers the pixels whose centres are within
    # side / 2 of to_pixels(l) (for an even side, the centre is a corner).
    image = np.arange(40 * 30, dtype="float32").reshape(1, 40, 30, 1)
    location = np.array([[-0.5, 0.4]], "float32")
    crop = np.asarray(GlimpseSensor(4)(image, location))[0, 0, :, :, 0]
    row, col = to_pixels(location[0], 40, 30)
    top, left = int(round(row - 1.5)), int(round(col - 1.5))
    np.testing.assert_array_equal(crop, image[0, top : top + 4, left : left + 4, 0])
    np.testing.assert_allclose(
        to_pixels([[-1, -1], [1, 1]], 40, 30), [[-0.5, -0.5], [39.5, 29.5]]
    )


def test_plot_writes_a_png(tmp_path):
    images = np.random.default_rng(0).integers(0, 256, (3, 60, 60), dtype="uint8")
    locations = np.array([[[0, 0], [0.5, -0.5], [0.9, 0.9]]] * 3, "float32")
    path = plot_glimpses(
        images,
        locations,
        str(tmp_path / "sub" / "g.png"),
        12,
        3,
        titles=["a", "b", "c"],
    )
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="glimpse paths"):
        plot_glimpses(images, locations[:2], str(tmp_path / "x.png"), 12)
