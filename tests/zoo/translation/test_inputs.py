"""`TranslationPreprocessor.input_form`: translation tasks take every raw form.

`fit`, `evaluate` and `predict` of a tiny `Seq2Seq` on the same four
sentence pairs given as lists, a list of pairs, a tuple, NumPy arrays, and
datasets batched or not: the same batches, so the same numbers.
"""

import functools

import keras
import numpy as np
import pytest
import tensorflow as tf

from zoo.base import raw_inputs as inputs
from zoo.data import vocabulary
from zoo.seq2seq import Seq2Seq
from zoo.translation import TranslationPreprocessor

pytestmark = pytest.mark.tensorflow_only

SOURCES = ["jesus wept", "god is love", "in the beginning was the word", "light"]
TARGETS = ["y lloró jesús", "dios es amor", "en el principio era el verbo", "luz"]


@functools.lru_cache(maxsize=1)
def vocabularies():
    return (
        vocabulary.train_wordpiece(SOURCES, 200),
        vocabulary.train_wordpiece(TARGETS, 200),
    )


def tiny():
    source_vocab, target_vocab = vocabularies()
    keras.utils.set_random_seed(0)
    preprocessor = TranslationPreprocessor(
        source_vocab, target_vocab, 40, 40, lowercase=True
    )
    model = Seq2Seq(
        len(source_vocab),
        len(target_vocab),
        embedding_dim=8,
        units=8,
        dropout=0.0,
        cell="gru",
        preprocessor=preprocessor,
    )
    model.compile(
        keras.optimizers.SGD(0.5),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    return model


def pairs_dataset():
    return tf.data.Dataset.from_tensor_slices((SOURCES, TARGETS))


# Each form as (args, kwargs) for fit/evaluate, two pairs per batch.
FORMS = {
    "lists": ((SOURCES, TARGETS), {"batch_size": 2}),
    "list of pairs": ((list(zip(SOURCES, TARGETS)),), {"batch_size": 2}),
    "tuple": (((SOURCES, TARGETS),), {"batch_size": 2}),
    "arrays": ((np.array(SOURCES), np.array(TARGETS)), {"batch_size": 2}),
    "unbatched dataset": ((pairs_dataset(),), {"batch_size": 2}),
    "batched dataset": ((pairs_dataset().batch(2),), {}),
}


def test_the_preprocessor_declares_string_inputs_raw():
    pre = TranslationPreprocessor()
    text = tf.TensorSpec((), tf.string)
    assert pre.input_form((text, text)) == inputs.SAMPLES
    assert pre.input_form((tf.TensorSpec((None,), tf.string),)) == inputs.BATCHES
    ids = {"encoder_token_ids": tf.TensorSpec((None, 8), tf.int32)}
    assert pre.input_form((ids,)) is None


def test_fit_evaluate_and_predict_take_every_raw_form():
    model = tiny()
    initial = model.get_weights()
    scores, updates = {}, {}
    for name, (args, kwargs) in FORMS.items():
        model.set_weights(initial)
        scores[name] = model.evaluate(*args, verbose=0, **kwargs)
        # `predict` takes one `x` and drops labels: raw sources alone lack
        # the decoder input, so it says to call `translate`.
        with pytest.raises(ValueError, match="translate"):
            model.predict(args[0] if len(args) == 1 else tuple(args), verbose=0)
        model.fit(*args, shuffle=False, verbose=0, **kwargs)
        updates[name] = model.get_weights()[0]
    assert not np.allclose(updates["lists"], initial[0])
    for name in FORMS:
        np.testing.assert_allclose(scores[name], scores["lists"], rtol=1e-5)
        np.testing.assert_allclose(updates[name], updates["lists"], atol=1e-6)


def test_a_dataset_of_prepared_dicts_goes_to_keras_as_it_is():
    model = tiny()
    x, y, w = model.preprocessor(tf.constant(SOURCES), tf.constant(TARGETS))
    prepared = tf.data.Dataset.from_tensor_slices((x, y, w)).batch(2)
    raw = model.evaluate(*FORMS["lists"][0], batch_size=4, verbose=0)
    assert np.isfinite(model.evaluate(prepared, verbose=0))
    history = model.fit(prepared, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    assert model.evaluate(*FORMS["lists"][0], batch_size=4, verbose=0) != raw


def test_other_forms_are_refused_naming_the_accepted_ones():
    model = tiny()
    with pytest.raises(ValueError, match="Accepted forms"):
        model.fit("jesus wept", verbose=0)
    # The failed call left the model usable.
    history = model.fit(*FORMS["lists"][0], batch_size=2, verbose=0)
    assert np.isfinite(history.history["loss"][0])
