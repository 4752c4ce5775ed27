"""`export_classifier`: a RAM SavedModel that runs without the zoo.

Tiny models (gray and RGB, ReLU and LSTM cores, random weights so classes
differ) and the shipped preset are exported; one fresh process, where
`zoo`, `keras_attention`, keras-hub and Keras cannot be imported
(`tests/zoo/hidden_zoo.py`), loads the exports and calls both signatures.
Its answers must equal the task's own: `classify`'s class names, `predict`'s
logits through a softmax, `glimpses`' paths. Class ids and names are
compared exactly; probabilities and paths to 1e-5, float rounding of the
same ops run in another function.
"""

import functools
import importlib.util
import os
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from zoo import cli
from zoo.data import fashion_mnist
from zoo.ram import RecurrentAttentionModel
from zoo.ram.export import export_classifier
from zoo.serving.export import METADATA_FILE, read_metadata

pytestmark = pytest.mark.tensorflow_only

_spec = importlib.util.spec_from_file_location(
    "hidden_zoo",
    os.path.join(os.path.dirname(os.path.dirname(__file__)), "hidden_zoo.py"),
)
hidden_zoo = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(hidden_zoo)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import tiny_models  # noqa: E402

PRESET = "ram_fashion_mnist_translated_seeking_annealed"
NAMES = ["cat", "dog", "owl", "yak"]
RNG = np.random.default_rng(0)
TOLERANCE = dict(rtol=1e-5, atol=1e-6)


def tiny(channels=1, cell="rnn"):
    return tiny_models.exportable_ram(channels, cell, NAMES)


def expected(model, images):
    """What the task itself says about `images`."""
    names, probabilities = model.classify(images, top_k=1)
    logits = model.predict(images, verbose=0)
    return {
        "class_name": names[:, 0],
        "top_probability": probabilities[:, 0],
        "probabilities": keras.ops.convert_to_numpy(keras.ops.softmax(logits)),
        "glimpse_path": model.glimpses(images),
    }


def assert_same(answer, wanted):
    names = [n.decode() for n in answer["class_name"]]
    assert names == wanted["class_name"].tolist()
    np.testing.assert_array_equal(
        answer["class_id"], np.argmax(wanted["probabilities"], axis=-1)
    )
    np.testing.assert_allclose(
        answer["probabilities"], wanted["probabilities"], **TOLERANCE
    )
    np.testing.assert_allclose(
        answer["probabilities"].max(-1), wanted["top_probability"], **TOLERANCE
    )
    np.testing.assert_allclose(
        answer["glimpse_path"], wanted["glimpse_path"], **TOLERANCE
    )
    assert answer["class_id"].dtype == np.int32
    assert answer["probabilities"].dtype == np.float32


def png(image):
    return tf.io.encode_png(image).numpy()


@functools.lru_cache(maxsize=1)
def inputs():
    gray = RNG.integers(0, 256, (5, 28, 28, 1), dtype="uint8")
    rgb = RNG.integers(0, 256, (3, 40, 33, 3), dtype="uint8")
    mixed = [gray[0], rgb[1], RNG.integers(0, 256, (17, 50, 1), dtype="uint8")]
    rgba = RNG.integers(0, 256, (2, 24, 24, 4), dtype="uint8")
    jpeg = [tf.io.encode_jpeg(image).numpy() for image in rgb]
    preset_images = fashion_mnist.load("test", "translated", sample=True, seed=1)[0]
    return {
        "gray": gray,
        "rgb": rgb,
        "mixed": mixed,
        "rgba": rgba,
        "jpeg": jpeg,
        "preset": preset_images[:6],
    }


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """The tiny models and the preset, exported, and the zoo-less answers."""
    root = tmp_path_factory.mktemp("ram-export")
    models = {
        "gray": tiny(1, "rnn"),
        "rgb": tiny(3, "lstm"),
        "preset": RecurrentAttentionModel.from_preset(PRESET),
    }
    paths = {
        name: export_classifier(models[name], root / name) for name in ("gray", "rgb")
    }
    # The preset goes through the command line (`python -m zoo export`).
    paths["preset"] = str(root / "preset")
    assert cli.main(["export", PRESET, paths["preset"]]) == 0
    data = inputs()
    calls = {
        "gray/gray": (paths["gray"], "serving_default", {"image": data["gray"]}),
        "gray/rgb": (paths["gray"], "serve", {"image": data["rgb"]}),
        "rgb/gray": (paths["rgb"], "serve", {"image": data["gray"]}),
        "rgb/rgb": (paths["rgb"], "serve", {"image": data["rgb"]}),
        "gray/png": (
            paths["gray"],
            "serve_bytes",
            {"image_bytes": [png(i) for i in data["gray"]]},
        ),
        "gray/mixed": (
            paths["gray"],
            "serve_bytes",
            {"image_bytes": [png(i) for i in data["mixed"]]},
        ),
        "rgb/rgba": (
            paths["rgb"],
            "serve_bytes",
            {"image_bytes": [png(i) for i in data["rgba"]]},
        ),
        "rgb/jpeg": (paths["rgb"], "serve_bytes", {"image_bytes": data["jpeg"]}),
        "preset/images": (
            paths["preset"],
            "serving_default",
            {"image": data["preset"][..., None]},
        ),
        "preset/png": (
            paths["preset"],
            "serve_bytes",
            {"image_bytes": [png(i[..., None]) for i in data["preset"]]},
        ),
    }
    answers = hidden_zoo.call_signatures(calls)
    return models, paths, answers


def test_export_loads_where_zoo_keras_and_keras_hub_cannot_be_imported(exports):
    _, paths, answers = exports
    assert sorted(answers["hidden"]) == sorted(hidden_zoo.HIDDEN)
    for path in paths.values():
        assert answers["signatures"][os.path.abspath(path)] == [
            "serve",
            "serve_bytes",
            "serving_default",
        ]


def test_uint8_images_answer_as_classify_predict_and_glimpses(exports):
    models, _, answers = exports
    data = inputs()
    for model in ("gray", "rgb"):
        for images in ("gray", "rgb"):
            wanted = expected(models[model], data[images])
            assert_same(answers[f"{model}/{images}"], wanted)


def test_encoded_images_answer_as_the_decoded_arrays(exports):
    models, _, answers = exports
    data = inputs()
    assert_same(answers["gray/png"], expected(models["gray"], data["gray"]))
    # Different sizes: classified one by one, as `classify` would each.
    mixed = answers["gray/mixed"]
    for i, image in enumerate(data["mixed"]):
        one = {key: value[i : i + 1] for key, value in mixed.items()}
        assert_same(one, expected(models["gray"], image[None]))
    # PNG's alpha channel is dropped; JPEG is compared with its decoding.
    assert_same(answers["rgb/rgba"], expected(models["rgb"], data["rgba"][..., :3]))
    decoded = np.stack([tf.io.decode_jpeg(f).numpy() for f in data["jpeg"]])
    assert_same(answers["rgb/jpeg"], expected(models["rgb"], decoded))


def test_shipped_preset_export_answers_as_the_preset(exports):
    models, paths, answers = exports
    images = inputs()["preset"]
    wanted = expected(models["preset"], images)
    assert_same(answers["preset/images"], wanted)
    assert_same(answers["preset/png"], wanted)
    assert set(wanted["class_name"]) <= set(fashion_mnist.CLASS_NAMES)
    description = os.path.join(paths["preset"], METADATA_FILE)
    with open(description) as f:
        assert '"kind": "classification"' in f.read()
    assert read_metadata(paths["preset"])["preset"] == PRESET


def test_task_export_is_the_zoo_export_and_other_formats_are_keras(exports, tmp_path):
    models, paths, _ = exports
    metadata = models["preset"].export(str(tmp_path / "method"))
    loaded = tf.saved_model.load(str(tmp_path / "method"))
    assert {"serving_default", "serve", "serve_bytes"} <= set(loaded.signatures)
    from_cli = read_metadata(paths["preset"])
    assert from_cli.pop("preset") == PRESET
    assert metadata == from_cli
    with pytest.raises(ValueError, match="format"):
        models["preset"].export(str(tmp_path / "other"), format="no-such-format")


def test_a_wrong_channel_count_fails_with_its_name(exports):
    _, paths, _ = exports
    serve = tf.saved_model.load(paths["gray"]).signatures["serve"]
    with pytest.raises(tf.errors.InvalidArgumentError, match="1 or 3 channels"):
        serve(image=tf.zeros((1, 8, 8, 2), tf.uint8))


def test_export_refuses_what_is_not_a_ram(tmp_path):
    with pytest.raises(TypeError, match="RecurrentAttentionModel"):
        export_classifier(keras.Sequential([keras.layers.Dense(2)]), tmp_path)
