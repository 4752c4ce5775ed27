"""`ImagePreprocessor.input_form`: the glimpse classifier takes every raw form.

`fit`, `evaluate` and `predict` of a tiny `RecurrentAttentionModel` on the
same eight images given as arrays, lists, a list of pairs, a tuple and
datasets batched or not: at inference the path is deterministic, so every
form gives the same numbers.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from zoo.base import raw_inputs as inputs
from zoo.ram import ImagePreprocessor, RecurrentAttentionModel

pytestmark = pytest.mark.tensorflow_only

RNG = np.random.default_rng(0)
IMAGES = RNG.integers(0, 256, (8, 12, 12), dtype="uint8")
LABELS = RNG.integers(0, 3, 8).astype("int32")


def tiny():
    model = RecurrentAttentionModel(
        num_classes=3,
        num_glimpses=2,
        patch_size=4,
        num_scales=1,
        glimpse_units=4,
        location_units=4,
        glimpse_output_units=8,
        units=8,
        seed=0,
    )
    model.compile(
        keras.optimizers.SGD(0.1),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    return model


def dataset():
    return tf.data.Dataset.from_tensor_slices((IMAGES, LABELS))


FORMS = {
    "arrays": ((IMAGES, LABELS), {"batch_size": 4}),
    "lists": ((list(IMAGES), LABELS.tolist()), {"batch_size": 4}),
    "list of pairs": ((list(zip(IMAGES, LABELS)),), {"batch_size": 4}),
    "tuple": (((IMAGES, LABELS),), {"batch_size": 4}),
    "unbatched dataset": ((dataset(),), {"batch_size": 4}),
    "batched dataset": ((dataset().batch(4),), {}),
}

PREDICT_FORMS = {
    "array": (IMAGES, {"batch_size": 4}),
    "list": (list(IMAGES), {"batch_size": 4}),
    "float rgb": (np.repeat(IMAGES[..., None], 3, -1) / 255.0, {"batch_size": 4}),
    "unbatched dataset": (tf.data.Dataset.from_tensor_slices(IMAGES), {}),
    "batched dataset": (tf.data.Dataset.from_tensor_slices(IMAGES).batch(4), {}),
    "dataset of pairs": (dataset().batch(4), {}),
}


def test_the_preprocessor_declares_images_raw():
    pre = ImagePreprocessor()
    assert pre.input_form((tf.TensorSpec((28, 28), tf.uint8),)) == inputs.SAMPLES
    rgb = tf.TensorSpec((28, 28, 3), tf.float32)
    assert pre.input_form((rgb, tf.TensorSpec((), tf.int32))) == inputs.SAMPLES
    batch = tf.TensorSpec((None, 28, 28, 1), tf.uint8)
    assert pre.input_form((batch,)) == inputs.BATCHES
    assert pre.input_form(({"images": batch},)) is None


def test_fit_evaluate_and_predict_take_every_raw_form():
    model = tiny()
    initial = model.get_weights()
    scores, updates = {}, {}
    for name, (args, kwargs) in FORMS.items():
        model.set_weights(initial)
        scores[name] = model.evaluate(*args, verbose=0, return_dict=True, **kwargs)
        keras.utils.set_random_seed(1)  # the training path samples
        model.fit(*args, shuffle=False, verbose=0, **kwargs)
        updates[name] = model.get_weights()
    for name in FORMS:
        for key, value in scores["arrays"].items():
            np.testing.assert_allclose(scores[name][key], value, rtol=1e-5)
        assert all(np.all(np.isfinite(w)) for w in updates[name])
    model.set_weights(initial)
    expected = model.predict(IMAGES, verbose=0)
    assert expected.shape == (8, 3)
    for name, (x, kwargs) in PREDICT_FORMS.items():
        logits = model.predict(x, verbose=0, **kwargs)
        # float RGB goes through a gray conversion: a rounding apart.
        np.testing.assert_allclose(logits, expected, rtol=1e-3, atol=5e-5, err_msg=name)


def test_empty_and_other_forms_are_refused():
    model = tiny()
    with pytest.raises(ValueError, match="x"):
        model.fit(np.zeros((0, 12, 12), "uint8"), np.zeros((0,), "int32"), verbose=0)
    with pytest.raises(ValueError, match="Accepted forms"):
        model.fit("image.png", verbose=0)
    history = model.fit(IMAGES, LABELS, batch_size=4, verbose=0)
    assert np.isfinite(history.history["loss"][0])
