"""`CaptionPreprocessor.input_form`: the captioner takes every raw form.

`fit` and `evaluate` of a tiny `ShowAttendTell` on the same eight real
scenes and captions given as arrays, lists, a list of pairs, a tuple and
datasets batched or not give the same numbers; `predict` on raw images
says to call `caption`.
"""

import functools

import keras
import numpy as np
import pytest
import tensorflow as tf

from zoo.base import raw_inputs as inputs
from zoo.data import scenes, vocabulary
from zoo.show_attend_tell import CaptionPreprocessor, ShowAttendTell

pytestmark = pytest.mark.tensorflow_only


@functools.lru_cache(maxsize=1)
def pairs():
    images, captions = scenes.pairs(scenes.load("train", num_scenes=8, sample=True))
    return np.asarray(images[:8]), list(captions[:8])


def tiny():
    images, captions = pairs()
    vocab = vocabulary.train_wordpiece(captions, 60)
    keras.utils.set_random_seed(0)
    model = ShowAttendTell(
        len(vocab),
        annotation_dim=8,
        embedding_dim=8,
        units=8,
        dropout=0.0,
        seed=0,
        preprocessor=CaptionPreprocessor(vocab, 24),
    )
    model.compile(
        keras.optimizers.SGD(0.1),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    return model


def forms():
    images, captions = pairs()
    dataset = tf.data.Dataset.from_tensor_slices((images, tf.constant(captions)))
    return {
        "arrays": ((images, np.array(captions)), {"batch_size": 4}),
        "lists": ((list(images), captions), {"batch_size": 4}),
        "list of pairs": ((list(zip(images, captions)),), {"batch_size": 4}),
        "tuple": (((images, captions),), {"batch_size": 4}),
        "unbatched dataset": ((dataset,), {"batch_size": 4}),
        "batched dataset": ((dataset.batch(4),), {}),
    }


def test_the_preprocessor_declares_images_with_captions_raw():
    pre = CaptionPreprocessor()
    image = tf.TensorSpec((84, 84), tf.uint8)
    caption = tf.TensorSpec((), tf.string)
    assert pre.input_form((image, caption)) == inputs.SAMPLES
    assert pre.input_form((tf.TensorSpec((8, 8, 4), tf.uint8),)) == inputs.SAMPLES
    batch = tf.TensorSpec((None, 84, 84, 3), tf.float32)
    assert pre.input_form((batch, tf.TensorSpec((None,), tf.string))) == "batches"
    assert pre.input_form(({"images": batch},)) is None


def test_fit_evaluate_and_predict_take_every_raw_form():
    model = tiny()
    initial = model.get_weights()
    scores, updates = {}, {}
    for name, (args, kwargs) in forms().items():
        model.set_weights(initial)
        scores[name] = model.evaluate(*args, verbose=0, **kwargs)
        model.fit(*args, shuffle=False, verbose=0, **kwargs)
        updates[name] = model.get_weights()
    for name in scores:
        np.testing.assert_allclose(scores[name], scores["arrays"], rtol=1e-5)
        for a, b in zip(updates[name], updates["arrays"]):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6, err_msg=name)
    # `predict` drops labels: raw images lack the decoder input, so it says
    # to call `caption`; prepared inputs give teacher-forced logits.
    images, captions = pairs()
    for x in (images, (images, captions), list(images)):
        with pytest.raises(ValueError, match="caption"):
            model.predict(x, verbose=0)
    prepared, _, _ = model.preprocessor(images, tf.constant(captions))
    logits = model.predict(prepared, batch_size=4, verbose=0)
    assert logits.shape[0] == 8 and logits.shape[-1] == model.vocabulary_size
    # The refused call left the model usable.
    assert len(model.caption(images[:2])) == 2
