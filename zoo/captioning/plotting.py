"""The Show-Attend-Tell figure: one attention overlay per generated word."""

import math
import os

import numpy as np

from keras_attention.plotting import as_numpy, pyplot


def plot_caption_attention(
    image, tokens, weights, path, title=None, columns=5, smooth=True, cmap="gray"
):
    """Saves the image and, per word, the image with its attention overlaid.

    As in Xu et al.'s figures 2-3: each panel shows the image under the
    step's attention map, stretched over the image (a grid cell covers the
    pixels it tiles; `smooth` interpolates bilinearly), brighter where the
    model looks, with the word written above it.

    Args:
        image: array or tensor `(H, W)`, `(H, W, 1)` or `(H, W, 3)`, uint8
            or floats in `[0, 1]`.
        tokens: list of str. The generated words (e.g. ending with
            `"[END]"`).
        weights: array or tensor `(len(tokens), h, w)`: the attention of each step
            (from `ShowAttendTell.caption(..., return_attention=True)`).
        path: str. The PNG to write; parent folders are created.
        title: optional str above the first panel (e.g. the caption).
        columns: int. Panels per row. Defaults to `5`.
        smooth: bool. Bilinear instead of blocky maps. Defaults to `True`.
        cmap: str. Colour map of the image. Defaults to `"gray"`.

    Returns:
        The path written.

    Example:
    >>> text, maps = model.caption(image, return_attention=True)  # doctest: +SKIP
    >>> plot_caption_attention(image, maps["tokens"], maps["weights"],
    ...                        "caption.png", title=text)  # doctest: +SKIP
    'caption.png'

    Reference:
        Xu et al., 2015, "Show, Attend and Tell", figures 2 and 3.
    """
    image = as_numpy(image)
    if image.ndim == 3 and image.shape[-1] == 1:
        image = image[..., 0]
    if image.ndim not in (2, 3):
        raise ValueError(
            f"`image` must be (H, W) or (H, W, C). Received: shape={image.shape}"
        )
    if image.dtype == np.uint8:
        image = image.astype("float32") / 255.0
    weights = as_numpy(weights, "float32")
    if weights.ndim != 3 or len(weights) != len(tokens):
        raise ValueError(
            "`weights` must be (len(tokens), h, w). Received: "
            f"shape={weights.shape} for {len(tokens)} tokens"
        )
    plt = pyplot()
    panels = len(tokens) + 1
    columns = max(1, min(columns, panels))
    rows = math.ceil(panels / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(2.2 * columns, 2.4 * rows))
    axes = np.atleast_1d(axes).reshape(-1)
    height, width = image.shape[:2]
    extent = (0, width, height, 0)
    axes[0].imshow(image, cmap=cmap, vmin=0, vmax=1, extent=extent)
    axes[0].set_title(title or "image", fontsize=8, wrap=True)
    for ax, token, attention in zip(axes[1:], tokens, weights):
        ax.imshow(image, cmap=cmap, vmin=0, vmax=1, extent=extent)
        ax.imshow(
            attention,
            cmap="viridis",
            alpha=0.6,
            vmin=0.0,
            vmax=max(1e-9, float(attention.max())),
            extent=extent,
            interpolation="bilinear" if smooth else "nearest",
        )
        ax.set_title(token, fontsize=10)
    for ax in axes:
        ax.axis("off")
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
