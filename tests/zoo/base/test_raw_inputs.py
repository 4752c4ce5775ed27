"""`zoo.base.raw_inputs`: the accepted data forms, the preprocessor contract, errors."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from zoo.base import raw_inputs as inputs

pytestmark = pytest.mark.tensorflow_only

SOURCES = ["in the beginning", "jesus wept", "a"]
TARGETS = ["en el principio", "jesús lloró", "b"]


def as_lists(data):
    return [None if p is None else np.asarray(p).tolist() for p in data]


@pytest.mark.parametrize(
    "form",
    ["pairs", "list_pairs", "tuple", "x_and_y", "arrays", "triples"],
)
def test_unpack_every_in_memory_form(form):
    weights = [1.0, 0.5, 0.0] if form == "triples" else None
    if form == "pairs":
        data = inputs.unpack(list(zip(SOURCES, TARGETS)))
    elif form == "list_pairs":  # e.g. pairs read from JSON
        data = inputs.unpack([list(p) for p in zip(SOURCES, TARGETS)])
    elif form == "tuple":
        data = inputs.unpack((SOURCES, TARGETS))
    elif form == "x_and_y":
        data = inputs.unpack(SOURCES, TARGETS)
    elif form == "arrays":
        data = inputs.unpack(np.array(SOURCES), np.array(TARGETS))
    else:
        data = inputs.unpack(list(zip(SOURCES, TARGETS, weights)))
    assert as_lists(data) == [SOURCES, TARGETS, weights]


def test_unpack_keeps_prepared_dicts_and_arrays():
    x = {"ids": np.arange(6).reshape(3, 2)}
    y = np.zeros(3)
    got_x, got_y, w = inputs.unpack(x, y)
    assert got_x["ids"] is x["ids"] and got_y is y and w is None


@pytest.mark.parametrize(
    "x, kwargs, message",
    [
        (42, {}, "not a single value.*Accepted forms: x and y"),
        ("in the beginning", {}, "not a single value"),
        (None, {}, "not a single value"),
        ({1, 2}, {}, "Unsupported data of type set.*Accepted forms"),
        ([], {}, "No samples"),
        (list(zip(SOURCES, TARGETS)), {"y": TARGETS}, "pass the labels inside it"),
        ([("a", "b"), ("c", "d", 1.0)], {}, r"same length.*\[2, 3\]"),
        (SOURCES, {"y": TARGETS[:2]}, r"same number of samples.*\[2, 3\]"),
        ([np.zeros((2, 2)), np.zeros((3, 3))], {}, "differ in shape"),
    ],
)
def test_unpack_refuses_other_forms(x, kwargs, message):
    with pytest.raises(ValueError, match=message):
        inputs.unpack(x, **kwargs)


def test_sample_spec_is_one_sample_without_copying():
    images = np.zeros((5, 28, 28), "uint8")
    spec = inputs.sample_spec((images, np.array(SOURCES + ["x", "y"]), None))
    assert spec == (
        tf.TensorSpec((28, 28), tf.uint8),
        tf.TensorSpec((), tf.string),
    )
    assert inputs.sample_spec(({"ids": np.zeros((2, 7), "int32")},)) == (
        {"ids": tf.TensorSpec((7,), tf.int32)},
    )


def test_text_and_image_forms():
    s = tf.TensorSpec
    assert inputs.text_form((s((), tf.string), s((), tf.string))) == inputs.SAMPLES
    assert inputs.text_form((s((None,), tf.string),)) == inputs.BATCHES
    assert inputs.text_form(({"ids": s((None, 4), tf.int32)},)) is None
    assert inputs.image_form((s((28, 28), tf.uint8),)) == inputs.SAMPLES
    assert inputs.image_form((s((28, 28, 3), tf.float32),)) == inputs.SAMPLES
    assert inputs.image_form((s((None, 28, 28), tf.uint8),)) == inputs.BATCHES
    # A caption or label settles what an image's rank cannot: (3, 28, 28)
    # is one batch of three gray images, not one 28-channel image.
    labelled = (s((None, 28, 28), tf.uint8), s((None,), tf.int32))
    assert inputs.image_form(labelled) == inputs.BATCHES
    assert inputs.image_form((s((28, 28, 1), tf.uint8), s((), tf.string))) == (
        inputs.SAMPLES
    )
    assert inputs.image_form(({"images": s((None, 8, 8, 1), tf.float32)},)) is None


class Declares(keras.layers.Layer):
    def __init__(self, answer, **kwargs):
        super().__init__(**kwargs)
        self.answer = answer
        self.seen = []

    def input_form(self, spec):
        self.seen.append(spec)
        return self.answer


def test_input_form_asks_the_preprocessor():
    spec = tf.TensorSpec((), tf.string)
    assert inputs.input_form(None, spec) is None
    declares = Declares(inputs.BATCHES)
    assert inputs.input_form(declares, spec) == inputs.BATCHES
    assert declares.seen == [(spec,)]  # Always the (x, ...) tuple.
    assert inputs.input_form(Declares(None), spec) is None
    with pytest.raises(ValueError, match="must return 'samples'.*Received: 'yes'"):
        inputs.input_form(Declares("yes"), spec)
    # No declaration: the old rule (strings are raw).
    undeclared = keras.layers.Identity()
    assert inputs.input_form(undeclared, spec) == inputs.SAMPLES
    assert inputs.input_form(undeclared, tf.TensorSpec((2,), tf.int32)) is None


def test_feature_preprocessor_contract_and_config():
    lookup = keras.layers.StringLookup(vocabulary=["in", "the"])
    pre = inputs.FeaturePreprocessor(lookup)
    s = tf.TensorSpec
    assert pre.input_form((s((), tf.string),)) == inputs.SAMPLES
    assert pre.input_form((s((None,), tf.string),)) == inputs.BATCHES
    assert pre.input_form((s((None, 3), tf.string),)) is None
    assert pre.input_form((s((None,), tf.int64),)) is None
    x, y, w = pre(
        tf.constant(["the", "x"]), tf.constant([1, 2]), tf.constant([1.0, 0.0])
    )
    assert x.numpy().tolist() == [2, 0]
    assert y.numpy().tolist() == [1, 2] and w.numpy().tolist() == [1.0, 0.0]
    again = inputs.FeaturePreprocessor.from_config(pre.get_config())
    assert again(tf.constant(["in"])).numpy().tolist() == [1]
    with pytest.raises(ValueError, match="must be a keras.layers.Layer"):
        inputs.FeaturePreprocessor(lambda x: x)
    with pytest.raises(ValueError, match="sample_rank=-1"):
        inputs.FeaturePreprocessor(lookup, sample_rank=-1)


def test_given_dataset_and_passed_to_keras():
    data = tf.data.Dataset.from_tensor_slices(SOURCES)
    assert inputs.given_dataset(data) is data
    with pytest.raises(ValueError, match="pass labels inside it"):
        inputs.given_dataset(data, TARGETS)
    assert inputs.passed_to_keras(x for x in [])
    assert not inputs.passed_to_keras(SOURCES)
