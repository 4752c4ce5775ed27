"""Every score: finite values and gradients for zero queries and zero keys.

Masked attention layers output zero rows, which the next layer scores; a
NaN there (e.g. the gradient of a square root at 0) makes training diverge.
"""

import importlib.util
import os

import keras
import numpy as np
import pytest

from keras_attention import scores

_spec = importlib.util.spec_from_file_location(
    "gradients", os.path.join(os.path.dirname(__file__), "..", "gradients.py")
)
gradients = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gradients)


def loss_and_gradients(layer, query, key, directions):
    """`sum(score * directions)` and its gradients with respect to the query,
    the key and each trainable weight, on any backend."""
    values, grads = gradients.value_and_gradients(
        layer, [query, key], gradients.weighted_sum(directions)
    )
    return np.sum(values * directions), grads


@pytest.mark.parametrize("name", sorted(scores.ALIASES))
@pytest.mark.parametrize("zero", ["query", "key", "both", "one_row"])
def test_zero_vectors_give_finite_values_and_gradients(name, zero):
    rng = np.random.default_rng(5)
    query = rng.normal(size=(2, 3, 4)).astype("float32")
    key = rng.normal(size=(2, 5, 4)).astype("float32")
    if zero in ("query", "both"):
        query[:] = 0.0
    if zero in ("key", "both"):
        key[:] = 0.0
    if zero == "one_row":  # as a masked row of a previous attention layer
        query[0, 1] = 0.0
        key[1, 2] = 0.0
    directions = rng.normal(size=(2, 3, 5)).astype("float32")
    layer = scores.get(name)
    layer(query, key)  # build
    values = keras.ops.convert_to_numpy(layer(query, key))
    assert np.all(np.isfinite(values))
    loss, grads = loss_and_gradients(layer, query, key, directions)
    assert np.isfinite(loss)
    assert len(grads) == 2 + len(layer.trainable_variables)
    for grad in grads:
        assert np.all(np.isfinite(grad)), name


def test_cosine_of_a_zero_vector_is_zero_with_zero_free_gradient():
    rng = np.random.default_rng(6)
    query = np.zeros((1, 1, 3), "float32")
    key = rng.normal(size=(1, 2, 3)).astype("float32")
    layer = scores.Cosine()
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(layer(query, key)), 0)
    _, (g_query, g_key) = loss_and_gradients(
        layer, query, key, np.ones((1, 1, 2), "float32")
    )
    # d/ds of s.h/(max(|s|, eps)|h|) at s = 0 is sum_j h_j/|h_j| / eps; the
    # key gets no gradient from a zero query.
    unit = key[0] / np.linalg.norm(key[0], axis=-1, keepdims=True)
    np.testing.assert_allclose(g_query[0, 0], unit.sum(0) / 1e-6, rtol=1e-4)
    np.testing.assert_array_equal(g_key, 0.0)
