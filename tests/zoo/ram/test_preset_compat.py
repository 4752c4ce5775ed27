"""A preset saved by the old single-module code loads unchanged.

`old_layout/ram_fashion_mnist_translated` is the first RAM preset, shipped
until issue 42 and kept here (not in the package) as the test of that
layout; its training command is in `experiments/ram/README.md`.

`ram_fashion_mnist_translated_outputs.npz` holds 16 translated test canvases
(Fashion-MNIST test set, seed 1) with the logits and glimpse locations the
preset gave under the code before the backbone / task split
(`zoo/ram/model.py`, recorded once with `model.predict` and
`model.glimpses`). Its `config.json` names the old module `zoo.ram.model`
and its `model.weights.h5` holds the agent at the top level
(`layers/recurrent_attention`); both still load.
"""

import hashlib
import os
import shutil

import h5py
import numpy as np
import pytest

import zoo
from zoo.data import fashion_mnist
from zoo.ram import RecurrentAttentionModel

pytestmark = pytest.mark.tensorflow_only

NAME = "ram_fashion_mnist_translated"
HERE = os.path.dirname(__file__)
OLD_PRESET = os.path.join(HERE, "old_layout", NAME)
RECORDED = os.path.join(HERE, f"{NAME}_outputs.npz")
# The files as shipped, byte for byte (as committed before the split).
SHA256 = {
    "config.json": "f9827901e973e9978485eefac3d00f7c2ee5679e9925476b5dddb00be4e54a88",
    "metadata.json": "867c68be307630438e39bea7bde88fbecd6b48a951f3158140707a3739a833da",
    "model.weights.h5": "3be73681a5d185b6941a4f514b8db2b456c8c8ab30d4c41b8052fc0917b1f18b",
    "preprocessor.json": "a35f0a4f3dbfcdec1a87049d303472941aaf29daa3caaf113c5b7ff3ed95375a",
}


@pytest.fixture(scope="module")
def recorded():
    return dict(np.load(RECORDED))


@pytest.fixture(scope="module")
def old_copy(tmp_path_factory):
    """A copy of the old-layout preset directory."""
    copy = tmp_path_factory.mktemp("preset") / NAME
    shutil.copytree(OLD_PRESET, copy)
    return copy


@pytest.fixture(scope="module")
def model(old_copy):
    return RecurrentAttentionModel.from_preset(str(old_copy))


def test_old_preset_files_are_unchanged_and_no_longer_shipped():
    assert NAME not in zoo.list_presets()
    directory = OLD_PRESET
    assert sorted(os.listdir(directory)) == sorted(SHA256)
    for name, digest in SHA256.items():
        with open(os.path.join(directory, name), "rb") as f:
            assert hashlib.sha256(f.read()).hexdigest() == digest, name


def test_old_layout_is_what_the_copy_holds(old_copy):
    with open(old_copy / "config.json", encoding="utf-8") as f:
        assert '"module": "zoo.ram.model"' in f.read()
    with h5py.File(old_copy / "model.weights.h5", "r") as f:
        assert "layers/recurrent_attention" in f
        assert "layers/recurrent_attention_backbone" not in f


def test_copy_of_the_shipped_preset_gives_the_recorded_outputs(model, recorded):
    assert isinstance(model, RecurrentAttentionModel)
    logits = model.predict(recorded["images"], verbose=0)
    np.testing.assert_allclose(logits, recorded["logits"], rtol=1e-4, atol=1e-4)
    assert (logits.argmax(-1) == recorded["logits"].argmax(-1)).all()
    locations = model.glimpses(recorded["images"])
    np.testing.assert_allclose(locations, recorded["locations"], atol=1e-4)
    floats = recorded["images"].astype("float32") / 255.0
    np.testing.assert_allclose(
        model.predict(floats, verbose=0), recorded["logits"], rtol=1e-4, atol=1e-4
    )


def test_old_preset_classifies_with_the_fashion_mnist_names(model, recorded):
    assert model.class_names == tuple(fashion_mnist.CLASS_NAMES)
    names, probabilities = model.classify(recorded["images"], top_k=2)
    expected = [fashion_mnist.CLASS_NAMES[i] for i in recorded["logits"].argmax(-1)]
    assert names[:, 0].tolist() == expected
    assert np.all(probabilities[:, 0] >= probabilities[:, 1])


def test_resaved_preset_has_the_new_layout_and_the_same_outputs(
    model, recorded, tmp_path
):
    model.save_to_preset(str(tmp_path / "new"), metadata={"note": "resaved"})
    with h5py.File(tmp_path / "new" / "model.weights.h5", "r") as f:
        assert "layers/recurrent_attention_backbone/layers/recurrent_attention" in f
        assert "layers/recurrent_attention" not in f
    loaded = RecurrentAttentionModel.from_preset(str(tmp_path / "new"))
    config = loaded.get_config()
    assert config["class_names"] == list(fashion_mnist.CLASS_NAMES)
    assert config["dtype"]["config"]["name"] == "float32"
    np.testing.assert_allclose(
        loaded.predict(recorded["images"], verbose=0),
        recorded["logits"],
        rtol=1e-4,
        atol=1e-4,
    )


def test_old_weights_file_loads_into_a_new_model(old_copy, recorded):
    model = RecurrentAttentionModel(
        cell="lstm", patch_size=12, num_scales=3, num_glimpses=6, seed=0
    )
    model.load_weights(str(old_copy / "model.weights.h5"))
    np.testing.assert_allclose(
        model.glimpses(recorded["images"]), recorded["locations"], atol=1e-4
    )
