"""`GroupedQueryAttention` against `keras.layers.GroupQueryAttention`.

Each test builds Keras's layer and ours with the same weights and compares
ours, on each of its paths (the fused kernel, the explicit scores, chunked,
windowed, a decoding cache), with Keras's explicit path (taken through
`return_attention_scores=True`). The masks leave every query row a key, where
Keras's fused path and ours agree too.
"""

import importlib.util
import pathlib

import keras
import numpy as np
import pytest
from keras import ops

from keras_attention.layers import GroupedQueryAttention, MultiHeadAttention
from keras_attention.layers import multi_head_paths as mha_paths

_spec = importlib.util.spec_from_file_location(
    "gradients", pathlib.Path(__file__).parents[1] / "gradients.py"
)
gradients = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gradients)

HEAD_DIM, QUERY_HEADS, DIM, BATCH, LENGTH = 4, 4, 6, 2, 6
KV_HEADS = [1, 2, 4]
PATHS = {
    "fused": {},
    "explicit": {},
    "chunked": {"chunk_threshold": 0, "chunk_size": 4},
    "windowed": {"window": 2},
}


def rand(*shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype("float32")


def np_(x):
    return np.asarray(ops.convert_to_numpy(x), dtype="float32")


def twins(kv_heads, **ours_kwargs):
    """Keras's layer and ours with the same weights, built on (B, T, DIM)."""
    keras.utils.set_random_seed(1)
    kwargs = dict(
        head_dim=HEAD_DIM,
        num_query_heads=QUERY_HEADS,
        num_key_value_heads=kv_heads,
        bias_initializer="random_normal",
    )
    window = ours_kwargs.get("window")
    reference = keras.layers.GroupQueryAttention(
        sliding_window=None if window is None else window + 1, **kwargs
    )
    ours = GroupedQueryAttention(**kwargs, **ours_kwargs)
    shape = (BATCH, LENGTH, DIM)
    reference.build(shape, shape)
    ours.build(shape, shape)
    # Keras's weights first; a score's own weights (if any) come after.
    for weight, value in zip(ours.weights, reference.get_weights(), strict=False):
        weight.assign(value)
    return reference, ours


def masks():
    """Call arguments of every mask kind; each query row keeps a key."""
    value_mask = np.ones((BATCH, LENGTH), bool)
    value_mask[1, 3:] = False
    pairs = np.random.default_rng(4).random((BATCH, LENGTH, LENGTH)) > 0.4
    pairs[..., 0] = True
    per_head = np.random.default_rng(5).random((BATCH, QUERY_HEADS, LENGTH, LENGTH))
    per_head = per_head > 0.4
    per_head[..., 0] = True
    return {
        "none": {},
        "causal": {"use_causal_mask": True},
        "padding_causal": {"value_mask": value_mask, "use_causal_mask": True},
        "pairs": {"attention_mask": pairs},
        "per_head": {"attention_mask": per_head},
    }


MASKS = masks()


def count_calls(monkeypatch, module, name):
    calls = []
    function = getattr(module, name)

    def counted(*args, **kwargs):
        calls.append((args, kwargs))
        return function(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


@pytest.mark.parametrize("mask", sorted(MASKS))
@pytest.mark.parametrize("path", sorted(PATHS))
@pytest.mark.parametrize("kv_heads", KV_HEADS)
def test_outputs_equal_keras_on_every_path(kv_heads, path, mask, monkeypatch):
    reference, ours = twins(kv_heads, **PATHS[path])
    query, value = rand(BATCH, LENGTH, DIM), rand(BATCH, LENGTH, DIM, seed=1)
    kwargs = MASKS[mask]
    expected, expected_scores = reference(
        query, value, return_attention_scores=True, **kwargs
    )
    if path == "explicit":
        got, got_scores = ours(query, value, return_attention_scores=True, **kwargs)
        np.testing.assert_allclose(np_(got_scores), np_(expected_scores), atol=2e-5)
    else:
        module = mha_paths if path != "fused" else keras.ops
        name = {
            "fused": "dot_product_attention",
            "chunked": "chunked_attention",
            "windowed": "windowed_attention",
        }[path]
        calls = count_calls(monkeypatch, module, name)
        got = ours(query, value, **kwargs)
        monkeypatch.undo()
        assert calls  # the path was taken
        if path != "fused":
            # One call per query head of a group, each on the key/value
            # heads as projected: nothing repeated.
            assert len(calls) == QUERY_HEADS // kv_heads
            for args, _ in calls:
                assert args[1].shape[2] == kv_heads
    np.testing.assert_allclose(np_(got), np_(expected), atol=2e-5)


@pytest.mark.parametrize("split", [False, True], ids=["stacked", "heads_first"])
@pytest.mark.parametrize("kv_heads", KV_HEADS)
def test_cached_decoding_equals_keras_causal_attention(kv_heads, split):
    reference, ours = twins(kv_heads)
    x = rand(BATCH, LENGTH, DIM, seed=2)
    expected = np_(reference(x, x, use_causal_mask=True))
    if split:
        empty = np.zeros((BATCH, kv_heads, LENGTH, HEAD_DIM), "float32")
        cache = (empty, empty)
    else:
        cache = np.zeros((BATCH, 2, LENGTH, kv_heads, HEAD_DIM), "float32")
    steps = []
    for i in range(LENGTH):
        out, cache = ours(
            x[:, i : i + 1],
            x[:, i : i + 1],
            cache=cache,
            cache_update_index=ops.convert_to_tensor(i),
            use_causal_mask=True,
        )
        steps.append(np_(out))
    np.testing.assert_allclose(np.concatenate(steps, axis=1), expected, atol=2e-5)
    shapes = [tuple(c.shape) for c in keras.tree.flatten(cache)]
    if split:
        assert shapes == [(BATCH, kv_heads, LENGTH, HEAD_DIM)] * 2
    else:
        assert shapes == [(BATCH, 2, LENGTH, kv_heads, HEAD_DIM)]


@pytest.mark.parametrize("split", [False, True], ids=["stacked", "heads_first"])
def test_a_decoding_step_groups_the_queries_not_the_cache(split, monkeypatch):
    """The cache of 2 key/value heads is never repeated to 4 query heads, and
    the steps (a prefix of 2, then one query each) equal Keras's layer."""
    reference, ours = twins(2)
    x = rand(BATCH, LENGTH, DIM, seed=4)
    expected = np_(reference(x, x, use_causal_mask=True))
    if split:
        cache = (np.zeros((BATCH, 2, LENGTH, HEAD_DIM), "float32"),) * 2
    else:
        cache = np.zeros((BATCH, 2, LENGTH, 2, HEAD_DIM), "float32")
    repeats = count_calls(monkeypatch, keras.ops, "repeat")
    steps = []
    for start, stop in [(0, 2)] + [(i, i + 1) for i in range(2, LENGTH)]:
        out, cache = ours(
            x[:, start:stop],
            x[:, start:stop],
            cache=cache,
            cache_update_index=start,
            use_causal_mask=True,
        )
        steps.append(np_(out))
    monkeypatch.undo()
    assert not repeats
    np.testing.assert_allclose(np.concatenate(steps, axis=1), expected, atol=2e-5)


def test_cache_of_query_heads_is_refused():
    _, ours = twins(2)
    x = rand(1, 1, DIM)
    cache = np.zeros((1, 2, 3, QUERY_HEADS, HEAD_DIM), "float32")
    with pytest.raises(ValueError):
        ours(x, x, cache=cache, cache_update_index=0)


def test_equal_heads_equal_our_multi_head_attention():
    _, ours = twins(QUERY_HEADS, score="general")
    mha = MultiHeadAttention(QUERY_HEADS, HEAD_DIM, score="general")
    query, value = rand(BATCH, LENGTH, DIM), rand(BATCH, LENGTH, DIM, seed=1)
    mha.build(query.shape, value.shape)
    mha.set_weights(ours.get_weights())
    for kwargs in MASKS.values():
        np.testing.assert_allclose(
            np_(ours(query, value, **kwargs)),
            np_(mha(query, value, **kwargs)),
            atol=2e-5,
        )


@pytest.mark.parametrize("score", ["general", "additive"])
def test_other_scores_agree_across_paths(score):
    query, value = rand(BATCH, LENGTH, DIM), rand(BATCH, LENGTH, DIM, seed=1)
    outputs = {}
    for path in ("explicit", "chunked", "windowed"):
        _, ours = twins(2, score=score, **PATHS[path])
        kwargs = {"return_attention_scores": True} if path == "explicit" else {}
        result = ours(query, value, use_causal_mask=True, **kwargs)
        outputs[path] = np_(result[0] if path == "explicit" else result)
    # The windowed path sees keys at most 2 back: compare the rows where
    # that is every key the causal mask leaves.
    np.testing.assert_allclose(outputs["chunked"], outputs["explicit"], atol=2e-5)
    np.testing.assert_allclose(
        outputs["windowed"][:, :3], outputs["explicit"][:, :3], atol=2e-5
    )


def test_save_and_load_without_custom_objects(tmp_path):
    _, ours = twins(2, score="general", chunk_threshold=0, chunk_size=4)
    inputs = keras.Input((LENGTH, DIM))
    model = keras.Model(inputs, ours(inputs, inputs, use_causal_mask=True))
    path = str(tmp_path / "gqa.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    layer = loaded.layers[-1]
    assert isinstance(layer, GroupedQueryAttention)
    assert layer.get_config() == ours.get_config()
    x = rand(BATCH, LENGTH, DIM, seed=3)
    np.testing.assert_allclose(np_(loaded(x)), np_(model(x)), atol=1e-6)


def test_config_is_keras_config_plus_ours():
    reference, ours = twins(2)
    config = ours.get_config()
    added = {"score", "chunk_threshold", "chunk_size", "window"}
    assert set(config) == set(reference.get_config()) | added
    assert GroupedQueryAttention.from_config(config).get_config() == config


def test_indivisible_heads_raise():
    with pytest.raises(ValueError, match="num_key_value_heads=3"):
        GroupedQueryAttention(head_dim=4, num_query_heads=4, num_key_value_heads=3)


@pytest.mark.parametrize("path", ["chunked", "windowed"])
@pytest.mark.parametrize("kv_heads", [1, 2])
def test_gradients_equal_the_explicit_path(kv_heads, path):
    """Input and weight gradients of the grouped kernels: the explicit path's."""
    query, value = rand(BATCH, LENGTH, DIM), rand(BATCH, LENGTH, DIM, seed=1)
    loss = gradients.weighted_sum(rand(BATCH, LENGTH, DIM, seed=6))
    kwargs = {
        "use_causal_mask": True,
        "value_mask": MASKS["padding_causal"]["value_mask"],
    }
    _, explicit = twins(
        kv_heads, window=PATHS["windowed"]["window"] if path == "windowed" else None
    )
    _, blockwise = twins(kv_heads, **PATHS[path])
    expected_out, expected = gradients.value_and_gradients(
        explicit,
        (query, value),
        lambda out: loss(out[0]),
        {**kwargs, "return_attention_scores": True},
    )
    got_out, got = gradients.value_and_gradients(
        blockwise, (query, value), loss, kwargs
    )
    np.testing.assert_allclose(got_out, expected_out[0], atol=2e-5)
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e, atol=1e-4)
