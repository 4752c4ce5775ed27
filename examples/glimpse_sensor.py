"""Crop multi-resolution glimpses with `GlimpseSensor` and plot them.

Uses matplotlib's bundled sample photograph when it is installed (no network)
and a synthetic scene otherwise. Saves `demo_output/glimpse_sensor.png`: the
image with the glimpse squares drawn on it, and, for each location, the
`num_scales` patches the retina returns (all `patch_size` pixels wide; the
coarser ones cover a wider area at a lower resolution).

Usage:
    python examples/glimpse_sensor.py [path/to/image.png]
"""

import math
import os
import sys

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from keras import ops  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

try:
    from keras_attention.layers import GlimpseSensor
except ImportError:  # a source checkout without `pip install -e .`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from keras_attention.layers import GlimpseSensor

PATCH_SIZE = 24
NUM_SCALES = 3
SCALE_FACTOR = 2
# (y, x) in [-1, 1]: (-1, -1) is the top-left corner, (1, 1) the bottom-right.
LOCATIONS = np.array([[-0.38, -0.1], [0.68, 0.5], [-1.0, 1.0]], "float32")
COLOURS = ["tab:red", "tab:orange", "tab:cyan"]


def synthetic_scene(height=240, width=320):
    """A deterministic RGB scene: a sky gradient, a sun, a house and a grid."""
    y, x = np.mgrid[0:height, 0:width] / np.array([height, width])[:, None, None]
    img = np.stack([0.3 + 0.4 * y, 0.5 + 0.3 * y, 0.9 - 0.3 * y], axis=-1)
    sun = (y - 0.25) ** 2 + ((x - 0.75) * width / height) ** 2 < 0.01
    img[sun] = [1.0, 0.85, 0.2]
    house = (y > 0.55) & (y < 0.95) & (x > 0.2) & (x < 0.45)
    img[house] = [0.7, 0.2, 0.15]
    window = (y > 0.65) & (y < 0.75) & (x > 0.27) & (x < 0.33)
    img[window] = [1.0, 1.0, 0.6]
    grid = ((np.arange(width) % 16) < 2)[None, :] & (y > 0.8)
    img[grid] = [0.1, 0.4, 0.1]
    return img.astype("float32")


def load_image(path=None):
    if path is None:
        try:
            from matplotlib import cbook

            path = cbook.get_sample_data("grace_hopper.jpg", asfileobj=False)
        except (OSError, ValueError):
            return synthetic_scene(), "synthetic scene"
    img = plt.imread(path)[..., :3].astype("float32")
    if img.max() > 1.0:
        img /= 255.0
    return img, os.path.basename(str(path))


def patch_box(location, height, width, side):
    """Top-left corner of a patch, as documented in `GlimpseSensor`."""
    top = math.floor((location[0] + 1) / 2 * height - side / 2 + 0.5)
    left = math.floor((location[1] + 1) / 2 * width - side / 2 + 0.5)
    return top, left


def main():
    img, source = load_image(sys.argv[1] if len(sys.argv) > 1 else None)
    height, width, _ = img.shape
    sensor = GlimpseSensor(PATCH_SIZE, NUM_SCALES, SCALE_FACTOR)
    images = np.repeat(img[None], len(LOCATIONS), axis=0)
    glimpses = ops.convert_to_numpy(sensor(images, LOCATIONS))
    print(f"{source}: image {height}x{width}, glimpses {glimpses.shape}")

    fig = plt.figure(figsize=(4 + 2 * NUM_SCALES, 4), constrained_layout=True)
    grid = fig.add_gridspec(len(LOCATIONS), 2 + NUM_SCALES)
    ax = fig.add_subplot(grid[:, :2])
    ax.imshow(img)
    ax.set_title(f"{source} ({height}x{width})")
    ax.axis("off")
    for i, (location, colour) in enumerate(zip(LOCATIONS, COLOURS, strict=True)):
        for side in sensor.patch_sides:
            top, left = patch_box(location, height, width, side)
            ax.add_patch(
                Rectangle((left - 0.5, top - 0.5), side, side, fill=False, color=colour)
            )
        for k in range(NUM_SCALES):
            sub = fig.add_subplot(grid[i, 2 + k])
            sub.imshow(np.clip(glimpses[i, k], 0.0, 1.0), interpolation="nearest")
            sub.set_xticks([])
            sub.set_yticks([])
            for spine in sub.spines.values():
                spine.set_color(colour)
                spine.set_linewidth(2)
            if i == 0:
                side = sensor.patch_sides[k]
                sub.set_title(f"{side}px -> {PATCH_SIZE}px", fontsize=9)
            if k == 0:
                y, x = location
                sub.set_ylabel(f"l=({y:+.2f}, {x:+.2f})", fontsize=8)

    os.makedirs("demo_output", exist_ok=True)
    out = os.path.join("demo_output", "glimpse_sensor.png")
    fig.savefig(out, dpi=100)
    print(f"saved {out}")


if __name__ == "__main__":
    main()
