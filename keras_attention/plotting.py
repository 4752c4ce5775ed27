"""Attention figures: alignment heatmaps saved as PNG.

Matplotlib is imported lazily with the non-interactive Agg backend, so these
helpers work on machines without a display.
"""

import os

import numpy as np


def pyplot():
    """`matplotlib.pyplot` on the non-interactive Agg backend (no display needed).

    Example:
    >>> plt = pyplot()
    >>> plt.get_backend().lower()
    'agg'
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def as_numpy(values, dtype=None):
    """`values` as a NumPy array, whichever backend's tensor they are.

    A tensor of the Keras backend goes through `keras.ops.convert_to_numpy`,
    which moves it off an accelerator and detaches a PyTorch tensor that
    requires gradients (`np.asarray` refuses both); anything else through
    `np.asarray`.

    Args:
        values: array-like, or a tensor of the Keras backend.
        dtype: optional NumPy dtype of the result.

    Example:
    >>> import keras
    >>> as_numpy(keras.Variable([[0.25, 0.75]]).value, "float32")
    array([[0.25, 0.75]], dtype=float32)
    """
    import keras

    if keras.ops.is_tensor(values):
        values = keras.ops.convert_to_numpy(values)
    return np.asarray(values, dtype)


def plot_attention(
    weights,
    path,
    x_labels=None,
    y_labels=None,
    title=None,
    x_label="source",
    y_label="target",
    cmap="gray",
):
    """Saves an attention matrix as a heatmap PNG (Bahdanau et al., fig. 3).

    Rows are queries (e.g. generated target tokens), columns are keys (e.g.
    source tokens); a brighter cell is a larger weight.

    Args:
        weights: array-like or tensor `(Tq, Tv)` of attention weights.
        path: str. Output PNG path; parent folders are created.
        x_labels: optional list of `Tv` column labels.
        y_labels: optional list of `Tq` row labels.
        title: optional figure title.
        x_label: str. Axis name of the columns. Defaults to `"source"`.
        y_label: str. Axis name of the rows. Defaults to `"target"`.
        cmap: str. Matplotlib colour map. Defaults to `"gray"`.

    Returns:
        The path written.

    Example:
    >>> import numpy as np
    >>> plot_attention(np.eye(3), "/tmp/attention.png", ["a", "b", "c"])
    '/tmp/attention.png'

    Reference:
        Bahdanau et al., 2014, "Neural Machine Translation by Jointly Learning
        to Align and Translate", figure 3.
    """
    weights = as_numpy(weights, "float32")
    if weights.ndim != 2:
        raise ValueError(
            f"`weights` must be a (Tq, Tv) matrix. Received: shape={weights.shape}"
        )
    rows, cols = weights.shape
    for name, labels, size in (
        ("x_labels", x_labels, cols),
        ("y_labels", y_labels, rows),
    ):
        if labels is not None and len(labels) != size:
            raise ValueError(
                f"`{name}` needs {size} labels for weights of shape "
                f"{weights.shape}. Received: {len(labels)} labels"
            )
    plt = pyplot()
    width = min(2 + 0.45 * cols, 24)
    height = min(1.5 + 0.45 * rows, 24)
    fig, ax = plt.subplots(figsize=(width, height))
    image = ax.imshow(
        weights, cmap=cmap, vmin=0.0, vmax=max(1e-9, float(weights.max()))
    )
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    if x_labels is not None:
        ax.set_xticks(range(cols), labels=list(x_labels), rotation=90)
    if y_labels is not None:
        ax.set_yticks(range(rows), labels=list(y_labels))
    if title:
        ax.set_title(title)
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    fig.tight_layout()
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
