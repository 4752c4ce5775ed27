"""examples/make_sample_images.py writes the sample images the README reads."""

import importlib.util
import os

import numpy as np
from PIL import Image

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_the_shipped_images_are_what_the_command_writes(tmp_path):
    path = os.path.join(ROOT, "examples", "make_sample_images.py")
    spec = importlib.util.spec_from_file_location("make_sample_images", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(["--out", str(tmp_path)])
    for name in ("scene.png", "item.png"):
        written = np.asarray(Image.open(tmp_path / name))
        shipped = np.asarray(Image.open(os.path.join(ROOT, "examples", "images", name)))
        assert written.shape == shipped.shape and written.std() > 0
        np.testing.assert_array_equal(written, shipped)
