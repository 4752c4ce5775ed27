"""`zoo.data.pipeline.finish`: every zoo pipeline runs without tf.data's model thread."""

import os
import sys

import numpy as np
import pytest
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))

import tiny_models  # noqa: E402

from zoo.data import fashion_mnist, pipeline  # noqa: E402


def _autotune(dataset):
    return dataset.options().autotune.enabled


def test_finish_prefetches_the_same_elements_without_autotuning():
    source = tf.data.Dataset.range(10).map(lambda x: x * 2)
    finished = pipeline.finish(source)
    assert _autotune(source) is None
    assert _autotune(finished) is False
    assert [int(x) for x in finished] == [int(x) for x in source]
    assert finished.element_spec == source.element_spec


@pytest.mark.parametrize("choice", [True, False])
def test_finish_keeps_the_callers_autotune_choice(choice):
    options = tf.data.Options()
    options.autotune.enabled = choice
    given = tf.data.Dataset.range(3).with_options(options)
    assert _autotune(pipeline.finish(given)) is choice


@pytest.mark.parametrize("value", [[1, 2, 3], np.arange(3), None])
def test_finish_refuses_what_is_not_a_dataset(value):
    with pytest.raises(TypeError, match=f"dataset must be .*{type(value).__name__}"):
        pipeline.finish(value)


def test_fashion_mnist_pipelines_end_with_finish():
    images, labels = fashion_mnist.load("test", sample=True)
    plain = fashion_mnist.as_dataset(images, labels, 16)
    translated = fashion_mnist.translated_dataset(images, labels, 16, canvas_size=40)
    unscaled = fashion_mnist.as_dataset(images, labels, 16, normalize=False)
    for dataset in (plain, translated, unscaled):
        assert _autotune(dataset) is False


@pytest.mark.parametrize("name", sorted(tiny_models.CASES))
def test_task_fit_data_ends_with_finish(name):
    model, x, y = tiny_models.case_with_samples(name)
    raw = model._as_dataset(x, y, batch_size=4, drop_remainder=True)
    given = tf.data.Dataset.from_tensor_slices((x, y))
    from_dataset = model._as_dataset(given, None, batch_size=4, drop_remainder=True)
    assert _autotune(raw) is False
    assert _autotune(from_dataset) is False
