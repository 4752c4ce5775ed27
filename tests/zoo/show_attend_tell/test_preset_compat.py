"""The shipped preset, byte for byte as saved before the backbone split, loads
into today's classes and gives the outputs the old `zoo.show_attend_tell.model`
gave.

`show_attend_tell_fashion_scenes_outputs.npz` was computed with the old code
(commit fe41a0d, `ShowAttendTell.generate` / `caption` / `predict`) on 8
held-out scenes (`scenes.load("test", num_scenes=8, sample=True, seed=11)`).
"""

import os
import shutil

import h5py
import numpy as np
import pytest
import tensorflow as tf

from keras_attention import presets
from zoo.base.task import list_presets
from zoo.show_attend_tell import ShowAttendTell

NAME = "show_attend_tell_fashion_scenes"
OLD = os.path.join(os.path.dirname(__file__), f"{NAME}_outputs.npz")

pytestmark = pytest.mark.tensorflow_only


@pytest.fixture(scope="module")
def old():
    return dict(np.load(OLD))


@pytest.fixture(scope="module")
def copy(tmp_path_factory):
    """A copy of today's shipped preset directory."""
    directory = tmp_path_factory.mktemp("preset") / NAME
    shutil.copytree(list_presets()[NAME], directory)
    return directory


@pytest.fixture(scope="module")
def model(copy):
    return ShowAttendTell.from_preset(str(copy))


def weight_paths(path):
    found = {}
    with h5py.File(path, "r") as f:
        f.visititems(
            lambda name, obj: (
                found.update({name: obj.shape})
                if isinstance(obj, h5py.Dataset)
                else None
            )
        )
    return found


def test_copy_is_the_shipped_preset_in_its_old_layout(copy):
    meta = presets.verify_preset(str(copy))  # sha256 of every file
    config = open(os.path.join(copy, "config.json")).read()
    assert '"module": "zoo.show_attend_tell.model"' in config  # the old module
    assert meta["class_name"] == "ShowAttendTell"


def test_old_preset_gives_the_old_tokens_captions_and_attention(model, old):
    pre = model.preprocessor
    images = pre.images(old["images"])
    np.testing.assert_array_equal(model.generate(images), old["greedy_tokens"])
    np.testing.assert_array_equal(
        model.generate(images, beam_width=3), old["beam3_tokens"]
    )
    assert model.caption(old["images"], beam_width=1) == list(old["greedy_captions"])
    texts, maps = model.caption(old["images"], beam_width=3, return_attention=True)
    assert texts == list(old["beam3_captions"])
    for i, m in enumerate(maps):
        n = old["beam3_attention_lengths"][i]
        np.testing.assert_allclose(
            m["weights"], old["beam3_attention"][i, :n], rtol=1e-5, atol=1e-6
        )


def test_old_preset_gives_the_old_teacher_forced_logits(model, old):
    x, _, _ = model.preprocessor(old["images"], tf.constant(list(old["references"])))
    np.testing.assert_array_equal(x["decoder_token_ids"], old["decoder_token_ids"])
    np.testing.assert_allclose(
        model.predict(x, verbose=0), old["teacher_forced_logits"], rtol=1e-5, atol=1e-5
    )


def test_new_layout_round_trip_keeps_weight_paths_and_outputs(
    model, copy, old, tmp_path
):
    model.save_to_preset(str(tmp_path / "resaved"))
    # One weight layout: the new model writes the paths the old one wrote.
    assert weight_paths(tmp_path / "resaved" / "model.weights.h5") == weight_paths(
        copy / "model.weights.h5"
    )
    loaded = ShowAttendTell.from_preset(str(tmp_path / "resaved"))
    assert loaded.get_config() == model.get_config()
    texts = loaded.caption(old["images"], beam_width=3)
    assert texts == list(old["beam3_captions"])
