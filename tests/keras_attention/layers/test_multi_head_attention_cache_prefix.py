"""A causal decoding step with a known index reads only the cache's prefix.

`MultiHeadAttention` attends over the first `cache_update_index + Tq`
cache positions when the index has a value (`dispatch.concrete_int`), and
over the whole cache otherwise (under a trace). Both must give the same
outputs, weights and caches; the whole-cache path is forced here by making
`concrete_int` answer None, as it does under a trace.
"""

import keras
import numpy as np
import pytest
from keras import ops

from keras_attention.layers import (
    MultiHeadAttention,
    TransformerDecoderBlock,
    dispatch,
)

HEADS, KEY_DIM, DIM, LENGTH = 2, 4, 8, 6


def rand(*shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype("float32")


def np_(x):
    return np.asarray(ops.convert_to_numpy(x), dtype="float32")


def whole_cache(monkeypatch):
    """Makes every index unknown, as under a trace: the whole cache is read."""
    monkeypatch.setattr(dispatch, "concrete_int", lambda value: None)


def run_steps(layer, x, cache, step=1, tensor_index=True, **kwargs):
    """Outputs, weights and final cache of `x` fed `step` positions at a time.

    The index is an int32 tensor (as a search passes it; known eagerly on
    PyTorch and TensorFlow) or a Python int (known on every backend).
    """
    outputs, weights = [], []
    for i in range(0, x.shape[1], step):
        out, w, cache = layer(
            x[:, i : i + step],
            x[:, i : i + step],
            cache=cache,
            cache_update_index=ops.convert_to_tensor(i, "int32") if tensor_index else i,
            use_causal_mask=True,
            return_attention_scores=True,
            **kwargs,
        )
        assert tuple(w.shape) == (x.shape[0], HEADS, step, LENGTH)
        outputs.append(np_(out))
        weights.append(np_(w))
    return np.concatenate(outputs, 1), np.concatenate(weights, 2), cache


def caches(batch):
    stacked = np.zeros((batch, 2, LENGTH, HEADS, KEY_DIM), "float32")
    pair = (np.zeros((batch, HEADS, LENGTH, KEY_DIM), "float32"),) * 2
    return {"stacked": stacked, "split": pair}


@pytest.mark.parametrize("kind", ["stacked", "split"])
@pytest.mark.parametrize(
    "kwargs",
    [{}, {"score": "general"}, {"sliding_window": 2}, {"window": 1}],
    ids=["scaled_dot", "general", "sliding_window", "window"],
)
@pytest.mark.parametrize("step", [1, 2])
@pytest.mark.parametrize("tensor_index", [True, False], ids=["tensor", "int"])
def test_prefix_equals_whole_cache(kind, kwargs, step, tensor_index, monkeypatch):
    layer = MultiHeadAttention(HEADS, KEY_DIM, **kwargs)
    x = rand(3, LENGTH, DIM, seed=1)
    cache = caches(3)[kind]
    got, got_weights, got_cache = run_steps(layer, x, cache, step, tensor_index)
    whole_cache(monkeypatch)
    want, want_weights, want_cache = run_steps(layer, x, cache, step, tensor_index)
    np.testing.assert_allclose(got, want, atol=1e-5)
    np.testing.assert_allclose(got_weights, want_weights, atol=1e-5)
    for a, b in zip(keras.tree.flatten(got_cache), keras.tree.flatten(want_cache)):
        np.testing.assert_allclose(np_(a), np_(b), atol=1e-6)
    # Queries never see later positions: the padded weights are exactly 0.
    later = np.triu(np.ones((LENGTH, LENGTH), bool), k=1)
    assert np.all(got_weights[:, :, later] == 0.0)


def test_prefix_with_masks_equals_whole_cache(monkeypatch):
    layer = MultiHeadAttention(HEADS, KEY_DIM)
    x = rand(2, LENGTH, DIM, seed=2)
    value_mask = np.array([[1, 0, 1, 1, 1, 1], [1, 1, 1, 0, 1, 0]], bool)
    attention_mask = rand(2, 1, LENGTH, seed=3) > -0.5
    attention_mask[:, :, 0] = True
    masks = {"value_mask": value_mask, "attention_mask": attention_mask}
    got, got_weights, _ = run_steps(layer, x, caches(2)["split"], **masks)
    whole_cache(monkeypatch)
    want, want_weights, _ = run_steps(layer, x, caches(2)["split"], **masks)
    np.testing.assert_allclose(got, want, atol=1e-5)
    np.testing.assert_allclose(got_weights, want_weights, atol=1e-5)
    assert np.all(got_weights[0, :, :, 1] == 0.0)  # masked key


def test_a_mask_of_the_wrong_length_still_fails():
    layer = MultiHeadAttention(HEADS, KEY_DIM)
    x = rand(2, 1, DIM)
    with pytest.raises(ValueError, match="every key position"):
        layer(
            x,
            x,
            value_mask=np.ones((2, LENGTH + 1), bool),
            cache=caches(2)["split"],
            cache_update_index=0,
            use_causal_mask=True,
        )


@pytest.mark.parametrize("with_scores", [False, True])
def test_decoder_block_steps_equal_whole_cache(with_scores, monkeypatch):
    block = TransformerDecoderBlock(intermediate_dim=16, num_heads=HEADS, dropout=0.1)
    target, source = rand(2, LENGTH, DIM, seed=4), rand(2, 5, DIM, seed=5)
    block(target, source)
    cross = block.compute_cross_attention_cache(source, split=True)

    def steps():
        cache = caches(2)["split"]
        outputs = []
        for i in range(LENGTH):
            results = block(
                target[:, i : i + 1],
                source,
                self_attention_cache=cache,
                self_attention_cache_update_index=ops.convert_to_tensor(i, "int32"),
                cross_attention_cache=cross,
                return_attention_scores=with_scores,
            )
            cache = results[1]
            outputs.append([np_(r) for r in keras.tree.flatten(results)])
        return outputs

    got = steps()
    whole_cache(monkeypatch)
    want = steps()
    for a, b in zip(keras.tree.flatten(got), keras.tree.flatten(want)):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, atol=1e-5)
    # And teacher-forced, without a cache.
    full = np_(block(target, source))
    np.testing.assert_allclose(np.concatenate([g[0] for g in got], 1), full, atol=1e-5)


def test_attention_dropout_acts_only_in_training():
    layer = MultiHeadAttention(HEADS, KEY_DIM, dropout=0.5, seed=1)
    x = rand(2, 3, DIM, seed=7)
    # `return_attention_scores` takes the explicit path, whose dropout it is.
    plain, _ = layer(x, x, return_attention_scores=True)
    again, _ = layer(x, x, return_attention_scores=True, training=False)
    dropped, _ = layer(x, x, return_attention_scores=True, training=True)
    np.testing.assert_array_equal(np_(plain), np_(again))
    assert np.abs(np_(dropped) - np_(plain)).max() > 1e-3


def test_concrete_int_knows_eager_values():
    assert dispatch.concrete_int(3) == 3
    assert dispatch.concrete_int(np.int32(4)) == 4
    assert dispatch.concrete_int(None) is None
    expected = 5 if keras.backend.backend() in ("torch", "tensorflow") else None
    assert dispatch.concrete_int(ops.convert_to_tensor(5, "int32")) == expected


def test_concrete_int_is_none_while_torch_compiles(monkeypatch):
    if keras.backend.backend() != "torch":
        pytest.skip("PyTorch's own tracers")
    import torch

    index = ops.convert_to_tensor(5, "int32")
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    assert dispatch.concrete_int(index) is None
    assert dispatch.concrete_int(5) == 5  # a Python int is static anyway
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: False)
    monkeypatch.setattr(torch.jit, "is_tracing", lambda: True)
    assert dispatch.concrete_int(index) is None


def traced(function):
    """`function` compiled by the backend (None where there is no tracer here)."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.function(function)
    if backend == "jax":
        import jax

        return jax.jit(function)
    return None


def test_a_traced_step_reads_the_whole_cache():
    """Under a trace the index has no value: static shapes, same results."""
    layer = MultiHeadAttention(HEADS, KEY_DIM)
    x = rand(2, 1, DIM, seed=6)
    pair = caches(2)["split"]
    layer(x, x, cache=pair, cache_update_index=0)  # builds it
    seen = []

    def step(x, keys, values, index):
        seen.append(dispatch.concrete_int(index))
        out, weights, cache = layer(
            x,
            x,
            cache=(keys, values),
            cache_update_index=index,
            use_causal_mask=True,
            return_attention_scores=True,
        )
        assert tuple(weights.shape) == (2, HEADS, 1, LENGTH)
        return out, weights

    compiled = traced(step)
    if compiled is None:
        pytest.skip(f"no tracer of {keras.backend.backend()} in the tests")
    index = ops.convert_to_tensor(2, "int32")
    got = compiled(x, *pair, index)
    assert seen == [None]
    want = step(x, *pair, 2)
    for a, b in zip(got, want):
        np.testing.assert_allclose(np_(a), np_(b), atol=1e-5)


def test_split_cross_attention_cache_is_laid_out_heads_first():
    """Equal to the stacked cache transposed, and (PyTorch) not a strided view.

    A view would be copied whole by every decoding step that reshapes it.
    """
    block = TransformerDecoderBlock(intermediate_dim=16, num_heads=HEADS)
    target, source = rand(2, 3, DIM, seed=8), rand(2, 5, DIM, seed=9)
    block(target, source)
    stacked = np_(block.compute_cross_attention_cache(source))
    keys, values = block.compute_cross_attention_cache(source, split=True)
    np.testing.assert_allclose(np_(keys), stacked[:, 0].transpose(0, 2, 1, 3))
    np.testing.assert_allclose(np_(values), stacked[:, 1].transpose(0, 2, 1, 3))
    if keras.backend.backend() == "torch":
        assert keys.is_contiguous() and values.is_contiguous()
