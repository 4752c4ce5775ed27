"""Every alignment function against a NumPy reference of its formula."""

import keras
import numpy as np
import pytest

from keras_attention import scores

RNG = np.random.default_rng(0)
QUERY = RNG.normal(size=(2, 3, 4)).astype("float32")
KEY = RNG.normal(size=(2, 5, 4)).astype("float32")
KEY_WIDE = RNG.normal(size=(2, 5, 6)).astype("float32")


def weights(layer):
    return {w.path.split("/")[-1]: keras.ops.convert_to_numpy(w) for w in layer.weights}


def np_additive(s, h, w, u, v, b=0.0):
    hidden = np.tanh((s @ w)[:, :, None, :] + (h @ u)[:, None, :, :] + b)
    return hidden @ v


def test_dot():
    out = scores.Dot()(QUERY, KEY)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(out),
        np.einsum("bqd,bvd->bqv", QUERY, KEY),
        rtol=1e-5,
    )


def test_scaled_dot():
    out = scores.ScaledDot()(QUERY, KEY)
    ref = np.einsum("bqd,bvd->bqv", QUERY, KEY) / np.sqrt(4)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(out), ref, rtol=1e-5, atol=1e-6
    )


def test_general_uses_its_kernel():
    layer = scores.General()
    out = layer(QUERY, KEY_WIDE)
    w = weights(layer)["kernel"]
    assert w.shape == (4, 6)
    ref = np.einsum("bqd,de,bve->bqv", QUERY, w, KEY_WIDE)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(out), ref, rtol=1e-5, atol=1e-5
    )


@pytest.mark.parametrize("cls", [scores.Additive, scores.Perceptron])
@pytest.mark.parametrize("use_bias", [False, True])
def test_additive_and_perceptron(cls, use_bias):
    layer = cls(units=7, use_bias=use_bias, name="score")
    out = layer(QUERY, KEY_WIDE)
    w = weights(layer)
    if use_bias:
        layer.bias.assign(RNG.normal(size=(7,)).astype("float32"))
        out = layer(QUERY, KEY_WIDE)
        w = weights(layer)
    ref = np_additive(
        QUERY,
        KEY_WIDE,
        w["query_kernel"],
        w["key_kernel"],
        w["scale"],
        w.get("bias", 0.0),
    )
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(out), ref, rtol=1e-5, atol=1e-5
    )


def test_additive_infers_units_from_key():
    layer = scores.Additive()
    layer(QUERY, KEY_WIDE)
    assert tuple(layer.query_kernel.shape) == (4, 6)


def test_concat_linear_is_w_times_concatenation():
    layer = scores.Concat()
    out = layer(QUERY, KEY_WIDE)
    w = weights(layer)["kernel"]
    assert w.shape == (10, 1)
    ref = np.empty((2, 3, 5), "float32")
    for b in range(2):
        for i in range(3):
            for j in range(5):
                ref[b, i, j] = np.concatenate([QUERY[b, i], KEY_WIDE[b, j]]) @ w[:, 0]
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(out), ref, rtol=1e-5, atol=1e-5
    )


def test_concat_with_units_is_luong_concat():
    layer = scores.Concat(units=3)
    out = layer(QUERY, KEY_WIDE)
    w = weights(layer)
    ref = np.empty((2, 3, 5), "float32")
    for b in range(2):
        for i in range(3):
            for j in range(5):
                joint = np.concatenate([QUERY[b, i], KEY_WIDE[b, j]])
                ref[b, i, j] = w["scale"] @ np.tanh(joint @ w["kernel"])
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(out), ref, rtol=1e-5, atol=1e-5
    )


def test_cosine_matches_formula_and_is_safe_for_zero_vectors():
    key = KEY.copy()
    key[0, 1] = 0.0
    out = keras.ops.convert_to_numpy(scores.Cosine()(QUERY, key))
    qn = np.linalg.norm(QUERY, axis=-1, keepdims=True)
    kn = np.maximum(np.linalg.norm(key, axis=-1, keepdims=True), 1e-6)
    ref = np.einsum("bqd,bvd->bqv", QUERY / qn, key / kn)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(out), ref, rtol=1e-5, atol=1e-6
    )
    assert np.all(np.isfinite(out))
    np.testing.assert_array_equal(out[0, :, 1], 0.0)
    assert np.all(np.abs(out) <= 1.0 + 1e-6)


def test_location_depends_only_on_query_and_is_cropped():
    layer = scores.Location(max_length=8)
    out = keras.ops.convert_to_numpy(layer(QUERY, KEY))
    w = weights(layer)
    ref = (QUERY @ w["kernel"] + w["bias"])[..., :5]
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(out), ref, rtol=1e-5, atol=1e-5
    )
    other = keras.ops.convert_to_numpy(layer(QUERY, KEY + 3.0))
    np.testing.assert_allclose(keras.ops.convert_to_numpy(out), other)


def test_location_rejects_longer_keys():
    with pytest.raises(ValueError, match="max_length=3"):
        scores.Location(max_length=3)(QUERY, KEY)


@pytest.mark.parametrize("name", ["dot", "scaled_dot", "cosine"])
def test_parameter_free_scores_reject_different_dims(name):
    with pytest.raises(
        ValueError, match=r"query.shape=\(2, 3, 4\).*key.shape=\(2, 5, 6\)"
    ):
        scores.get(name)(QUERY, KEY_WIDE)


def test_mismatched_batch_is_a_clear_error():
    with pytest.raises(ValueError, match="same batch size"):
        scores.General()(QUERY, KEY[:1])


def test_invalid_units():
    with pytest.raises(ValueError, match="units=0"):
        scores.Additive(units=0)
    with pytest.raises(ValueError, match="units=-2"):
        scores.Concat(units=-2)


@pytest.mark.parametrize(
    "name", ["dot", "scaled_dot", "general", "additive", "concat", "cosine", "location"]
)
def test_projected_keys_give_the_same_scores(name):
    layer = scores.get(name)
    if name == "concat":
        layer = scores.Concat(units=3)
    expected = keras.ops.convert_to_numpy(layer(QUERY, KEY))
    projected = layer.project_key(KEY)
    out = keras.ops.convert_to_numpy(layer.score_projected(QUERY, projected))
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(out), expected, rtol=1e-5, atol=1e-5
    )
