"""The attention figures take the backend's tensors, on every backend (#43).

`make test` runs it under TensorFlow, JAX and PyTorch. The alignment
heatmap (`keras_attention.plotting.plot_attention`), the caption overlays
(`zoo.captioning.plotting`) and the glimpse paths (`zoo.ram.plotting`) are
drawn from tensors of the Keras backend, among them a variable's value (a
PyTorch tensor that requires gradients, which `np.asarray` refuses), and
must write the PNG that the same values as NumPy arrays give.
"""

import keras
import matplotlib.image
import numpy as np
import pytest

from keras_attention.plotting import plot_attention
from zoo.captioning.plotting import plot_caption_attention
from zoo.ram.plotting import plot_glimpses

RNG = np.random.default_rng(0)
WEIGHTS = RNG.dirichlet(np.ones(5), size=3).astype("float32")
IMAGE = RNG.integers(0, 256, (12, 12, 1)).astype("uint8")
MAPS = RNG.dirichlet(np.ones(9), size=2).reshape(2, 3, 3).astype("float32")
LOCATIONS = RNG.uniform(-0.8, 0.8, (1, 3, 2)).astype("float32")


def _tensor(array, variable):
    """Floats as the backend's tensor; a variable's value if `variable`."""
    if variable:
        return keras.Variable(array).value
    return keras.ops.convert_to_tensor(array)


# name: plot(floats, images, path), `floats` and `images` converting arrays.
PLOTS = {
    "alignment": lambda floats, images, path: plot_attention(
        floats(WEIGHTS), path, list("abcde"), list("xyz")
    ),
    "caption": lambda floats, images, path: plot_caption_attention(
        images(IMAGE), ["a", "bag"], floats(MAPS), path, title="a bag"
    ),
    "glimpses": lambda floats, images, path: plot_glimpses(
        images(IMAGE[None]), floats(LOCATIONS), path, patch_size=4
    ),
}


@pytest.mark.parametrize("variable", [False, True], ids=["tensor", "variable"])
@pytest.mark.parametrize("plot", list(PLOTS))
def test_a_plot_of_tensors_is_the_plot_of_their_values(plot, variable, tmp_path):
    expected = PLOTS[plot](np.asarray, np.asarray, str(tmp_path / "numpy.png"))
    written = PLOTS[plot](
        lambda array: _tensor(array, variable),
        keras.ops.convert_to_tensor,
        str(tmp_path / "tensor.png"),
    )
    assert written == str(tmp_path / "tensor.png")
    np.testing.assert_array_equal(
        matplotlib.image.imread(written), matplotlib.image.imread(expected)
    )
