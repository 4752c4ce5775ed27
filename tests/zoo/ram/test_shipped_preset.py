"""The shipped RAM presets load, verify, classify and look at the item."""

import numpy as np
import pytest

import zoo
from keras_attention import presets
from zoo.data import fashion_mnist
from zoo.ram import RecurrentAttentionModel

NAME = "ram_fashion_mnist_translated_seeking_annealed"  # The default.


def sample_canvases(size, clutter_pieces=0):
    """The shipped sample's test items on `size` canvases (seed 1).

    With `clutter_pieces`, that many 8x8 pieces of other items are placed
    beside each item (`fashion_mnist.clutter`), as on the cluttered canvases.

    Returns `(canvases, positions, labels, centres)`: uint8 canvases, item
    positions, labels and the item centres in glimpse units
    (`zoo.ram.evaluation.item_centres`).
    """
    from zoo.ram import evaluation

    items = fashion_mnist.load_arrays("test", fashion_mnist.sample_path())[0]
    if clutter_pieces:
        canvases, positions = fashion_mnist.clutter(items, size, clutter_pieces, seed=1)
    else:
        canvases, positions = fashion_mnist.translate(items, size, seed=1)
    labels = fashion_mnist.load("test", sample=True)[1]
    return canvases, positions, labels, evaluation.item_centres(positions, size)


@pytest.mark.tensorflow_only
def test_default_preset_is_listed_verified_and_classifies():
    directory = zoo.list_presets()[NAME]
    meta = presets.verify_preset(directory)
    assert meta["class_name"] == "RecurrentAttentionModel"
    assert "python -m zoo.ram.train" in meta["command"]
    assert meta["data"]["test_images"] == 10000
    assert (meta["data"]["variant"], meta["data"]["canvas_size"]) == ("translated", 60)
    assert set(meta["table"]) == {"ram_translated_6"}
    model = zoo.from_preset(NAME)
    assert isinstance(model, RecurrentAttentionModel)
    assert (model.num_glimpses, model.patch_size, model.num_scales) == (6, 12, 2)
    # The shipped sample's 1,000 test items, translated (other positions than
    # the full test set's): 14.98% error on the full set, chance is 90%.
    images, labels = fashion_mnist.load("test", "translated", sample=True, seed=1)
    predicted = model.predict(images, verbose=0).argmax(-1)
    error = float(np.mean(predicted != labels))
    assert error < 0.22, error
    paths = model.glimpses(images[:4])
    assert paths.shape == (4, 6, 2)


@pytest.mark.tensorflow_only
def test_annealed_preset_follows_the_item_closer_than_the_first_glimpse():
    from zoo.ram import evaluation

    name = NAME
    meta = presets.verify_preset(zoo.list_presets()[name])
    for flag in (
        "--initial-weights ram_fashion_mnist_translated_seeking",
        "--learning-rate 1e-4",
        "--reinforce-core",
    ):
        assert flag in meta["command"]
    model = zoo.from_preset(name)
    assert (model.num_scales, model.test_samples) == (2, 1)
    canvases, positions, labels, centres = sample_canvases(60)
    first = np.random.default_rng(0).uniform(-1, 1, (len(labels), 2))
    for start in (None, first):
        locations, logits = model.look(canvases, start)
        # Full test set: 14.98% (card); the sample: 15.1% / 13.7%.
        assert float(np.mean(logits.argmax(-1) != labels)) < 0.22
        slopes = evaluation.following_slopes(locations, centres)
        assert np.all(slopes[3:] > 0.7), slopes  # sample: 0.85-0.94
    # From the centre the distance to the item falls right after the first
    # glimpse and stays down (sample: 0.43 -> 0.29-0.32).
    locations, _ = model.look(canvases)
    distances, _ = evaluation.glimpse_distances(locations, centres)
    assert np.all(distances[1:] < distances[0] - 0.05), distances
    # Ten sampled paths per canvas: still a classifier (sample: 12.4%).
    sampled = zoo.from_preset(name, test_samples=10)
    predicted = sampled.predict(canvases, verbose=0).argmax(-1)
    assert float(np.mean(predicted != labels)) < 0.22


@pytest.mark.tensorflow_only
def test_cluttered_100_preset_classifies_cluttered_100x100_canvases():
    from zoo.ram import evaluation

    name = "ram_fashion_mnist_cluttered_100_long"
    meta = presets.verify_preset(zoo.list_presets()[name])
    assert (meta["data"]["variant"], meta["data"]["canvas_size"]) == ("cluttered", 100)
    for flag in (
        "--preset-row ram_cluttered_6",
        "--glimpse-filters 16 32",
        "--reinforce-core",
        "--random-first-glimpse",
    ):
        assert flag in meta["command"]
    model = zoo.from_preset(name)
    assert (model.num_scales, tuple(model.glimpse_filters)) == (4, (16, 32))
    canvases, _, labels, centres = sample_canvases(100, clutter_pieces=8)
    locations, logits = model.look(canvases)
    # Full test set: 12.28% (card); the sample: 10.4%; chance is 90%.
    assert float(np.mean(logits.argmax(-1) != labels)) < 0.2
    # From the second glimpse on the policy follows the item among the
    # clutter (sample: slope 0.56-0.58, then 0.77-0.83) and stays near it
    # (distance 0.57 at the centre, then 0.28-0.31).
    slopes = evaluation.following_slopes(locations, centres)
    assert np.all(slopes[2:] > 0.6), slopes
    distances, _ = evaluation.glimpse_distances(locations, centres)
    assert np.all(distances[1:] < distances[0] - 0.15), distances
