"""Scores and `Attention` under mixed precision, from unit scale to 1e4x.

float16 ends at 65504: a float16 product of a query and a key of 4 entries
of size 300 is `inf` (each term is 90000), and the softmax of a row holding
`inf` is NaN. That is what `keras.layers.Attention` gives; our `dot`,
`scaled_dot` and `general` scores run the product in float32. The inputs
here are float16 (bfloat16) tensors of the compute dtype, as a previous
mixed-precision layer would give, bounded by `scale`, at most 1e4 (float16
inputs themselves end at 65504).
"""

import importlib.util
import os

import keras
import numpy as np
import pytest
from keras import ops

from keras_attention import scores
from keras_attention.layers import Attention

_spec = importlib.util.spec_from_file_location(
    "gradients", os.path.join(os.path.dirname(__file__), "..", "gradients.py")
)
gradients = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gradients)

SCALES = (1.0, 100.0, 300.0, 1e3, 1e4)
POLICIES = ("mixed_float16", "mixed_bfloat16")
# One name per score class.
NAMES = sorted({cls: name for name, cls in sorted(scores.ALIASES.items())}.values())


@pytest.fixture
def policy():
    """Sets a global dtype policy for one test and restores the old one."""
    old = keras.config.dtype_policy()
    try:
        yield keras.config.set_dtype_policy
    finally:
        keras.config.set_dtype_policy(old)


def compute_dtype():
    return keras.config.dtype_policy().compute_dtype


def uniform(rng, shape, scale):
    """Entries in `[-scale, scale]`, in the compute dtype."""
    x = rng.uniform(-1.0, 1.0, size=shape) * scale
    return ops.cast(x.astype("float32"), compute_dtype())


def to_numpy(x):
    return ops.convert_to_numpy(ops.cast(x, "float32"))


def value_and_gradients(layer, inputs, weight):
    """The layer's output and the gradients of `sum(output * weight)` with
    respect to each input and each trainable weight, on any backend."""
    return gradients.value_and_gradients(layer, inputs, gradients.weighted_sum(weight))


def make_score(name, seed=0):
    """A built score whose weights are at most `1 / D` in size, so that its
    projections (a `Dense` layer's, in the compute dtype) stay below 65504
    for inputs up to 1e4: the range we claim is the product's, not that of
    a projection, which any float16 `Dense` layer shares."""
    config = {"max_length": 5} if name == "location" else {}
    layer = scores.get({"class_name": name, "config": config})
    layer(np.zeros((2, 3, 4), "float32"), np.zeros((2, 5, 4), "float32"))
    rng = np.random.default_rng(seed)
    layer.set_weights(
        [
            rng.uniform(-0.25, 0.25, size=w.shape).astype("float32")
            for w in layer.weights
        ]
    )
    return layer


@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("policy_name", POLICIES)
def test_every_score_is_finite_with_finite_gradients(policy, policy_name, name, scale):
    policy(policy_name)
    rng = np.random.default_rng(1)
    query, key = uniform(rng, (2, 3, 4), scale), uniform(rng, (2, 5, 4), scale)
    # The gradient of the scores is taken against directions of size 1 / scale
    # (a loss on scores normalised by the input scale): the input gradients of
    # the product are then of the size of the inputs' count, not scale times
    # it. (A weight's gradient is `input^T upstream`, as for a Dense layer.)
    directions = rng.uniform(-1, 1, size=(2, 3, 5)).astype("float32") / scale
    layer = make_score(name)
    values, grads = value_and_gradients(layer, [query, key], directions)
    assert np.all(np.isfinite(values)), (name, scale)
    for grad in grads:
        assert np.all(np.isfinite(grad)), (name, scale)


@pytest.mark.parametrize("name", ["dot", "scaled_dot", "general"])
def test_products_are_float32_under_mixed_float16(policy, name):
    policy("mixed_float16")
    query = ops.full((1, 2, 4), 300.0, "float16")
    out = make_score(name)(query, query)
    assert keras.backend.standardize_dtype(out.dtype) == "float32"
    # Each term of the dot product, 300 * 300, is already above 65504.
    assert np.all(np.isfinite(to_numpy(out)))
    if name == "dot":
        np.testing.assert_array_equal(to_numpy(out), 4 * 300.0**2)
    bare = ops.matmul(query, ops.swapaxes(query, -1, -2))
    assert np.all(np.isinf(to_numpy(bare)))  # what float16 gives


@pytest.mark.parametrize("name", NAMES)
def test_symbolic_output_dtype_is_the_eager_one(policy, name):
    policy("mixed_float16")
    layer = make_score(name)
    symbolic = layer(keras.Input((3, 4)), keras.Input((5, 4)))
    eager = layer(np.ones((2, 3, 4), "float32"), np.ones((2, 5, 4), "float32"))
    dtype = keras.backend.standardize_dtype
    assert dtype(symbolic.dtype) == dtype(eager.dtype)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("policy_name", POLICIES)
def test_scores_match_float32_at_moderate_scale(policy, policy_name, name):
    rng = np.random.default_rng(2)
    query = rng.uniform(-10, 10, size=(2, 3, 4)).astype("float32")
    key = rng.uniform(-10, 10, size=(2, 5, 4)).astype("float32")
    reference = to_numpy(make_score(name)(query, key))
    policy(policy_name)
    out = to_numpy(make_score(name)(query, key))
    # float16 keeps 11 significant bits, bfloat16 8: inputs and weights are
    # rounded to them, so the scores agree to that relative precision.
    tolerance = 4e-3 if policy_name == "mixed_float16" else 3e-2
    np.testing.assert_allclose(
        out, reference, atol=tolerance * np.abs(reference).max(), rtol=0
    )


def attention_gradients(layer, query, value, weight):
    return value_and_gradients(layer, [query, value], weight)


@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize("score", ["dot", "scaled_dot", "general", "cosine"])
@pytest.mark.parametrize("policy_name", POLICIES)
def test_attention_is_finite_with_finite_gradients(policy, policy_name, score, scale):
    policy(policy_name)
    rng = np.random.default_rng(3)
    query, value = uniform(rng, (2, 3, 4), scale), uniform(rng, (2, 5, 4), scale)
    layer = Attention(score=score)
    layer(query, value)
    if score == "general":  # a kernel of size 1 / D, as in `make_score`
        kernel = rng.uniform(-0.25, 0.25, size=(4, 4)).astype("float32")
        layer.set_weights([kernel])
    # A loss on the context normalised by the input scale: the gradient of
    # the weighted sum with respect to the weights is then of order 1.
    directions = rng.uniform(-1, 1, size=(2, 3, 4)).astype("float32") / scale
    context, grads = attention_gradients(layer, query, value, directions)
    assert np.all(np.isfinite(context)), (score, scale)
    assert np.all(np.abs(context) <= scale)  # a convex combination of values
    for grad in grads:
        assert np.all(np.isfinite(grad)), (score, scale)


@pytest.mark.parametrize("scale", [300.0, 1e3, 1e4])
def test_keras_attention_is_nan_where_ours_is_finite(policy, scale):
    """Keras's float16 score `q k^T` is `inf` (every term is >= 90000)."""
    policy("mixed_float16")
    rng = np.random.default_rng(4)
    query = ops.full((1, 2, 4), scale, "float16")
    value = uniform(rng, (1, 3, 4), scale)
    key = ops.full((1, 3, 4), scale, "float16")
    theirs = keras.layers.Attention()([query, value, key])
    assert np.all(np.isnan(to_numpy(theirs)))
    ours = Attention(score_mode="dot")([query, value, key])
    # Every key scores the same (finite) 4 scale^2: the mean of the values.
    mean = to_numpy(value).mean(axis=1, keepdims=True)
    np.testing.assert_allclose(
        to_numpy(ours), np.repeat(mean, 2, 1), atol=2e-3 * scale, rtol=0
    )


@pytest.mark.parametrize("policy_name", POLICIES)
def test_attention_matches_keras_and_float32_at_moderate_scale(policy, policy_name):
    rng = np.random.default_rng(5)
    query = rng.uniform(-3, 3, size=(2, 3, 4)).astype("float32")
    value = rng.uniform(-3, 3, size=(2, 5, 4)).astype("float32")
    reference = to_numpy(keras.layers.Attention()([query, value]))
    policy(policy_name)
    theirs = to_numpy(keras.layers.Attention()([query, value]))
    ours = to_numpy(Attention(score_mode="dot")([query, value]))
    tolerance = 2e-2 if policy_name == "mixed_float16" else 1e-1
    np.testing.assert_allclose(ours, reference, atol=tolerance, rtol=0)
    np.testing.assert_allclose(theirs, reference, atol=tolerance, rtol=0)


@pytest.mark.parametrize("scale", SCALES)
def test_keras_additive_attention_and_ours_are_both_finite(policy, scale):
    """`tanh` bounds Keras's additive score: no overflow to fix there."""
    policy("mixed_float16")
    rng = np.random.default_rng(6)
    query, value = uniform(rng, (2, 3, 4), scale), uniform(rng, (2, 5, 4), scale)
    theirs = keras.layers.AdditiveAttention()([query, value])
    ours = Attention(score_mode="concat")([query, value])
    assert np.all(np.isfinite(to_numpy(theirs)))
    assert np.all(np.isfinite(to_numpy(ours)))


@pytest.mark.parametrize("policy_name", POLICIES)
def test_cosine_is_not_uniform_at_large_scale(policy, policy_name):
    rng = np.random.default_rng(7)
    query = rng.uniform(-1, 1, size=(2, 3, 4)).astype("float32")
    key = rng.uniform(-1, 1, size=(2, 5, 4)).astype("float32")
    reference = to_numpy(scores.Cosine()(query, key))
    policy(policy_name)
    big = scores.Cosine()(uniform_like(query, 1e4), uniform_like(key, 1e4))
    big = to_numpy(big)
    tolerance = 4e-3 if policy_name == "mixed_float16" else 3e-2
    np.testing.assert_allclose(big, reference, atol=tolerance, rtol=0)
    assert np.all(big.max(-1) - big.min(-1) > 0.1)  # rows are not uniform


def uniform_like(x, scale):
    return ops.cast(x * scale, compute_dtype())


@pytest.mark.parametrize("policy_name", POLICIES)
def test_cosine_gradient_at_a_zero_query_is_finite(policy, policy_name):
    policy(policy_name)
    rng = np.random.default_rng(8)
    key = rng.normal(size=(1, 2, 3)).astype("float32")
    query = ops.zeros((1, 1, 3), compute_dtype())
    layer = scores.Cosine()
    layer(query, key)  # build
    values, (g_query, g_key) = value_and_gradients(
        layer, [query, ops.cast(key, compute_dtype())], np.ones((1, 1, 2), "float32")
    )
    np.testing.assert_array_equal(values, 0.0)
    # The gradient at 0 is the sum of the key directions over the norm clip,
    # 1e-6 (1 / 1e-6 fits bfloat16) or float16's 2**-10 (it does not).
    clip = 2.0**-10 if policy_name == "mixed_float16" else 1e-6
    key = to_numpy(ops.cast(key, compute_dtype()))
    unit = key[0] / np.linalg.norm(key[0], axis=-1, keepdims=True)
    np.testing.assert_allclose(g_query[0, 0], unit.sum(0) / clip, rtol=2e-2)
    np.testing.assert_array_equal(g_key, 0.0)


def test_cosine_gradient_at_a_zero_query_in_attention_is_finite(policy):
    policy("mixed_float16")
    rng = np.random.default_rng(9)
    query = ops.cast(np.zeros((1, 2, 3), "float32"), "float16")
    value = uniform(rng, (1, 4, 3), 1.0)
    layer = Attention(score="cosine")
    layer(query, value)  # build
    weight = rng.uniform(-1, 1, size=(1, 2, 3)).astype("float32")
    context, grads = attention_gradients(layer, query, value, weight)
    assert np.all(np.isfinite(context))
    for grad in grads:
        assert np.all(np.isfinite(grad))
