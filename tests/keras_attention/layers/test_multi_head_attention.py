"""`keras_attention.layers.MultiHeadAttention` against Keras and NumPy."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_attention import scores
from keras_attention.layers import MultiHeadAttention

HEADS, KEY_DIM, DIM = 2, 4, 8
# One name per score class (aliases are tested in tests/.../scores).
SCORE_NAMES = sorted(
    {cls: name for name, cls in reversed(scores.ALIASES.items())}.values()
)


def rand(*shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype("float32")


def np_(x):
    return np.asarray(ops.convert_to_numpy(x), dtype="float32")


def twin_layers(**kwargs):
    """A Keras MHA and ours with the same weights."""
    keras.utils.set_random_seed(1)
    reference = keras.layers.MultiHeadAttention(HEADS, KEY_DIM, **kwargs)
    ours = MultiHeadAttention(HEADS, KEY_DIM, **kwargs)
    query, value = rand(2, 5, DIM), rand(2, 7, DIM, seed=1)
    # With scores: Keras's fused path fails under JAX when value_dim != key_dim.
    reference(query, value, key=value, return_attention_scores=True)
    ours(query, value, key=value)
    ours.set_weights(reference.get_weights())
    return reference, ours


def pad_masks():
    query_mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], bool)
    value_mask = np.array([[1, 1, 0, 0, 0, 0, 0], [1, 1, 1, 1, 1, 1, 0]], bool)
    return query_mask, value_mask


def count_fused_calls(monkeypatch):
    calls = []
    original = keras.ops.dot_product_attention

    def spy(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(keras.ops, "dot_product_attention", spy)
    return calls


# Parity with keras.layers.MultiHeadAttention ------------------------------


def test_same_weight_list_as_keras():
    reference, ours = twin_layers()
    assert [w.shape for w in ours.weights] == [w.shape for w in reference.weights]
    names = [w.path.split("/", 1)[1] for w in ours.weights]
    assert names == [w.path.split("/", 1)[1] for w in reference.weights]


@pytest.mark.parametrize("cross", [False, True])
@pytest.mark.parametrize("with_scores", [False, True])
def test_parity_self_and_cross_attention(cross, with_scores):
    reference, ours = twin_layers()
    query = rand(2, 5, DIM, seed=2)
    value = rand(2, 7, DIM, seed=3) if cross else query
    key = rand(2, 7, DIM, seed=4) if cross else None
    expected = reference(query, value, key=key, return_attention_scores=with_scores)
    got = ours(query, value, key=key, return_attention_scores=with_scores)
    for e, g in zip(keras.tree.flatten(expected), keras.tree.flatten(got), strict=True):
        np.testing.assert_allclose(np_(g), np_(e), atol=1e-5)


@pytest.mark.parametrize("with_scores", [False, True])
def test_parity_padding_masks(with_scores):
    reference, ours = twin_layers()
    query, value = rand(2, 5, DIM, seed=2), rand(2, 7, DIM, seed=3)
    query_mask, value_mask = pad_masks()
    # Keras reads `query_mask` only from the Keras mask of `query`, so give it
    # the equivalent explicit attention mask.
    both = query_mask[:, :, None] & value_mask[:, None, :]
    expected = reference(
        query, value, attention_mask=both, return_attention_scores=with_scores
    )
    got = ours(
        query,
        value,
        query_mask=query_mask,
        value_mask=value_mask,
        return_attention_scores=with_scores,
    )
    expected, got = keras.tree.flatten(expected), keras.tree.flatten(got)
    if with_scores:
        # Keras's explicit path also zeroes fully masked rows: all equal.
        for e, g in zip(expected, got, strict=True):
            np.testing.assert_allclose(np_(g), np_(e), atol=1e-5)
    else:
        # Keras's fused path attends uniformly on padded queries; compare
        # the valid ones.
        valid = query_mask
        np.testing.assert_allclose(
            np_(got[0])[valid], np_(expected[0])[valid], atol=1e-5
        )
        assert not np.allclose(np_(got[0])[~valid], np_(expected[0])[~valid])


def test_parity_implicit_embedding_masks():
    tokens = np.array([[3, 4, 5, 0, 0, 0], [1, 2, 3, 4, 5, 6]])
    embedding = keras.layers.Embedding(10, DIM, mask_zero=True)
    reference = keras.layers.MultiHeadAttention(HEADS, KEY_DIM)
    ours = MultiHeadAttention(HEADS, KEY_DIM)
    # Keras MHA removes the mask from its inputs: embed afresh for each call.
    expected = reference(embedding(tokens), embedding(tokens))
    ours(embedding(tokens), embedding(tokens))
    ours.set_weights(reference.get_weights())
    hidden = embedding(tokens)
    got = ours(hidden, hidden)
    valid = tokens > 0
    np.testing.assert_allclose(np_(got)[valid], np_(expected)[valid], atol=1e-5)
    # Padded keys are ignored: changing them does not change the output.
    other = np.where(valid, tokens, 7)
    got_other = ours(*[embedding(other)] * 2, value_mask=valid, query_mask=valid)
    np.testing.assert_allclose(np_(got_other)[valid], np_(got)[valid], atol=1e-5)


@pytest.mark.parametrize("with_scores", [False, True])
def test_parity_attention_mask_and_causal(with_scores):
    reference, ours = twin_layers()
    query = rand(2, 5, DIM, seed=5)
    attention_mask = rand(2, 5, 5, seed=6) > -0.5
    attention_mask[:, :, 0] = True  # no fully masked row
    for kwargs in (
        {"attention_mask": attention_mask},
        {"use_causal_mask": True},
        {"attention_mask": attention_mask, "use_causal_mask": True},
    ):
        expected = reference(
            query, query, return_attention_scores=with_scores, **kwargs
        )
        got = ours(query, query, return_attention_scores=with_scores, **kwargs)
        for e, g in zip(
            keras.tree.flatten(expected), keras.tree.flatten(got), strict=True
        ):
            np.testing.assert_allclose(np_(g), np_(e), atol=1e-5)


@pytest.mark.parametrize(
    "kwargs",
    [{"use_gate": True}, {"sliding_window": 2}, {"value_dim": 3, "output_shape": 6}],
)
def test_parity_keras_options(kwargs):
    reference, ours = twin_layers(**kwargs)
    query = rand(2, 5, DIM, seed=7)
    # Keras's own fused path fails under JAX when value_dim != key_dim, so
    # the reference always takes its explicit path.
    expected, _ = reference(
        query, query, use_causal_mask=True, return_attention_scores=True
    )
    for with_scores in (False, True):
        got = ours(
            query, query, use_causal_mask=True, return_attention_scores=with_scores
        )
        got = keras.tree.flatten(got)[0]
        np.testing.assert_allclose(np_(got), np_(expected), atol=1e-5)


def test_rank_4_inputs_use_the_keras_computation():
    keras.utils.set_random_seed(2)
    reference = keras.layers.MultiHeadAttention(HEADS, KEY_DIM, attention_axes=(1, 2))
    ours = MultiHeadAttention(HEADS, KEY_DIM, attention_axes=(1, 2))
    x = rand(2, 3, 4, DIM, seed=8)
    reference(x, x)
    ours(x, x)
    ours.set_weights(reference.get_weights())
    np.testing.assert_allclose(np_(ours(x, x)), np_(reference(x, x)), atol=1e-5)


# Fused path ---------------------------------------------------------------


def test_fused_path_is_taken_only_when_allowed(monkeypatch):
    query_mask, value_mask = pad_masks()
    query, value = rand(2, 5, DIM, seed=9), rand(2, 7, DIM, seed=10)
    _, ours = twin_layers(dropout=0.3, bias_initializer="random_normal")
    general = MultiHeadAttention(HEADS, KEY_DIM, score="general")
    general(query, value)
    calls = count_fused_calls(monkeypatch)
    masks = {"query_mask": query_mask, "value_mask": value_mask}
    fused = ours(query, value, **masks)
    assert len(calls) == 1
    unfused, _ = ours(query, value, return_attention_scores=True, **masks)
    ours(query, value, training=True, **masks)
    general(query, value)
    assert len(calls) == 1
    # Both paths agree, and give zeros, not uniform weights, on padded
    # queries: the output is then the output projection's bias.
    np.testing.assert_allclose(np_(fused), np_(unfused), atol=1e-5)
    bias = np_(ours.output_dense.bias)
    assert np.abs(bias).max() > 0.01
    padded = np_(fused)[~query_mask]
    np.testing.assert_allclose(padded, np.broadcast_to(bias, padded.shape), atol=1e-6)


def test_fused_causal_only_matches_explicit_mask():
    _, ours = twin_layers()
    query = rand(2, 5, DIM, seed=11)
    fused = ours(query, query, use_causal_mask=True)
    explicit = ours(query, query, attention_mask=np.tril(np.ones((1, 5, 5), bool)))
    np.testing.assert_allclose(np_(fused), np_(explicit), atol=1e-6)


# Scores per head ----------------------------------------------------------


def reference_mha(layer, query, value, score_fn, mask=None):
    """NumPy multi-head attention from the layer's own weights."""

    def project(dense, x):
        out = np.einsum("btd,dhk->bthk", x, np_(dense.kernel))
        return out + np_(dense.bias)

    q = project(layer.query_dense, query)
    k = project(layer.key_dense, value)
    v = project(layer.value_dense, value)
    raw = np.stack(
        [score_fn(q[:, :, h], k[:, :, h]) for h in range(layer.num_heads)], axis=1
    )
    if mask is not None:
        raw = np.where(mask[:, None], raw, -np.inf)
    weights = np.exp(raw - raw.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    context = np.einsum("bhqk,bkhd->bqhd", weights, v)
    out = np.einsum("bqhd,hdo->bqo", context, np_(layer.output_dense.kernel))
    return out + np_(layer.output_dense.bias), weights


def unit(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


NUMPY_SCORES = {
    "dot": lambda layer: lambda q, k: q @ k.swapaxes(-1, -2),
    "scaled_dot": lambda layer: lambda q, k: q @ k.swapaxes(-1, -2) / 2.0,
    "general": lambda layer: lambda q, k: q @ np_(layer.kernel) @ k.swapaxes(-1, -2),
    "cosine": lambda layer: lambda q, k: unit(q) @ unit(k).swapaxes(-1, -2),
}


@pytest.mark.parametrize("name", sorted(NUMPY_SCORES))
def test_scores_per_head_match_numpy(name):
    keras.utils.set_random_seed(3)
    layer = MultiHeadAttention(HEADS, KEY_DIM, score=name)
    query, value = rand(2, 5, DIM, seed=12), rand(2, 7, DIM, seed=13)
    _, value_mask = pad_masks()
    out, weights = layer(
        query, value, value_mask=value_mask, return_attention_scores=True
    )
    score_fn = NUMPY_SCORES[name](layer._score_layer)
    mask = np.broadcast_to(value_mask[:, None], (2, 5, 7))
    expected_out, expected_weights = reference_mha(layer, query, value, score_fn, mask)
    np.testing.assert_allclose(np_(weights), expected_weights, atol=1e-5)
    np.testing.assert_allclose(np_(out), expected_out, atol=1e-5)


@pytest.mark.parametrize("name", SCORE_NAMES)
def test_every_score_runs_per_head(name):
    keras.utils.set_random_seed(4)
    layer = MultiHeadAttention(HEADS, KEY_DIM, score=name)
    query, value = rand(2, 5, DIM, seed=14), rand(2, 7, DIM, seed=15)
    _, value_mask = pad_masks()
    out, weights = layer(
        query, value, value_mask=value_mask, return_attention_scores=True
    )
    assert tuple(out.shape) == (2, 5, DIM)
    assert tuple(weights.shape) == (2, HEADS, 5, 7)
    weights = np_(weights)
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)
    assert np.all(
        weights[~np.broadcast_to(value_mask[:, None, None], weights.shape)] == 0
    )
    # One score layer shared by every head: its weights do not grow with
    # the number of heads, and follow Keras's eight projection weights.
    more_heads = MultiHeadAttention(2 * HEADS, KEY_DIM, score=name)
    more_heads.build(query.shape, value.shape)
    assert len(more_heads.weights) == len(layer.weights)
    score_weights = layer._score_layer.weights
    assert [id(w) for w in layer.weights[8:]] == [id(w) for w in score_weights]


# Masking edge cases -------------------------------------------------------


@pytest.mark.parametrize("name", ["scaled_dot", "additive"])
@pytest.mark.parametrize("with_scores", [False, True])
def test_fully_masked_row_gives_zeros_not_nan(name, with_scores):
    layer = MultiHeadAttention(HEADS, KEY_DIM, score=name, use_bias=False)
    query = rand(2, 5, DIM, seed=16)  # shapes shared across tests: faster JAX
    attention_mask = np.ones((2, 5, 5), bool)
    attention_mask[0, 2] = False
    result = keras.tree.flatten(
        layer(
            query,
            query,
            attention_mask=attention_mask,
            return_attention_scores=with_scores,
        )
    )
    out = np_(result[0])
    assert np.all(np.isfinite(out))
    np.testing.assert_array_equal(out[0, 2], 0.0)
    assert np.all(np.abs(out[0, [0, 1, 3, 4]]).sum(-1) > 0)
    if with_scores:
        np.testing.assert_array_equal(np_(result[1])[0, :, 2], 0.0)


@pytest.mark.parametrize("name", ["scaled_dot", "additive"])
def test_causal_mask_does_not_leak_the_future(name):
    layer = MultiHeadAttention(HEADS, KEY_DIM, score=name)
    x = rand(2, 5, DIM, seed=17)
    changed = x.copy()
    changed[:, 3:] = rand(2, 2, DIM, seed=18)
    out, weights = layer(x, x, use_causal_mask=True, return_attention_scores=True)
    out_changed = layer(changed, changed, use_causal_mask=True)
    np.testing.assert_allclose(np_(out_changed)[:, :3], np_(out)[:, :3], atol=1e-6)
    assert not np.allclose(np_(out_changed)[:, 3:], np_(out)[:, 3:])
    upper = np.triu(np.ones((5, 5), bool), 1)
    assert np.all(np_(weights)[:, :, upper] == 0)


# Cache --------------------------------------------------------------------


@pytest.mark.parametrize("name", ["scaled_dot", "additive"])
def test_cached_decoding_equals_full_causal_attention(name):
    layer = MultiHeadAttention(HEADS, KEY_DIM, score=name)
    x = rand(2, 5, DIM, seed=19)
    full, full_weights = layer(x, x, use_causal_mask=True, return_attention_scores=True)
    cache = np.zeros((2, 2, 5, HEADS, KEY_DIM), "float32")
    # Prefill two tokens, then one token at a time.
    out, cache = layer(
        x[:, :2], x[:, :2], cache=cache, cache_update_index=0, use_causal_mask=True
    )
    steps = [np_(out)]
    for i in range(2, 5):
        out, step_weights, cache = layer(
            x[:, i : i + 1],
            x[:, i : i + 1],
            cache=cache,
            cache_update_index=ops.convert_to_tensor(i),
            use_causal_mask=True,
            return_attention_scores=True,
        )
        steps.append(np_(out))
        np.testing.assert_allclose(
            np_(step_weights)[:, :, 0], np_(full_weights)[:, :, i], atol=1e-5
        )
    np.testing.assert_allclose(np.concatenate(steps, axis=1), np_(full), atol=1e-5)
    # The cache holds the projected keys and values of every position.
    np.testing.assert_allclose(np_(cache)[:, 0], np_(layer.key_dense(x)), atol=1e-5)
    np.testing.assert_allclose(np_(cache)[:, 1], np_(layer.value_dense(x)), atol=1e-5)


def test_cached_decoding_keeps_the_sliding_window_at_absolute_positions():
    layer = MultiHeadAttention(HEADS, KEY_DIM, sliding_window=2)
    x = rand(2, 5, DIM, seed=25)
    full = layer(x, x, use_causal_mask=True)
    cache = np.zeros((2, 2, 5, HEADS, KEY_DIM), "float32")
    steps = []
    for i in range(5):
        out, cache = layer(
            x[:, i : i + 1],
            x[:, i : i + 1],
            cache=cache,
            cache_update_index=i,
            use_causal_mask=True,
        )
        steps.append(np_(out))
    np.testing.assert_allclose(np.concatenate(steps, axis=1), np_(full), atol=1e-5)


def test_static_cache_for_cross_attention():
    layer = MultiHeadAttention(HEADS, KEY_DIM, score="general")
    query, memory = rand(2, 3, DIM, seed=20), rand(2, 5, DIM, seed=21)
    _, value_mask = pad_masks()
    value_mask = value_mask[:, :5]
    expected = layer(query, memory, value_mask=value_mask)
    cache = ops.stack([layer.key_dense(memory), layer.value_dense(memory)], axis=1)
    got, same_cache = layer(query, query, cache=cache, value_mask=value_mask)
    np.testing.assert_allclose(np_(got), np_(expected), atol=1e-5)
    assert same_cache is cache


def test_cache_in_a_functional_model():
    tokens = keras.Input((1, DIM))
    cache = keras.Input((2, 4, HEADS, KEY_DIM))
    layer = MultiHeadAttention(HEADS, KEY_DIM)
    out, weights, new_cache = layer(
        tokens, tokens, cache=cache, cache_update_index=0, return_attention_scores=True
    )
    assert tuple(out.shape) == (None, 1, DIM)
    assert tuple(weights.shape) == (None, HEADS, 1, 4)
    assert tuple(new_cache.shape) == (None, 2, 4, HEADS, KEY_DIM)


# Mixed precision ----------------------------------------------------------


@pytest.mark.parametrize(
    "policy,name",
    [
        ("mixed_float16", "scaled_dot"),
        ("mixed_bfloat16", "scaled_dot"),
        ("mixed_float16", "additive"),
    ],
)
def test_mixed_precision_with_masks_is_finite(policy, name):
    keras.config.set_dtype_policy(policy)  # restored by tests/conftest.py
    layer = MultiHeadAttention(HEADS, KEY_DIM, score=name)
    query, value = rand(2, 5, DIM, seed=22), rand(2, 7, DIM, seed=23)
    query_mask, value_mask = pad_masks()
    compute = policy.split("_")[1]
    for with_scores in (False, True):
        result = keras.tree.flatten(
            layer(
                query,
                value,
                query_mask=query_mask,
                value_mask=value_mask,
                return_attention_scores=with_scores,
            )
        )
        for tensor in result:
            assert keras.backend.standardize_dtype(tensor.dtype) == compute
            assert np.all(np.isfinite(np_(tensor)))
    assert layer.query_dense.kernel.dtype == "float32"
    cache = np.zeros((2, 2, 5, HEADS, KEY_DIM), "float32")
    out, cache = layer(
        query[:, :1],
        query[:, :1],
        cache=cache,
        cache_update_index=0,
        use_causal_mask=True,
    )
    assert keras.backend.standardize_dtype(cache.dtype) == compute
    assert np.all(np.isfinite(np_(out))) and np.abs(np_(out)).sum() > 0


# Serialization ------------------------------------------------------------


def test_config_round_trip_keeps_score_arguments():
    layer = MultiHeadAttention(
        HEADS, KEY_DIM, dropout=0.1, score=scores.Additive(units=5, use_bias=True)
    )
    query = rand(2, 5, DIM, seed=24)
    out = layer(query, query)
    clone = MultiHeadAttention.from_config(layer.get_config())
    clone(query, query)
    clone.set_weights(layer.get_weights())
    assert clone._score_layer.units == 5 and clone._score_layer.use_bias
    assert clone.get_config() == layer.get_config()
    np.testing.assert_allclose(np_(clone(query, query)), np_(out), atol=1e-6)


def test_saved_functional_model_loads_without_custom_objects(tmp_path):
    tokens = keras.Input((6,), dtype="int32")
    hidden = keras.layers.Embedding(10, DIM, mask_zero=True)(tokens)
    out = MultiHeadAttention(HEADS, KEY_DIM, score="luong", name="mha")(
        hidden, hidden, use_causal_mask=True
    )
    model = keras.Model(tokens, out)
    x = np.array([[3, 4, 5, 0, 0, 0], [1, 2, 3, 4, 5, 6]])
    expected = np_(model(x))
    path = str(tmp_path / "model.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert isinstance(loaded.get_layer("mha"), MultiHeadAttention)
    assert loaded.get_layer("mha").get_config()["score"] == "luong"
    np.testing.assert_allclose(np_(loaded(x)), expected, atol=1e-6)


# Errors -------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"num_heads": 0, "key_dim": 4}, "num_heads=0"),
        ({"num_heads": 2, "key_dim": 0}, "key_dim=0"),
        ({"num_heads": 2, "key_dim": 4, "score": "bilinear"}, "Unknown score"),
    ],
)
def test_constructor_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        MultiHeadAttention(**kwargs)


def test_call_errors():
    layer = MultiHeadAttention(HEADS, KEY_DIM)
    x = rand(2, 3, DIM)
    with pytest.raises(ValueError, match="same batch size"):
        layer(x, rand(3, 3, DIM))
    layer(x, x)
    with pytest.raises(ValueError, match="same batch size"):
        layer(x, rand(3, 3, DIM))
    with pytest.raises(ValueError, match="cache.shape=\\(2, 2, 4, 2\\)"):
        layer(x, x, cache=np.zeros((2, 2, 4, 2), "float32"), cache_update_index=0)
    with pytest.raises(ValueError, match="num_heads=2"):
        layer(x, x, cache=np.zeros((2, 2, 4, 3, KEY_DIM), "float32"))
    with pytest.raises(ValueError, match="should not be set"):
        layer(x, x, cache_update_index=0)
    with pytest.raises(ValueError, match="max_length"):
        layer(
            x,
            x,
            cache=np.zeros((2, 2, 5, HEADS, KEY_DIM), "float32"),
            value_mask=np.ones((2, 3), bool),
        )
    with pytest.raises(ValueError, match="value_dim == key_dim"):
        MultiHeadAttention(HEADS, KEY_DIM, value_dim=3)(
            x, x, cache=np.zeros((2, 2, 3, HEADS, KEY_DIM), "float32")
        )
    with pytest.raises(ValueError, match="rank 3"):
        MultiHeadAttention(HEADS, KEY_DIM, score="general")(
            rand(2, 3, 3, DIM), rand(2, 3, 3, DIM)
        )


@pytest.mark.parametrize("dtype", ["float32", "mixed_bfloat16"])
def test_fused_path_zeroes_rows_of_an_empty_value_sequence(dtype):
    # Padding masks only: the fused path finds the empty rows from the 1-D
    # masks; it must agree with the explicit path (which reduces the full
    # mask) and give the output bias alone on the empty example (a float32
    # bias under a bfloat16 computation: the bias in bfloat16).
    _, ours = twin_layers(bias_initializer="random_normal", dtype=dtype)
    query, value = rand(2, 5, DIM, seed=9), rand(2, 7, DIM, seed=10)
    value_mask = np.ones((2, 7), bool)
    value_mask[1] = False
    out = ours(query, value, value_mask=value_mask)
    assert keras.backend.standardize_dtype(out.dtype) == ours.compute_dtype
    fused = np_(keras.ops.cast(out, "float32"))
    unfused, _ = ours(query, value, value_mask=value_mask, return_attention_scores=True)
    atol = 1e-5 if dtype == "float32" else 3e-2  # bfloat16: 8-bit mantissa
    np.testing.assert_allclose(
        fused, np_(keras.ops.cast(unfused, "float32")), atol=atol
    )
    bias = np_(ours.output_dense.bias)
    np.testing.assert_allclose(
        fused[1], np.broadcast_to(bias, fused[1].shape), atol=atol / 10
    )
    assert not np.allclose(fused[0], bias, atol=atol)


def test_fused_path_padding_with_a_tuple_output_shape():
    # The rows with nothing to attend to get the bias of an output of rank
    # 4 too (it raised an InvalidArgumentError under TensorFlow: a (B, Tq,
    # 1) selector against (B, Tq, 2, 3)); the same outputs as the explicit
    # path, with a query mask, an empty example and a per-head mask.
    layer = MultiHeadAttention(
        2, 4, output_shape=(2, 3), bias_initializer="random_normal"
    )
    x = rand(2, 5, DIM, seed=11)
    value_mask = np.ones((2, 5), bool)
    value_mask[1] = False
    query_mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], bool)
    heads = np.random.default_rng(3).random((2, 2, 5, 5)) < 0.3
    for masks in (
        {"value_mask": value_mask, "query_mask": query_mask},
        {"value_mask": value_mask, "attention_mask": heads},
    ):
        out = np_(layer(x, x, **masks))
        ref, _ = layer(x, x, return_attention_scores=True, **masks)
        assert out.shape == (2, 5, 2, 3)
        np.testing.assert_allclose(out, np_(ref), atol=1e-5)
        bias = np_(layer.output_dense.bias)
        np.testing.assert_allclose(out[1], np.broadcast_to(bias, (5, 2, 3)), atol=1e-6)


@pytest.mark.parametrize("return_scores", [False, True], ids=["fused", "explicit"])
def test_zero_length_keys_give_the_output_bias(return_scores):
    # Nothing to attend to: a zero context, projected (the output bias), on
    # both paths and both backends (JAX's reshape(-1) of a zero-size array
    # used to raise ZeroDivisionError).
    layer = MultiHeadAttention(num_heads=2, key_dim=4, bias_initializer="ones")
    query = np.random.default_rng(0).random((2, 3, 8)).astype("float32")
    value = np.zeros((2, 0, 8), "float32")
    out = layer(query, value, return_attention_scores=return_scores)
    if return_scores:
        out, weights = out
        assert tuple(weights.shape) == (2, 2, 3, 0)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(out), np.ones((2, 3, 8)))


@pytest.mark.parametrize("scale", [1.0, 1e3, 1e4])
def test_mixed_float16_large_inputs_stay_finite(scale):
    # q k^T of 1e3-scale float16 inputs exceeds 65504: the scores are taken
    # in float32, on the path a float16 layer uses without scores too.
    keras.config.set_dtype_policy("mixed_float16")
    try:
        layer = MultiHeadAttention(num_heads=2, key_dim=8)
        x = np.random.default_rng(0).normal(size=(2, 5, 16)).astype("float32")
        x = x / np.abs(x).max() * scale
        out = layer(x, x)
        _, weights = layer(x, x, return_attention_scores=True)
    finally:
        keras.config.set_dtype_policy("float32")
    assert np.all(np.isfinite(keras.ops.convert_to_numpy(out).astype("float32")))
    weights = keras.ops.convert_to_numpy(weights).astype("float32")
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-2)
