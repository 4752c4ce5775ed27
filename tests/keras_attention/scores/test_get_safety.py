"""`scores.get` builds nothing but a score: a config dict naming any other
object (a layer, Keras's `__numpy__` array) is refused before it is built.

A `.keras` file whose `Attention(score=...)` holds a `__numpy__` array of
dtype `"U100000000"` (400 MB an element) passed 5 GiB when `get`
deserialized first and checked after; its load runs in a bounded child
process (`tests/bounded.py`), so the test stops by itself on such code.
"""

import importlib.util
import json
import os
import zipfile

import keras
import pytest

from keras_attention import layers, scores

_spec = importlib.util.spec_from_file_location(
    "bounded",
    os.path.join(
        os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "bounded.py"
    ),
)
bounded = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bounded)

BUILT = []


@keras.saving.register_keras_serializable(package="tests_get_safety")
class Recorder(keras.layers.Layer):
    """A layer that is not a score and records that it was built."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        BUILT.append(self)


@keras.saving.register_keras_serializable(package="tests_get_safety")
class Halved(scores.Dot):
    """A user's score, registered with Keras: `get` still takes its config."""

    def call(self, query, key):
        return super().call(query, key) / 2.0


def test_a_config_of_another_layer_is_refused_before_it_is_built():
    BUILT.clear()
    config = keras.saving.serialize_keras_object(Recorder(name="r"))
    BUILT.clear()
    with pytest.raises(ValueError, match="does not describe a score layer"):
        scores.get(config)
    assert BUILT == []  # Refused by name, not after building it.


def test_a_numpy_array_config_is_refused_unbuilt():
    numpy = {"class_name": "__numpy__", "config": {"value": "x", "dtype": "U9"}}
    with pytest.raises(ValueError, match="class_name='__numpy__' is not a score"):
        scores.get(numpy)


@pytest.mark.parametrize("name", [None, 3, ["dot"]])
def test_a_config_without_a_string_class_name_is_refused(name):
    with pytest.raises(ValueError, match="does not describe a score layer"):
        scores.get({"class_name": name, "config": {}})


def test_a_registered_user_score_still_deserializes():
    clone = scores.get(scores.serialize(Halved(name="halved")))
    assert type(clone) is Halved and clone.name == "halved"


# 173 bytes of JSON that ask NumPy for 16 elements of 400 MB each.
NUMPY = {
    "class_name": "__numpy__",
    "config": {"value": ["x"] * 16, "dtype": "U100000000"},
}

LOAD_KERAS = """
import keras
import keras_attention
try:
    keras.saving.load_model({path!r})
except Exception as e:
    print("refused:", type(e).__name__, e)
"""


def _attention_file(path):
    query, value = keras.Input((2, 4)), keras.Input((3, 4))
    output = layers.Attention(score="dot", name="attention")([query, value])
    keras.Model([query, value], output).save(path)


def _set_score(path, score):
    """Rewrites the `score` of the `.keras` file's attention layer."""
    with zipfile.ZipFile(path) as archive:
        files = {name: archive.read(name) for name in archive.namelist()}
    config = json.loads(files["config.json"])
    (layer,) = [
        layer for layer in config["config"]["layers"] if layer["name"] == "attention"
    ]
    layer["config"]["score"] = score
    files["config.json"] = json.dumps(config).encode()
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)


def test_keras_file_with_a_numpy_array_as_its_score_loads_in_bounded_memory(tmp_path):
    path = str(tmp_path / "attention.keras")
    _attention_file(path)
    _set_score(path, NUMPY)
    outcome = bounded.run(LOAD_KERAS.format(path=path), memory=2 << 30, seconds=90)
    assert outcome.stopped is None and outcome.returncode == 0, outcome
    assert "refused:" in outcome.output, outcome
    assert "class_name='__numpy__' is not a score" in outcome.output, outcome
