"""`translate` / `caption` / `predict`: a clear error for every bad argument.

A beam width of 0 used to decode greedily, a negative batch size to return
nothing, `max_length=0` was ignored; int64 and float64 images of 0-255 were
captioned as garbage and a NaN image as ''. Each now raises, naming the
argument and what was received, and a good call after a bad one still works.
Float images of 0-255, the form `keras.utils.img_to_array` gives, are read
as such (a float image whose maximum exceeds 1), by `caption` and
`classify` alike.
"""

import importlib.util
import os

import keras
import numpy as np
import pytest

from zoo import registry

pytestmark = pytest.mark.tensorflow_only

_spec = importlib.util.spec_from_file_location(
    "tiny_models", os.path.join(os.path.dirname(__file__), "tiny_models.py")
)
tiny_models = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tiny_models)

#: The translation families (the registry's), each with a tiny model here.
TRANSLATORS = [family.name for family in registry.families("translation")]


@pytest.fixture(scope="module", params=TRANSLATORS)
def translator(request):
    return getattr(tiny_models, request.param)()


@pytest.fixture(scope="module")
def captioner():
    return tiny_models.show_attend_tell()


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"beam_width": 0}, ValueError, "beam_width=0"),
        ({"beam_width": -3}, ValueError, "beam_width=-3"),
        ({"beam_width": 2.5}, TypeError, "beam_width=2.5"),
        ({"batch_size": -1}, ValueError, "batch_size=-1"),
        ({"batch_size": 0}, ValueError, "batch_size=0"),
        ({"max_length": 0}, ValueError, "max_length=0"),
        ({"max_length": -4}, ValueError, "max_length=-4"),
    ],
)
def test_translate_refuses_bad_decoding_arguments(translator, kwargs, error, message):
    with pytest.raises(error, match=message):
        translator.translate(["In the beginning."], **kwargs)


@pytest.mark.parametrize(
    "texts, message",
    [
        (None, "texts=None"),
        (123, "texts=123"),
        (b"In the beginning.", "texts=b'In the beginning.'"),
        (["ok", 5], r"texts\[1\]=5"),
    ],
)
def test_translate_refuses_what_is_not_text(translator, texts, message):
    with pytest.raises(TypeError, match=message):
        translator.translate(texts)


def test_translate_still_works_after_a_bad_call(translator):
    with pytest.raises(ValueError):
        translator.translate("In the beginning.", beam_width=0)
    out = translator.translate(["In the beginning.", "Amen."], beam_width=2)
    assert isinstance(out, list) and len(out) == 2
    assert all(isinstance(text, str) for text in out)
    assert translator.translate([]) == []


def test_caption_reads_any_integer_dtype_as_0_255(captioner):
    images = tiny_models.scenes_batch(2)[0]
    assert images.dtype == np.uint8
    expected = captioner.caption(images, beam_width=1)
    assert captioner.caption(images.astype("int64"), beam_width=1) == expected
    scaled = images.astype("float64") / 255.0
    assert captioner.caption(scaled, beam_width=1) == expected


def test_caption_reads_keras_float_images_of_0_255(captioner, tmp_path):
    images = tiny_models.scenes_batch(2)[0]
    expected = captioner.caption(images, beam_width=1, return_attention=True)
    path = str(tmp_path / "scene.png")
    keras.utils.save_img(path, images[0].reshape(84, 84, -1), scale=False)
    loaded = keras.utils.img_to_array(keras.utils.load_img(path))  # RGB 0-255
    assert loaded.dtype == np.float32 and loaded.max() > 1.0
    text, maps = captioner.caption(loaded, beam_width=1, return_attention=True)
    assert text == expected[0][0]
    np.testing.assert_allclose(maps["weights"], expected[1][0]["weights"], atol=1e-5)
    floats = captioner.caption(images.astype("float64"), beam_width=1)
    assert floats == expected[0]


def test_classify_reads_float_images_of_0_255():
    model = tiny_models.randomized(tiny_models.exportable_ram(), 0.5)
    images = tiny_models.fashion_mnist_batch(4)[0]
    names, probabilities = model.classify(images)
    for floats in (images.astype("float32"), images / 255.0):
        same_names, same = model.classify(floats)
        np.testing.assert_array_equal(same_names, names)
        np.testing.assert_allclose(same, probabilities, atol=1e-5)
    with pytest.raises(ValueError, match=r"values in \[0, 1\] or \[0, 255\]"):
        model.classify(images.astype("float32") * 2.0)


@pytest.mark.parametrize(
    "make, error, message",
    [
        (lambda x: x * 300.0, ValueError, r"values in \[0, 1\] or \[0, 255\]"),
        (lambda x: x - 1.0, ValueError, r"values in \[0, 1\] or \[0, 255\]"),
        (lambda x: x.astype("int32") * 257, ValueError, r"values in \[0, 255\]"),
        (lambda x: np.full(x.shape, np.nan, "float32"), ValueError, "NaN"),
        (lambda x: x[:0], ValueError, "empty"),
        (lambda x: x.astype(str), TypeError, "dtype"),
    ],
    ids=[
        "float-above-255",
        "negative-float",
        "16-bit-range",
        "nan",
        "empty",
        "strings",
    ],
)
def test_caption_refuses_images_it_would_misread(captioner, make, error, message):
    images = tiny_models.scenes_batch(2)[0]
    with pytest.raises(error, match=message):
        captioner.caption(make(images))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"beam_width": 0}, "beam_width=0"),
        ({"batch_size": -1}, "batch_size=-1"),
        ({"max_length": 0}, "max_length=0"),
    ],
)
def test_caption_refuses_bad_decoding_arguments(captioner, kwargs, message):
    images = tiny_models.scenes_batch(1)[0]
    with pytest.raises(ValueError, match=message):
        captioner.caption(images, **kwargs)


def test_ram_refuses_an_empty_batch():
    model = tiny_models.ram()
    with pytest.raises(ValueError, match="empty"):
        model.predict(np.zeros((0, 28, 28), "uint8"), verbose=0)


def test_ram_names_the_images_whose_pixels_are_not_finite():
    model = tiny_models.ram()
    images = np.random.default_rng(0).random((3, 28, 28)).astype("float32")
    images[1] = np.nan
    with pytest.raises(ValueError, match=r"Images \[1\] hold NaN or infinite pixels"):
        model.predict(images, verbose=0)
    assert model.predict(images[[0, 2]], verbose=0).shape[0] == 2
