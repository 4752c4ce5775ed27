"""The Transformer blocks with `num_key_value_heads=` (grouped-query attention)."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_attention.layers import (
    GroupedQueryAttention,
    MultiHeadAttention,
    TransformerDecoderBlock,
    TransformerEncoderBlock,
)

HEADS, KV_HEADS, DIM, LENGTH = 4, 2, 8, 5


def rand(*shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype("float32")


def np_(x):
    return np.asarray(ops.convert_to_numpy(x), dtype="float32")


def test_default_keeps_multi_head_attention():
    block = TransformerEncoderBlock(intermediate_dim=16, num_heads=HEADS)
    block(rand(2, LENGTH, DIM))
    assert type(block._self_attention_layer) is MultiHeadAttention
    assert "num_key_value_heads" not in block.get_config()


def test_encoder_block_with_fewer_key_value_heads():
    block = TransformerEncoderBlock(
        intermediate_dim=16, num_heads=HEADS, num_key_value_heads=KV_HEADS
    )
    x = rand(2, LENGTH, DIM)
    out = block(x)
    attention = block._self_attention_layer
    assert isinstance(attention, GroupedQueryAttention)
    assert tuple(attention.key_dense.kernel.shape) == (DIM, KV_HEADS, DIM // HEADS)
    assert block.get_config()["num_key_value_heads"] == KV_HEADS
    restored = TransformerEncoderBlock.from_config(block.get_config())
    restored(x)
    restored.set_weights(block.get_weights())
    np.testing.assert_allclose(np_(restored(x)), np_(out), atol=1e-6)


@pytest.mark.parametrize("split", [False, True], ids=["stacked", "heads_first"])
def test_decoder_block_cached_steps_equal_the_full_call(split):
    block = TransformerDecoderBlock(
        intermediate_dim=16, num_heads=HEADS, num_key_value_heads=KV_HEADS
    )
    target, source = rand(2, LENGTH, DIM), rand(2, 3, DIM, seed=1)
    full = np_(block(target, source))
    cross = block.compute_cross_attention_cache(source, split=split)
    head_dim = DIM // HEADS
    if split:
        empty = np.zeros((2, KV_HEADS, LENGTH, head_dim), "float32")
        cache = (empty, empty)
        assert [tuple(c.shape) for c in cross] == [(2, KV_HEADS, 3, head_dim)] * 2
    else:
        cache = np.zeros((2, 2, LENGTH, KV_HEADS, head_dim), "float32")
        assert tuple(cross.shape) == (2, 2, 3, KV_HEADS, head_dim)
    steps = []
    for i in range(LENGTH):
        out, cache, cross = block(
            target[:, i : i + 1],
            source,
            self_attention_cache=cache,
            self_attention_cache_update_index=i,
            cross_attention_cache=cross,
        )
        steps.append(np_(out))
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, atol=2e-5)


def test_indivisible_key_value_heads_raise():
    with pytest.raises(ValueError, match="num_key_value_heads=3"):
        TransformerEncoderBlock(
            intermediate_dim=16, num_heads=HEADS, num_key_value_heads=3
        )
    with pytest.raises(TypeError):
        TransformerEncoderBlock(
            intermediate_dim=16, num_heads=HEADS, num_key_value_heads=2.0
        )


def test_saved_model_reloads(tmp_path):
    inputs = keras.Input((LENGTH, DIM))
    block = TransformerDecoderBlock(
        intermediate_dim=16, num_heads=HEADS, num_key_value_heads=1
    )
    model = keras.Model(inputs, block(inputs))
    path = str(tmp_path / "block.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    x = rand(2, LENGTH, DIM, seed=2)
    np.testing.assert_allclose(np_(loaded(x)), np_(model(x)), atol=1e-6)
