"""Transformer blocks pass chunk_threshold, chunk_size and window to attention.

A block with a small `chunk_threshold` (or a `window`) is compared with the
same block (same weights) with `chunk_threshold=None` (and the window's
band given as an attention mask): outputs and gradients with respect to the
inputs and every trainable weight. Spies on `chunked_attention` and
`windowed_attention` check which path ran.
"""

import importlib.util
import os

import keras
import numpy as np
import pytest

from keras_attention.layers import multi_head_paths as mha_paths
from keras_attention.layers.chunked import chunked_attention
from keras_attention.layers.transformer import (
    TransformerDecoderBlock,
    TransformerEncoderBlock,
)
from keras_attention.layers.windowed import windowed_attention

_spec = importlib.util.spec_from_file_location(
    "attention_cases", os.path.join(os.path.dirname(__file__), "attention_cases.py")
)
cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cases)

B, DIM, HEADS = cases.B, cases.DIM, cases.HEADS
T, S, FFN = 13, 17, 16
THRESHOLD, CHUNK, RADIUS = 8, 5, 3


@pytest.fixture
def calls(monkeypatch):
    """Counts the chunked and windowed calls of the attention sublayers."""
    count = {"chunked": 0, "windowed": 0}

    def chunked_spy(*args, **kwargs):
        count["chunked"] += 1
        return chunked_attention(*args, **kwargs)

    def windowed_spy(*args, **kwargs):
        count["windowed"] += 1
        return windowed_attention(*args, **kwargs)

    monkeypatch.setattr(mha_paths, "chunked_attention", chunked_spy)
    monkeypatch.setattr(mha_paths, "windowed_attention", windowed_spy)
    return count


def _data(length, seed):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(B, length, DIM)).astype("float32")


def _band(length, radius=RADIUS):
    distance = np.arange(length)[:, None] - np.arange(length)[None, :]
    return np.broadcast_to(np.abs(distance) <= radius, (B, length, length))


def _padding(length):
    mask = np.ones((B, length), bool)
    mask[0, length - 4 :] = False
    mask[1, :2] = False
    return mask


def _twins(cls, inputs, **config):
    """The block as configured and its explicit twin, same weights."""
    config = {"intermediate_dim": FFN, "num_heads": HEADS, **config}
    block = cls(**config)
    explicit = cls(
        **{**config, "chunk_threshold": None, "window": None, "name": "explicit"}
    )
    for layer in (block, explicit):
        layer(*inputs)
    explicit.set_weights(block.get_weights())
    return block, explicit


def _value_and_grads(block, inputs, kwargs):
    """Output and gradients of `sum(output * probe)` (inputs and weights)."""
    return cases.value_and_grads(block, inputs, kwargs)


def _assert_same(got, expected):
    cases.assert_same(got, expected, atol=3e-5, grad_atol=1e-4)


def test_encoder_chunked_equals_explicit(calls):
    x = _data(T, 0)
    block, explicit = _twins(
        TransformerEncoderBlock,
        [x],
        chunk_threshold=THRESHOLD,
        chunk_size=CHUNK,
        normalize_first=True,
    )
    kwargs = {"padding_mask": _padding(T)}
    calls["chunked"] = 0
    got = _value_and_grads(block, [x], kwargs)
    assert calls["chunked"] >= 1
    calls["chunked"] = 0
    expected = _value_and_grads(explicit, [x], kwargs)
    assert calls["chunked"] == 0
    _assert_same(got, expected)


def test_encoder_window_equals_explicit_band(calls):
    x = _data(T, 1)
    block, explicit = _twins(TransformerEncoderBlock, [x], window=RADIUS)
    padding = _padding(T)
    calls["windowed"] = 0
    got = _value_and_grads(block, [x], {"padding_mask": padding})
    assert calls["windowed"] >= 1
    expected = _value_and_grads(
        explicit, [x], {"padding_mask": padding, "attention_mask": _band(T)}
    )
    _assert_same(got, expected)


def test_decoder_window_on_self_attention_chunks_on_cross(calls):
    target, source = _data(T, 2), _data(S, 3)
    block, explicit = _twins(
        TransformerDecoderBlock,
        [target, source],
        chunk_threshold=THRESHOLD,
        chunk_size=CHUNK,
        window=RADIUS,
    )
    assert block._self_attention_layer.window == RADIUS
    assert block._cross_attention_layer.window is None
    for attention in (block._self_attention_layer, block._cross_attention_layer):
        assert (attention.chunk_threshold, attention.chunk_size) == (THRESHOLD, CHUNK)
    kwargs = {
        "decoder_padding_mask": _padding(T),
        "encoder_padding_mask": _padding(S),
    }
    calls.update(chunked=0, windowed=0)
    got = _value_and_grads(block, [target, source], kwargs)
    # Causal band on the self-attention, chunks on the S = 17 > 8 keys.
    assert calls["windowed"] >= 1 and calls["chunked"] >= 1
    expected = _value_and_grads(
        explicit, [target, source], {**kwargs, "decoder_attention_mask": _band(T)}
    )
    _assert_same(got, expected)


def test_decoder_window_cached_decoding_equals_full_pass(calls):
    target = _data(T, 4)
    block = TransformerDecoderBlock(FFN, HEADS, window=RADIUS)
    whole = keras.ops.convert_to_numpy(block(target))
    assert calls["windowed"] == 1
    cache = np.zeros((B, 2, T, HEADS, DIM // HEADS), "float32")
    for step in range(T):
        out, cache = block(
            target[:, step : step + 1],
            self_attention_cache=cache,
            self_attention_cache_update_index=step,
        )
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(out)[:, 0], whole[:, step], atol=3e-5
        )


@pytest.mark.parametrize("cls", [TransformerEncoderBlock, TransformerDecoderBlock])
def test_config_reaches_the_attention_and_round_trips(cls):
    block = cls(FFN, HEADS, chunk_threshold=100, chunk_size=16, window=5)
    config = block.get_config()
    assert (config["chunk_threshold"], config["chunk_size"], config["window"]) == (
        100,
        16,
        5,
    )
    rebuilt = cls.from_config(config)
    rebuilt(_data(T, 5))
    attention = rebuilt._self_attention_layer
    assert (attention.chunk_threshold, attention.chunk_size, attention.window) == (
        100,
        16,
        5,
    )
    assert cls.from_config({**config, "chunk_threshold": None}).chunk_threshold is None
    legacy = cls.from_config(
        {
            k: v
            for k, v in config.items()
            if k not in ("chunk_threshold", "chunk_size", "window")
        }
    )
    assert (legacy.chunk_threshold, legacy.chunk_size, legacy.window) == (
        "auto",
        "auto",
        None,
    )


def test_save_and_load_keeps_the_window(tmp_path, calls):
    inputs = keras.Input((T, DIM))
    block = TransformerEncoderBlock(FFN, HEADS, window=RADIUS, name="encoder")
    model = keras.Model(inputs, block(inputs))
    x = _data(T, 6)
    expected = keras.ops.convert_to_numpy(model(x))
    path = str(tmp_path / "encoder.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.get_layer("encoder").window == RADIUS
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(loaded(x)), expected, atol=1e-6
    )
    assert calls["windowed"] >= 2


@pytest.mark.parametrize("cls", [TransformerEncoderBlock, TransformerDecoderBlock])
@pytest.mark.parametrize(
    "bad, error",
    [
        ({"chunk_threshold": -1}, ValueError),
        ({"chunk_size": 0}, ValueError),
        ({"window": 0}, ValueError),
        ({"window": 1.5}, TypeError),  # a bad type, as in Keras
    ],
)
def test_bad_arguments_name_the_argument(cls, bad, error):
    name = next(iter(bad))
    with pytest.raises(error, match=name):
        cls(FFN, HEADS, **bad)
