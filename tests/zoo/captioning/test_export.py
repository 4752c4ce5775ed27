"""`export_captioner`: a captioning SavedModel that runs without the zoo.

A tiny captioner (random weights, so captions use many subwords, suffixes
`##x` included) and the shipped preset are exported, greedy and beam; one
fresh process, where `zoo`, `keras_attention`, keras-hub, Keras and
tensorflow-text cannot be imported (`tests/zoo/hidden_zoo.py`), loads the
exports and calls both signatures. Captions must equal `caption(...)`
exactly; scores the search's own scores and attention maps
`caption(..., return_attention=True)`'s to 1e-5 (float rounding of the same
ops in another function).
"""

import functools
import importlib.util
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_attention.decoding import BeamSearch, GreedySearch
from zoo.captioning.export import detokenize, export_captioner
from zoo.data import scenes, vocabulary
from zoo.show_attend_tell import CaptionPreprocessor, ShowAttendTell

pytestmark = pytest.mark.tensorflow_only

_spec = importlib.util.spec_from_file_location(
    "hidden_zoo",
    os.path.join(os.path.dirname(os.path.dirname(__file__)), "hidden_zoo.py"),
)
hidden_zoo = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(hidden_zoo)

PRESET = "show_attend_tell_fashion_scenes"
HIDDEN = hidden_zoo.HIDDEN + ("tensorflow_text",)
TOLERANCE = dict(rtol=1e-5, atol=1e-6)
RNG = np.random.default_rng(0)


@functools.lru_cache(maxsize=1)
def vocab():
    captions = scenes.load("train", num_scenes=48, sample=True)["captions"]
    return vocabulary.train_wordpiece(captions, 100)


def tiny():
    keras.utils.set_random_seed(0)
    preprocessor = CaptionPreprocessor(vocab(), sequence_length=8)
    model = ShowAttendTell(
        len(vocab()),
        annotation_dim=16,
        embedding_dim=16,
        units=32,
        dropout=0.0,
        seed=0,
        preprocessor=preprocessor,
    )
    rng = np.random.default_rng(1)
    # Trainable only: batch norm's moving variance must stay positive.
    for variable in model.trainable_weights:
        variable.assign(rng.normal(0, 0.3, variable.shape).astype("float32"))
    return model


def scores(model, images, search):
    """The search's scores `(batch,)` for `caption`'s decoding of `images`."""
    pre = model.preprocessor
    cache = model.encode(pre.images(images), pre.sequence_length)
    prompt = np.full((len(images), 1 + pre.sequence_length), pre.pad_id, "int32")
    prompt[:, 0] = pre.start_id
    _, found = search(
        model.next,
        prompt,
        cache=cache,
        index=1,
        stop_token_ids=[pre.end_id],
        pad_token_id=pre.pad_id,
        return_scores=True,
    )
    return np.asarray(found)


def assert_same(answer, model, images, beam_width):
    """The export's answer equals `caption`'s captions, scores and maps."""
    captions, maps = model.caption(images, beam_width=beam_width, return_attention=True)
    assert [c.decode() for c in answer["caption"]] == captions
    search = GreedySearch() if beam_width == 1 else BeamSearch(beam_width, 0.0)
    np.testing.assert_allclose(
        answer["score"], scores(model, np.asarray(images), search), **TOLERANCE
    )
    for i, wanted in enumerate(maps):
        length = int(answer["length"][i])
        assert length == len(wanted["tokens"])
        tokens = [t.decode() for t in answer["tokens"][i]]
        assert tokens[:length] == wanted["tokens"]
        assert set(tokens[length:]) <= {""}
        # Stopped at max_length, not at `[END]`: flagged, not silent.
        assert answer["output_truncated"][i] == ("[END]" not in wanted["tokens"])
        np.testing.assert_allclose(
            answer["attention"][i, :length], wanted["weights"], **TOLERANCE
        )
    assert answer["score"].dtype == np.float32
    assert np.all(answer["score"] <= 0)


def png(image):
    return tf.io.encode_png(image).numpy()


@functools.lru_cache(maxsize=1)
def inputs():
    test = scenes.load("test", num_scenes=6, sample=True, seed=11)
    gray = test["images"][..., None]  # 84x84, the model's size: no resize
    rgb = RNG.integers(0, 256, (3, 50, 61, 3), dtype="uint8")  # resized
    rgba = RNG.integers(0, 256, (2, 30, 30, 4), dtype="uint8")
    mixed = [gray[0], rgb[0], rgba[0]]
    jpeg = [tf.io.encode_jpeg(image).numpy() for image in rgb]
    return {
        "gray": gray,
        "rgb": rgb,
        "rgba": rgba,
        "mixed": mixed,
        "jpeg": jpeg,
    }


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """Tiny greedy and beam exports, the preset's, and the zoo-less answers."""
    root = tmp_path_factory.mktemp("caption-export")
    models = {"tiny": tiny(), "preset": ShowAttendTell.from_preset(PRESET)}
    paths = {
        "greedy": export_captioner(models["tiny"], root / "greedy", beam_width=1),
        "beam": export_captioner(models["tiny"], root / "beam", beam_width=3),
        "preset": export_captioner(models["preset"], root / "preset", beam_width=3),
    }
    data = inputs()
    calls = {}
    for name in ("greedy", "beam"):
        for images in ("gray", "rgb", "rgba"):
            calls[f"{name}/{images}"] = (paths[name], "serve", {"image": data[images]})
        calls[f"{name}/mixed"] = (
            paths[name],
            "serve_bytes",
            {"image_bytes": [png(i) for i in data["mixed"]]},
        )
        calls[f"{name}/jpeg"] = (
            paths[name],
            "serve_bytes",
            {"image_bytes": data["jpeg"]},
        )
    calls["preset/gray"] = (paths["preset"], "serving_default", {"image": data["gray"]})
    calls["preset/png"] = (
        paths["preset"],
        "serve_bytes",
        {"image_bytes": [png(i) for i in data["gray"]]},
    )
    answers = hidden_zoo.call_signatures(calls, hidden=HIDDEN)
    return models, paths, answers


def test_export_loads_without_zoo_keras_hub_and_tensorflow_text(exports):
    _, paths, answers = exports
    assert sorted(answers["hidden"]) == sorted(HIDDEN)
    for path in paths.values():
        assert answers["signatures"][os.path.abspath(path)] == [
            "serve",
            "serve_bytes",
            "serving_default",
        ]


@pytest.mark.parametrize("name, beam_width", [("greedy", 1), ("beam", 3)])
def test_uint8_images_of_any_size_and_channels_caption_as_caption(
    exports, name, beam_width
):
    models, _, answers = exports
    data = inputs()
    for images in ("gray", "rgb", "rgba"):
        assert_same(
            answers[f"{name}/{images}"], models["tiny"], data[images], beam_width
        )


@pytest.mark.parametrize("name, beam_width", [("greedy", 1), ("beam", 3)])
def test_encoded_images_caption_as_the_decoded_arrays(exports, name, beam_width):
    models, _, answers = exports
    data = inputs()
    mixed = answers[f"{name}/mixed"]
    for i, image in enumerate(data["mixed"]):
        one = {key: value[i : i + 1] for key, value in mixed.items()}
        assert_same(one, models["tiny"], image[None], beam_width)
    decoded = np.stack([tf.io.decode_jpeg(f).numpy() for f in data["jpeg"]])
    assert_same(answers[f"{name}/jpeg"], models["tiny"], decoded, beam_width)


def test_shipped_preset_export_captions_as_the_preset(exports):
    models, _, answers = exports
    images = inputs()["gray"]
    assert_same(answers["preset/gray"], models["preset"], images, 3)
    assert [c.decode() for c in answers["preset/png"]["caption"]] == [
        c.decode() for c in answers["preset/gray"]["caption"]
    ]
    # The trained model says something about each scene, not noise.
    captions = answers["preset/gray"]["caption"].tolist()
    assert all(c.startswith(b"a ") for c in captions)
    assert len(set(captions)) > 1


def test_detokenize_joins_subwords_as_the_tokenizer():
    tokenizer = CaptionPreprocessor(vocab()).tokenizer
    words = tokenizer.get_vocabulary()
    ids = RNG.integers(4, len(words), (200, 6))
    ids[:50, 0] = [i for i, w in enumerate(words) if w.startswith("##")][0]
    wanted = [tokenizer.detokenize(tf.constant([row], "int32")) for row in ids]
    wanted = [text(keras.ops.convert_to_numpy(w)[0]) for w in wanted]
    found = detokenize(tf.gather(tf.constant(words), ids), tf.ones(ids.shape, bool))
    assert [text(t) for t in found.numpy()] == wanted


def text(value):
    return value.decode() if isinstance(value, bytes) else str(value)


def test_bad_arguments_and_images_fail_clearly(exports, tmp_path):
    models, paths, _ = exports
    with pytest.raises(ValueError, match="beam_width"):
        export_captioner(models["tiny"], tmp_path, beam_width=0)
    serve = tf.saved_model.load(paths["greedy"]).signatures["serve"]
    with pytest.raises(tf.errors.InvalidArgumentError, match="1 or 3 or 4 channels"):
        serve(image=tf.zeros((1, 8, 8, 2), tf.uint8))
    serve_bytes = tf.saved_model.load(paths["greedy"]).signatures["serve_bytes"]
    with pytest.raises(tf.errors.InvalidArgumentError):
        serve_bytes(image_bytes=tf.constant([b"not an image"]))
