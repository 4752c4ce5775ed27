"""Decoding steps of `MultiHeadAttention`: the split, heads-first (keys,
values) cache, and the one-query path that reads a stacked cache in place."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_attention import scores
from keras_attention.layers import MultiHeadAttention

HEADS, KEY_DIM, DIM = 2, 4, 8


def rand(*shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype("float32")


def np_(x):
    return np.asarray(ops.convert_to_numpy(x), dtype="float32")


def decode_steps(layer, x, cache, with_scores):
    """Outputs of feeding `x` one position at a time through the cache."""
    steps, weights = [], []
    for i in range(x.shape[1]):
        results = layer(
            x[:, i : i + 1],
            x[:, i : i + 1],
            cache=cache,
            cache_update_index=ops.convert_to_tensor(i),
            use_causal_mask=True,
            return_attention_scores=with_scores,
        )
        steps.append(np_(results[0]))
        if with_scores:
            weights.append(np_(results[1])[:, :, 0])
        cache = results[-1]
    return np.concatenate(steps, axis=1), weights, cache


SCORES = [
    {"score": "scaled_dot"},
    {"score": scores.Dot(use_scale=True)},
    {"score": "general"},
    {"score": "additive"},
]


@pytest.mark.parametrize(
    "kwargs", SCORES, ids=["scaled_dot", "dot", "general", "additive"]
)
@pytest.mark.parametrize("with_scores", [False, True])
def test_split_cache_steps_equal_full_causal_attention(kwargs, with_scores):
    layer = MultiHeadAttention(HEADS, KEY_DIM, value_dim=3, **kwargs)
    x = rand(2, 5, DIM, seed=3)
    full, full_weights = layer(x, x, use_causal_mask=True, return_attention_scores=True)
    scales = [w for w in layer.weights if w.name == "scale" and w.shape == ()]
    if scales:
        # A scale other than 1 so that forgetting it shows.
        scales[0].assign(1.7)
        full, full_weights = layer(
            x, x, use_causal_mask=True, return_attention_scores=True
        )
    pair = (np.zeros((2, HEADS, 5, KEY_DIM), "float32"), np.zeros((2, HEADS, 5, 3)))
    steps, weights, (keys, values) = decode_steps(layer, x, pair, with_scores)
    np.testing.assert_allclose(steps, np_(full), atol=1e-5)
    for i, row in enumerate(weights):
        np.testing.assert_allclose(row, np_(full_weights)[:, :, i], atol=1e-5)
    heads_first = (0, 2, 1, 3)
    np.testing.assert_allclose(
        np_(keys), np_(layer.key_dense(x)).transpose(heads_first), atol=1e-5
    )
    np.testing.assert_allclose(
        np_(values), np_(layer.value_dense(x)).transpose(heads_first), atol=1e-5
    )


@pytest.mark.parametrize("with_scores", [False, True])
def test_split_and_stacked_caches_give_the_same_steps(with_scores):
    layer = MultiHeadAttention(HEADS, KEY_DIM)
    x = rand(3, 4, DIM, seed=4)
    stacked = np.zeros((3, 2, 4, HEADS, KEY_DIM), "float32")
    pair = (stacked[:, 0].transpose(0, 2, 1, 3), stacked[:, 1].transpose(0, 2, 1, 3))
    a, _, stacked = decode_steps(layer, x, stacked, with_scores)
    b, _, pair = decode_steps(layer, x, pair, with_scores)
    np.testing.assert_allclose(a, b, atol=1e-6)
    for i in (0, 1):
        np.testing.assert_allclose(
            np_(stacked)[:, i], np_(pair[i]).transpose(0, 2, 1, 3), atol=1e-6
        )


def test_one_query_with_padding_mask_and_empty_row():
    layer = MultiHeadAttention(HEADS, KEY_DIM)
    query, memory = rand(3, 1, DIM, seed=5), rand(3, 6, DIM, seed=6)
    mask = np.array([[1, 1, 0, 0, 0, 0], [1] * 6, [0] * 6], bool)
    got = np_(layer(query, memory, value_mask=mask))
    # The same row computed among other queries (the multi-query path).
    padded = np.concatenate([query, rand(3, 2, DIM, seed=7)], axis=1)
    expected = np_(layer(padded, memory, value_mask=mask))[:, :1]
    np.testing.assert_allclose(got, expected, atol=1e-5)
    assert np.all(np.isfinite(got))


def test_one_query_under_mixed_float16_is_finite():
    keras.config.set_dtype_policy("mixed_float16")
    try:
        layer = MultiHeadAttention(HEADS, KEY_DIM)
        x = 300.0 * rand(2, 5, DIM, seed=8)
        pair = (np.zeros((2, HEADS, 5, KEY_DIM), "float16"),) * 2
        steps, _, _ = decode_steps(layer, x, pair, with_scores=True)
    finally:
        keras.config.set_dtype_policy("float32")
    assert np.all(np.isfinite(steps))


@pytest.mark.parametrize(
    "pair",
    [
        (np.zeros((2, HEADS, 5, KEY_DIM)),),
        (np.zeros((2, HEADS, 5, KEY_DIM)), np.zeros((2, 3, 5, KEY_DIM))),
        (np.zeros((2, HEADS, 5, KEY_DIM)), np.zeros((2, HEADS, 4, KEY_DIM))),
        (np.zeros((2, 5, HEADS, KEY_DIM)),) * 2,  # not heads first
        (np.zeros((2, HEADS, KEY_DIM)),) * 2,
    ],
)
def test_bad_split_cache_names_the_shapes(pair):
    layer = MultiHeadAttention(HEADS, KEY_DIM)
    x = rand(2, 1, DIM)
    with pytest.raises(ValueError, match="pair .* heads first|num_heads=2, max_length"):
        layer(
            x, x, cache=tuple(p.astype("float32") for p in pair), cache_update_index=0
        )


def test_split_cache_in_a_functional_model():
    tokens = keras.Input((1, DIM))
    keys, values = keras.Input((HEADS, 4, KEY_DIM)), keras.Input((HEADS, 4, 3))
    layer = MultiHeadAttention(HEADS, KEY_DIM, value_dim=3)
    out, (new_keys, new_values) = layer(
        tokens, tokens, cache=(keys, values), cache_update_index=0
    )
    assert tuple(out.shape) == (None, 1, DIM)
    assert tuple(new_keys.shape) == (None, HEADS, 4, KEY_DIM)
    assert tuple(new_values.shape) == (None, HEADS, 4, 3)


class OwnScores(MultiHeadAttention):
    """A subclass overriding Keras's hook: it must get Keras's layout."""

    def _compute_attention(self, query, key, value, *args, **kwargs):
        assert query.shape[2] == HEADS and key.shape[2] == HEADS
        return super()._compute_attention(query, key, value, *args, **kwargs)


def test_a_subclass_hook_gets_keras_layout_from_a_split_cache():
    layer = OwnScores(HEADS, KEY_DIM)
    x = rand(2, 4, DIM, seed=9)
    full = layer(x, x, use_causal_mask=True)
    pair = (np.zeros((2, HEADS, 4, KEY_DIM), "float32"),) * 2
    steps, _, _ = decode_steps(layer, x, pair, with_scores=False)
    np.testing.assert_allclose(steps, np_(full), atol=1e-5)
