"""TPU-friendly input: `Task.use_static_shapes()` and the scripts' batching."""

import os
import sys

import numpy as np
import pytest
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))

import tiny_models  # noqa: E402

from keras_attention.training import get_strategy, needs_static_shapes  # noqa: E402


def _shapes(dataset):
    return [spec.shape for spec in tf.nest.flatten(dataset.element_spec)]


@pytest.mark.parametrize("name", sorted(tiny_models.CASES))
def test_fit_batches_have_one_static_shape(name):
    model, x, y = tiny_models.case_with_samples(name)
    dynamic = model._as_dataset(x, y, batch_size=4, drop_remainder=True)
    assert model.use_static_shapes() is model
    static = model._as_dataset(x, y, batch_size=4, drop_remainder=True)

    for shape in _shapes(static):
        assert shape.is_fully_defined(), (name, _shapes(static))
    if name in ("seq2seq", "transformer", "show_attend_tell"):
        # Token inputs were trimmed per batch before: their length was None.
        assert not all(s.is_fully_defined() for s in _shapes(dynamic))
    batches = list(static)
    assert len(batches) == len(x) // 4  # the partial batch is skipped
    first = [t.shape for t in tf.nest.flatten(batches[0])]
    for b in batches[1:]:
        assert [t.shape for t in tf.nest.flatten(b)] == first


def test_predict_keeps_every_sample_with_static_shapes():
    factory, batch, _ = tiny_models.CASES["ram"]
    model = factory(0).use_static_shapes()
    x, _ = batch(9)
    assert model.predict(x, batch_size=4, verbose=0).shape[0] == 9


def test_static_shapes_fit_runs_and_pads_to_the_full_length():
    factory, batch, loss = tiny_models.CASES["transformer"]
    model = factory(0).use_static_shapes()
    assert model.preprocessor.trim_padding is False
    model.compile(optimizer="adam", loss=loss())
    x, y = batch(8)
    history = model.fit(list(x), list(y), batch_size=4, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    data = model._as_dataset(list(x), list(y), batch_size=4, drop_remainder=True)
    inputs = next(iter(data))[0]
    assert tuple(inputs["encoder_token_ids"].shape) == (4, 48)


def test_use_static_shapes_can_be_turned_off():
    model = tiny_models.seq2seq(0).use_static_shapes()
    model.use_static_shapes(False)
    assert model.static_shapes is False
    assert model.preprocessor.trim_padding is True


def test_needs_static_shapes_only_on_tpus():
    assert needs_static_shapes(get_strategy("default")) is False
    assert needs_static_shapes(tf.distribute.MirroredStrategy(["/cpu:0"])) is False
