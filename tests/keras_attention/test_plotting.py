"""Attention heatmaps are written as real PNGs of the right size."""

import numpy as np
import pytest

from keras_attention.plotting import plot_attention


def test_plot_attention_writes_png(tmp_path):
    import matplotlib.image

    path = tmp_path / "sub" / "attention.png"
    weights = np.random.default_rng(0).dirichlet(np.ones(4), size=3)
    out = plot_attention(weights, str(path), ["a", "b", "c", "d"], ["x", "y", "z"], "t")
    assert out == str(path)
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    image = matplotlib.image.imread(path)
    assert image.shape[0] > 100 and image.shape[1] > 100


def test_plot_attention_rejects_bad_shapes(tmp_path):
    with pytest.raises(ValueError, match=r"shape=\(4,\)"):
        plot_attention(np.ones(4), str(tmp_path / "a.png"))
    with pytest.raises(ValueError, match="`x_labels` needs 3 labels"):
        plot_attention(np.ones((2, 3)), str(tmp_path / "a.png"), x_labels=["a"])
