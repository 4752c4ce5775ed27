"""Glimpse-path figures for the recurrent attention model (PNG).

Draws each image with the path of glimpse centres over it, the finest retina
patch at every glimpse (numbered, from yellow to red) and the coarser scales
of the first glimpse (dashed), like figure 3 of Mnih et al. (2014).
"""

import os

import numpy as np

from keras_attention.plotting import as_numpy, pyplot


def to_pixels(locations, height, width):
    """Maps `(y, x)` locations in `[-1, 1]` to pixel coordinates `(row, col)`.

    Uses the `GlimpseSensor` convention: `(-1, -1)` is the top-left corner of
    the top-left pixel, so the centre is `(l + 1) / 2 * size`, minus half a
    pixel to land on pixel centres for drawing.

    Args:
        locations: array or tensor `(..., 2)` of `(y, x)`.
        height: int. Image height.
        width: int. Image width.

    Returns:
        Float array `(..., 2)` of `(row, col)` pixel-centre coordinates.
    """
    locations = as_numpy(locations, "float32")
    size = np.array([height, width], "float32")
    return (locations + 1.0) * 0.5 * size - 0.5


def plot_glimpses(
    images,
    locations,
    path,
    patch_size,
    num_scales=1,
    scale_factor=2,
    titles=None,
    columns=4,
):
    """Saves images with their glimpse paths as a PNG grid.

    Args:
        images: array or tensor `(n, height, width)` or `(n, height, width, c)`,
            uint8 or float.
        locations: array or tensor `(n, num_glimpses, 2)` of `(y, x)` in `[-1, 1]`, as
            returned by `RecurrentAttentionModel.glimpses`.
        path: str. Output PNG path; parent folders are created.
        patch_size: int. Retina patch side in pixels.
        num_scales: int. Retina scales drawn at each glimpse. Defaults to `1`.
        scale_factor: int. Side ratio of successive patches. Defaults to `2`.
        titles: optional list of `n` strings (e.g. "true / predicted").
        columns: int. Images per row. Defaults to `4`.

    Returns:
        str. `path`.
    """
    plt = pyplot()
    from matplotlib.patches import Rectangle

    images = as_numpy(images)
    locations = as_numpy(locations)
    if images.ndim == 4 and images.shape[-1] == 1:
        images = images[..., 0]
    if len(images) != len(locations):
        raise ValueError(
            f"{len(images)} images but {len(locations)} glimpse paths were given."
        )
    n = len(images)
    columns = min(columns, n)
    rows = -(-n // columns)
    fig, axes = plt.subplots(
        rows, columns, figsize=(3 * columns, 3 * rows), squeeze=False
    )
    colours = plt.cm.autumn(np.linspace(0, 1, locations.shape[1]))
    for ax in axes.flat[n:]:
        ax.axis("off")
    for i in range(n):
        ax = axes.flat[i]
        height, width = images[i].shape[:2]
        ax.imshow(images[i], cmap="gray" if images[i].ndim == 2 else None)
        centres = to_pixels(locations[i], height, width)
        ax.plot(centres[:, 1], centres[:, 0], "-", color="cyan", linewidth=1)
        for t, (row, col) in enumerate(centres):
            for k in range(num_scales if t == 0 else 1):
                side = patch_size * scale_factor**k
                ax.add_patch(
                    Rectangle(
                        (col - side / 2, row - side / 2),
                        side,
                        side,
                        fill=False,
                        edgecolor=colours[t],
                        linewidth=1.2 if k == 0 else 0.6,
                        linestyle="-" if k == 0 else "--",
                    )
                )
            ax.text(col, row, str(t + 1), color=colours[t], fontsize=7, ha="center")
        ax.set_xlim(-0.5, width - 0.5)
        ax.set_ylim(height - 0.5, -0.5)
        ax.set_xticks([])
        ax.set_yticks([])
        if titles is not None:
            ax.set_title(titles[i], fontsize=8)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
