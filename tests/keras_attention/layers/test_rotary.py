"""Rotary positions (`rotary=`) in the attention layers and the blocks.

The explicit path equals RoFormer's rotation computed here in NumPy; the
chunked and windowed paths and cached decoding equal the explicit path.
"""

import math

import keras
import numpy as np
import pytest
from keras import ops

from keras_attention.layers import (
    ALiBi,
    GroupedQueryAttention,
    MultiHeadAttention,
    TransformerDecoderBlock,
)

BATCH, LENGTH, DIM, HEADS, HEAD_DIM, WAVELENGTH = 2, 9, 8, 4, 4, 100


def rand(*shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype("float32")


def np_(x):
    return np.asarray(ops.convert_to_numpy(x), dtype="float32")


def rotate(x, start=0):
    """RoFormer's rotation of `(B, T, heads, d)`: feature `i` paired with `i + d/2`."""
    half = x.shape[-1] // 2
    frequencies = WAVELENGTH ** (-np.arange(half) / half)
    angles = (np.arange(x.shape[1]) + start)[:, None] * frequencies[None, :]
    cos, sin = np.cos(angles)[None, :, None, :], np.sin(angles)[None, :, None, :]
    first, second = x[..., :half], x[..., half:]
    return np.concatenate([first * cos - second * sin, second * cos + first * sin], -1)


def make(layer="mha", **kwargs):
    keras.utils.set_random_seed(2)
    if layer == "mha":
        made = MultiHeadAttention(
            num_heads=HEADS, key_dim=HEAD_DIM, rotary=WAVELENGTH, **kwargs
        )
    else:
        made = GroupedQueryAttention(
            head_dim=HEAD_DIM,
            num_query_heads=HEADS,
            num_key_value_heads=2,
            rotary=WAVELENGTH,
            **kwargs,
        )
    shape = (BATCH, LENGTH, DIM)
    made.build(shape, shape)
    return made


def twin(layer, **kwargs):
    other = type(layer).from_config({**layer.get_config(), **kwargs})
    shape = (BATCH, LENGTH, DIM)
    other.build(shape, shape)
    other.set_weights(layer.get_weights())
    return other


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_rotary_equals_a_numpy_reference(causal):
    layer = make(use_bias=False, chunk_threshold=None)
    x = rand(BATCH, LENGTH, DIM, seed=1)
    wq, wk, wv, wo = (np_(w) for w in layer.get_weights())
    q = rotate(np.einsum("btd,dhk->bthk", x, wq)) / math.sqrt(HEAD_DIM)
    k = rotate(np.einsum("btd,dhk->bthk", x, wk))
    v = np.einsum("btd,dhk->bthk", x, wv)
    scores = np.einsum("bqhd,bkhd->bhqk", q, k)
    if causal:
        scores = np.where(np.tril(np.ones((LENGTH, LENGTH), bool)), scores, -np.inf)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    expected = np.einsum("bhqk,bkhd,hdo->bqo", weights, v, wo)
    got = layer(x, x, use_causal_mask=causal)
    np.testing.assert_allclose(np_(got), expected, atol=2e-5)


def test_relative_positions_only():
    """A query and key shifted together score the same (RoFormer's property)."""
    x = rand(1, 1, HEAD_DIM * HEADS, seed=3).reshape(1, 1, HEADS, HEAD_DIM)
    near = np.einsum("bthd,bthd->bh", rotate(x, 2), rotate(x, 5))
    far = np.einsum("bthd,bthd->bh", rotate(x, 40), rotate(x, 43))
    np.testing.assert_allclose(near, far, atol=1e-4)


@pytest.mark.parametrize(
    "path", [{"chunk_threshold": 0, "chunk_size": 4}, {"window": LENGTH}]
)
@pytest.mark.parametrize("layer", ["mha", "gqa"])
def test_blockwise_paths_equal_the_explicit_path(layer, path):
    explicit = make(layer, chunk_threshold=None)
    x = rand(BATCH, LENGTH, DIM, seed=4)
    expected = explicit(x, x, use_causal_mask=True)
    got = twin(explicit, **path)(x, x, use_causal_mask=True)
    np.testing.assert_allclose(np_(got), np_(expected), atol=2e-5)


@pytest.mark.parametrize("hook", [None, "alibi"])
@pytest.mark.parametrize("split", [False, True], ids=["stacked", "heads_first"])
@pytest.mark.parametrize("layer", ["mha", "gqa"])
def test_cached_decoding_equals_the_full_call(layer, split, hook):
    made = make(layer, score_mod=None if hook is None else ALiBi())
    x = rand(BATCH, LENGTH, DIM, seed=5)
    expected = np_(made(x, x, use_causal_mask=True))
    kv_heads = made._key_value_heads()
    if split:
        cache = (np.zeros((BATCH, kv_heads, LENGTH, HEAD_DIM), "float32"),) * 2
    else:
        cache = np.zeros((BATCH, 2, LENGTH, kv_heads, HEAD_DIM), "float32")
    steps = []
    # Two queries, then one at a time: the rotation starts at the index.
    for start, stop in [(0, 2)] + [(i, i + 1) for i in range(2, LENGTH)]:
        step = x[:, start:stop]
        output, cache = made(
            step, step, cache=cache, cache_update_index=start, use_causal_mask=True
        )
        steps.append(np_(output))
    np.testing.assert_allclose(np.concatenate(steps, 1), expected, atol=2e-5)


def test_decoder_block_with_rotary_grouped_heads_decodes_as_the_full_call():
    keras.utils.set_random_seed(6)
    block = TransformerDecoderBlock(
        intermediate_dim=16, num_heads=HEADS, num_key_value_heads=2, rotary=100
    )
    target = rand(BATCH, LENGTH, DIM, seed=7)
    full = np_(block(target))
    assert block._self_attention_layer.rotary == 100
    cache = np.zeros((BATCH, 2, LENGTH, 2, DIM // HEADS), "float32")
    steps = []
    for i in range(LENGTH):
        out, cache = block(
            target[:, i : i + 1],
            self_attention_cache=cache,
            self_attention_cache_update_index=i,
        )
        steps.append(np_(out))
    np.testing.assert_allclose(np.concatenate(steps, 1), full, atol=2e-5)
    restored = TransformerDecoderBlock.from_config(block.get_config())
    restored(target)
    restored.set_weights(block.get_weights())
    np.testing.assert_allclose(np_(restored(target)), full, atol=1e-6)


def test_save_and_load_without_custom_objects(tmp_path):
    layer = make("gqa", chunk_threshold=0, chunk_size=4)
    inputs = keras.Input((LENGTH, DIM))
    model = keras.Model(inputs, layer(inputs, inputs, use_causal_mask=True))
    path = str(tmp_path / "rotary.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.layers[-1].get_config() == layer.get_config()
    x = rand(BATCH, LENGTH, DIM, seed=8)
    np.testing.assert_allclose(np_(loaded(x)), np_(model(x)), atol=1e-6)


def test_configs_without_rotary_are_unchanged():
    assert "rotary" not in MultiHeadAttention(num_heads=2, key_dim=4).get_config()
    block = TransformerDecoderBlock(intermediate_dim=8, num_heads=2)
    assert "rotary" not in block.get_config()
    assert "score_mod" not in block.get_config()


def test_bad_rotary_arguments_raise():
    with pytest.raises(ValueError, match="key_dim must be even|`key_dim` must"):
        MultiHeadAttention(num_heads=2, key_dim=3, rotary=100)
    with pytest.raises(ValueError, match="rotary=0"):
        MultiHeadAttention(num_heads=2, key_dim=4, rotary=0)
