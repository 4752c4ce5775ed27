"""MultiHeadAttention and Attention switch to chunked_attention above a length.

Each layer with a small `chunk_threshold` is compared with the same layer
(same weights) with `chunk_threshold=None`, the explicit path: outputs and
gradients with respect to the inputs and every trainable weight, under jit.
A spy on `chunked_attention` checks which path ran.
"""

import importlib.util
import os

import keras
import numpy as np
import pytest

from keras_attention.layers import attention as attention_module
from keras_attention.layers import multi_head_paths as mha_paths
from keras_attention.layers.attention import Attention
from keras_attention.layers.chunked import chunked_attention
from keras_attention.layers.multi_head_attention import MultiHeadAttention

_spec = importlib.util.spec_from_file_location(
    "attention_cases", os.path.join(os.path.dirname(__file__), "attention_cases.py")
)
cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cases)

# Above the threshold, several chunks and a partial last one (query chunks
# 7 + 5, key chunks 7 + 7 + 2): each chunk costs compile time under jit.
B, DIM, HEADS = cases.B, cases.DIM, cases.HEADS
TQ, TV = 12, 16
THRESHOLD, CHUNK = 8, 7


@pytest.fixture
def calls(monkeypatch):
    """Counts the calls of `chunked_attention` from both layer modules."""
    return cases.spy(monkeypatch, chunked_attention, mha_paths, attention_module)


def _data(q_len=TQ, v_len=TV, seed=0):
    rng = np.random.default_rng(seed)
    query = rng.normal(size=(B, q_len, DIM)).astype("float32")
    value = rng.normal(size=(B, v_len, DIM)).astype("float32")
    return query, value


def _value_and_grads(layer, query, value, kwargs, jit=False):
    return cases.value_and_grads(layer, (query, value), kwargs, jit)


def _assert_same(chunked, explicit, query, value, kwargs, jit=False):
    cases.assert_same(
        _value_and_grads(chunked, query, value, kwargs, jit),
        _value_and_grads(explicit, query, value, kwargs, jit),
    )


def _pair(cls, query, value, **config):
    """The layer on the chunked path and its explicit twin, same weights."""
    chunked = cls(chunk_threshold=THRESHOLD, chunk_size=CHUNK, **config)
    explicit = cls(chunk_threshold=None, **config)
    for layer in (chunked, explicit):
        layer(query, value)
    explicit.set_weights(chunked.get_weights())
    return chunked, explicit


def _mha_masks(kind, q_len=TQ, v_len=TV):
    if kind != "empty_rows":
        return cases.masks(kind, q_len, v_len)
    # Rows with nothing to attend to: an example with no key, an all-False
    # attention row, a masked query, and one head emptied for one row.
    empty = cases.padding(v_len)
    empty[1] = False
    mask = np.random.default_rng(3).random((B, HEADS, q_len, v_len)) < 0.6
    mask[0, :, 2] = False
    mask[0, 1, 6] = False
    return {
        "value_mask": empty,
        "attention_mask": mask,
        "query_mask": cases.query_padding(q_len),
    }


MHA_MASKS = [*cases.MASKS, "empty_rows"]
# Compiling every case costs minutes: these run under XLA (TF) or `jax.jit`,
# the others op by op (same functions, same comparisons).
JIT_CASES = {"causal_padding", "empty_rows", "mask_4d"}


# Every mask with the fused dot product; a parametrised score (chunks
# rematerialised, gradients through its weights) with the causal mask, and
# with every other mask at once ("empty_rows": value and query padding, a
# rank-4 mask, rows with nothing to attend to).
MHA_CASES = [("scaled_dot", kind) for kind in MHA_MASKS] + [
    ("general", kind) for kind in ("causal", "empty_rows")
]


@pytest.mark.parametrize(("score", "kind"), MHA_CASES)
def test_mha_chunked_equals_explicit(calls, score, kind):
    query, value = _data()
    chunked, explicit = _pair(
        MultiHeadAttention, query, value, num_heads=HEADS, key_dim=4, score=score
    )
    calls["n"] = 0
    jit = kind in JIT_CASES
    _assert_same(chunked, explicit, query, value, _mha_masks(kind), jit)
    assert calls["n"] >= 1


def test_mha_sliding_window_and_gate(calls):
    query, value = _data(q_len=TV)
    chunked, explicit = _pair(
        MultiHeadAttention,
        query,
        value,
        num_heads=HEADS,
        key_dim=4,
        sliding_window=5,
        use_gate=True,
    )
    calls["n"] = 0
    _assert_same(chunked, explicit, query, value, {"use_causal_mask": True})
    assert calls["n"] >= 1


def test_mha_threshold_is_the_key_length(calls):
    query, value = _data(v_len=THRESHOLD)
    layer = MultiHeadAttention(
        num_heads=HEADS, key_dim=4, chunk_threshold=THRESHOLD, chunk_size=CHUNK
    )
    layer(query, value)
    assert calls["n"] == 0  # Tv == threshold: explicit
    query, value = _data(v_len=THRESHOLD + 1)
    layer(query, value)
    assert calls["n"] == 1


def test_mha_none_disables(calls):
    query, value = _data()
    layer = MultiHeadAttention(num_heads=HEADS, key_dim=4, chunk_threshold=None)
    layer(query, value, use_causal_mask=True)
    assert calls["n"] == 0


def test_mha_explicit_where_the_weights_are_needed(calls):
    query, value = _data()
    config = {"num_heads": HEADS, "key_dim": 4, "chunk_threshold": THRESHOLD}
    MultiHeadAttention(score="location", **config)(query, value)
    layer = MultiHeadAttention(**config)
    _, weights = layer(query, value, return_attention_scores=True)
    assert tuple(weights.shape) == (B, HEADS, TQ, TV)
    cache = np.zeros((B, 2, TV, HEADS, 4), "float32")
    layer(query[:, :1], value[:, :1], cache=cache, cache_update_index=0)

    class Hooked(MultiHeadAttention):
        def _masked_softmax(self, attention_scores, attention_mask=None):
            return super()._masked_softmax(attention_scores, attention_mask)

    Hooked(**config)(query, value)
    assert calls["n"] == 0


def test_mha_location_score_falls_back_and_matches(calls):
    query, value = _data()
    chunked, explicit = _pair(
        MultiHeadAttention, query, value, num_heads=HEADS, key_dim=4, score="location"
    )
    out = keras.ops.convert_to_numpy(chunked(query, value))
    ref = keras.ops.convert_to_numpy(explicit(query, value))
    np.testing.assert_allclose(out, ref, atol=1e-6)
    assert calls["n"] == 0


def test_mha_dropout_only_in_training(calls):
    query, value = _data()
    chunked, explicit = _pair(
        MultiHeadAttention, query, value, num_heads=HEADS, key_dim=4, dropout=0.5
    )
    calls["n"] = 0
    inference = keras.ops.convert_to_numpy(chunked(query, value))
    ref = keras.ops.convert_to_numpy(explicit(query, value))
    np.testing.assert_allclose(inference, ref, atol=2e-5)
    trained = keras.ops.convert_to_numpy(chunked(query, value, training=True))
    assert np.all(np.isfinite(trained))
    assert not np.allclose(trained, inference, atol=1e-3)
    assert calls["n"] == 2


@pytest.mark.parametrize("cls", [MultiHeadAttention, Attention])
def test_config_round_trip(cls):
    config = {"num_heads": HEADS, "key_dim": 4} if cls is MultiHeadAttention else {}
    layer = cls(chunk_threshold=100, chunk_size=16, **config)
    saved = layer.get_config()
    assert saved["chunk_threshold"] == 100 and saved["chunk_size"] == 16
    rebuilt = cls.from_config(saved)
    assert (rebuilt.chunk_threshold, rebuilt.chunk_size) == (100, 16)
    assert cls.from_config({**saved, "chunk_threshold": None}).chunk_threshold is None
    old = {k: v for k, v in saved.items() if not k.startswith("chunk_")}
    legacy = cls.from_config(old)
    assert (legacy.chunk_threshold, legacy.chunk_size) == ("auto", "auto")
    auto = cls.from_config(cls(**config).get_config())
    assert (auto.chunk_threshold, auto.chunk_size) == ("auto", "auto")


@pytest.mark.parametrize("cls", [MultiHeadAttention, Attention])
@pytest.mark.parametrize(
    "bad, error",
    [
        ({"chunk_threshold": -1}, ValueError),
        ({"chunk_threshold": 2.5}, TypeError),  # a bad type, as in Keras
        ({"chunk_size": 0}, ValueError),
    ],
)
def test_bad_chunking_arguments(cls, bad, error):
    config = {"num_heads": HEADS, "key_dim": 4} if cls is MultiHeadAttention else {}
    name = next(iter(bad))
    with pytest.raises(error, match=name):
        cls(**config, **bad)


def _functional(layer, vocabulary=11):
    """Embedding (mask_zero) -> self-attention, so the layer gets Keras masks."""
    tokens = keras.Input((TV,), dtype="int32")
    embedded = keras.layers.Embedding(vocabulary, DIM, mask_zero=True, name="embed")(
        tokens
    )
    output = layer(embedded, embedded)
    return keras.Model(tokens, output)


@pytest.mark.parametrize("cls", [MultiHeadAttention, Attention])
def test_functional_model_implicit_masks_under_jit(calls, cls):
    config = {"num_heads": HEADS, "key_dim": 4} if cls is MultiHeadAttention else {}
    chunked = _functional(cls(chunk_threshold=THRESHOLD, chunk_size=CHUNK, **config))
    explicit = _functional(cls(chunk_threshold=None, **config))
    explicit.set_weights(chunked.get_weights())
    rng = np.random.default_rng(2)
    tokens = rng.integers(1, 11, size=(B, TV)).astype("int32")
    tokens[0, 11:] = 0  # padding across a chunk boundary: Keras masks
    target = rng.normal(size=(B, TV, DIM)).astype("float32")
    for model in (chunked, explicit):
        # XLA on TF and JAX; PyTorch's `torch.compile` would take minutes.
        model.compile(
            optimizer=keras.optimizers.SGD(0.5),
            loss="mse",
            jit_compile=keras.config.backend() != "torch",
        )
    out = chunked.predict(tokens, verbose=0)
    ref = explicit.predict(tokens, verbose=0)
    np.testing.assert_allclose(out, ref, atol=2e-5)
    assert calls["n"] >= 1
    # One training step: the same gradients give the same new weights.
    chunked.train_on_batch(tokens, target)
    explicit.train_on_batch(tokens, target)
    for new, ref_new in zip(chunked.get_weights(), explicit.get_weights(), strict=True):
        np.testing.assert_allclose(new, ref_new, atol=5e-5, rtol=1e-4)


def _attention_masks(kind, q_len=TQ, v_len=TV):
    rng = np.random.default_rng(4)
    padding = np.ones((B, v_len), bool)
    padding[0, v_len - 9 :] = False
    padding[1] = False  # an example with nothing to attend to
    queries = np.ones((B, q_len), bool)
    queries[0, :3] = False
    if kind == "none":
        return {}
    if kind == "padding":
        return {"query_mask": queries, "value_mask": padding}
    if kind == "mask_2d":
        return {"attention_mask": rng.random((q_len, v_len)) < 0.6}
    if kind == "mask_3d":
        mask = rng.random((B, q_len, v_len)) < 0.6
        mask[0, 5] = False
        return {"attention_mask": mask, "key_mask": padding}
    # Tq != Tv: the tensor call aligns the last query with the last value.
    return {"use_causal_mask": True, "value_mask": np.roll(padding, 3, axis=0)}


ATTENTION_CASES = [
    ("scaled_dot", kind) for kind in ("none", "padding", "mask_2d", "mask_3d", "causal")
] + [
    (score, kind) for score in ("general", "additive") for kind in ("mask_3d", "causal")
]


@pytest.mark.parametrize(("score", "kind"), ATTENTION_CASES)
def test_attention_chunked_equals_explicit(calls, score, kind):
    query, value = _data()
    chunked, explicit = _pair(Attention, query, value, score=score)
    calls["n"] = 0
    jit = kind == "causal"
    _assert_same(chunked, explicit, query, value, _attention_masks(kind), jit)
    assert calls["n"] >= 1


def test_attention_keras_arguments_and_list_call(calls):
    query, value = _data()
    chunked, explicit = _pair(Attention, query, value, use_scale=True)
    for layer in (chunked, explicit):
        # Keras's own weight, not left at its initial value.
        layer.score_layer.scale.assign(0.7)
    queries = np.ones((B, TQ), bool)
    queries[1, 4:9] = False
    padding = np.ones((B, TV), bool)
    padding[0, 10:] = False
    calls["n"] = 0
    for kwargs in ({}, {"use_causal_mask": True}):
        out = chunked([query, value], mask=[queries, padding], **kwargs)
        ref = explicit([query, value], mask=[queries, padding], **kwargs)
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(out), keras.ops.convert_to_numpy(ref), atol=2e-5
        )
    assert calls["n"] == 2
    # Keras's layer itself: the list call aligns the causal mask at the start.
    keras_layer = keras.layers.Attention(use_scale=True)
    keras_layer([query, value])
    keras_layer.set_weights(chunked.get_weights())
    theirs = keras_layer([query, value], mask=[queries, padding], use_causal_mask=True)
    ours = chunked([query, value], mask=[queries, padding], use_causal_mask=True)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(ours), keras.ops.convert_to_numpy(theirs), atol=2e-5
    )


def test_attention_explicit_where_needed(calls):
    query, value = _data()
    config = {"chunk_threshold": THRESHOLD}
    Attention(score="location", **config)(query, value)
    Attention(mode="hard", **config)(query, value)
    Attention(window=3, **config)(query, value)
    Attention(chunk_threshold=None)(query, value)
    Attention(**config)(query[:, :, :], value[:, :THRESHOLD])
    _, weights = Attention(**config)(query, value, return_attention_scores=True)
    assert tuple(weights.shape) == (B, TQ, TV)
    assert calls["n"] == 0
    Attention(**config)(query, value)
    assert calls["n"] == 1


def test_attention_dropout_only_in_training(calls):
    query, value = _data()
    layer = Attention(dropout=0.5, chunk_threshold=THRESHOLD, chunk_size=CHUNK, seed=1)
    reference = Attention(chunk_threshold=None)
    inference = keras.ops.convert_to_numpy(layer(query, value))
    ref = keras.ops.convert_to_numpy(reference(query, value))
    np.testing.assert_allclose(inference, ref, atol=2e-5)
    trained = keras.ops.convert_to_numpy(layer(query, value, training=True))
    assert np.all(np.isfinite(trained))
    assert not np.allclose(trained, inference, atol=1e-3)
    assert calls["n"] == 2
