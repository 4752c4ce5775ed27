"""Tiny `Transformer`s on four sentence pairs, shared by the model tests."""

import functools
import types

import keras
import numpy as np
import pytest
import tensorflow as tf

from zoo.data import vocabulary
from zoo.transformer import Transformer
from zoo.translation import TranslationPreprocessor

SOURCES = ["jesus wept", "god is love", "in the beginning was the word", "light"]
TARGETS = ["y lloró jesús", "dios es amor", "en el principio era el verbo", "luz"]


@functools.lru_cache(maxsize=1)
def joint_vocabulary():
    return vocabulary.train_wordpiece(SOURCES + TARGETS, 300)


def tiny(seed=0, **kwargs):
    """A 2-layer, d_model 16 model with a shared vocabulary, no dropout."""
    vocab = joint_vocabulary()
    keras.utils.set_random_seed(seed)
    config = dict(num_layers=2, hidden_dim=16, intermediate_dim=32, num_heads=2)
    config.update(dropout=0.0, **kwargs)
    preprocessor = TranslationPreprocessor(vocab, vocab, 32, 32, lowercase=True)
    return Transformer(len(vocab), preprocessor=preprocessor, **config)


def randomize(model, seed=1, scale=0.3):
    """Weights no fresh model has, so a reload must really read them."""
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        variable.assign(rng.normal(0, scale, variable.shape).astype("float32"))


def prepared(model, sources=SOURCES, targets=TARGETS):
    x, y, w = model.preprocessor(tf.constant(sources), tf.constant(targets))
    return {k: np.array(v) for k, v in x.items()}, np.array(y), np.array(w)


def logits(model, x):
    return np.array(model(x, training=False))


@pytest.fixture
def h():
    """The helpers above, as `h.tiny(...)`, `h.prepared(model)`, ..."""
    return types.SimpleNamespace(
        SOURCES=SOURCES,
        TARGETS=TARGETS,
        tiny=tiny,
        randomize=randomize,
        prepared=prepared,
        logits=logits,
    )
