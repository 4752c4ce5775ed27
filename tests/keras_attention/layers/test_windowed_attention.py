"""windowed_attention equals full attention under a band mask, with gradients."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_attention import scores
from keras_attention.layers.chunked import dropout_keep_mask
from keras_attention.layers.masking import masked_softmax
from keras_attention.layers.windowed import windowed_attention

B, H, D = 2, 2, 4


def _inputs(length, seed=0, dtype="float32"):
    rng = np.random.default_rng(seed)
    q, k = (rng.normal(size=(B, length, H, D)).astype(dtype) for _ in "qk")
    v = rng.normal(size=(B, length, H, D + 1)).astype(dtype)
    return q, k, v


def _padding(length):
    mask = np.ones((B, length), bool)
    mask[0, length - 5 :] = False
    mask[1, :4] = False
    return mask


def _band(length, radius, causal):
    distance = np.arange(length)[:, None] - np.arange(length)[None, :]
    low = 0 if causal else -radius
    return (distance <= radius) & (distance >= low)


def _reference(
    q,
    k,
    v,
    radius,
    causal=False,
    key_mask=None,
    query_mask=None,
    attention_mask=None,
    score_fn=None,
    dropout_rate=0.0,
    seed=None,
):
    """Full (B, H, T, T) scores, band mask, float32 masked softmax."""
    q, k, v = (ops.transpose(ops.convert_to_tensor(x), (0, 2, 1, 3)) for x in (q, k, v))
    length = q.shape[2]
    if score_fn is None:
        raw = ops.matmul(q * ops.cast(1 / np.sqrt(D), q.dtype), ops.swapaxes(k, -1, -2))
    else:
        raw = score_fn(ops.reshape(q, (-1, length, D)), ops.reshape(k, (-1, length, D)))
        raw = ops.reshape(raw, (B, H, length, length))
    mask = np.broadcast_to(_band(length, radius, causal), (B, H, length, length))
    if key_mask is not None:
        mask = mask & key_mask[:, None, None, :]
    if query_mask is not None:
        mask = mask & query_mask[:, None, :, None]
    if attention_mask is not None:
        pairs = attention_mask
        while pairs.ndim < 4:
            pairs = pairs[None] if pairs.ndim == 2 else pairs[:, None]
        mask = mask & pairs
    weights = ops.cast(masked_softmax(raw, mask), v.dtype)
    if dropout_rate:
        keep = dropout_keep_mask(seed, (B, H, length, length), dropout_rate)
        weights = ops.where(keep, weights / (1.0 - dropout_rate), 0.0)
    return ops.transpose(ops.matmul(weights, v), (0, 2, 1, 3))


def _value_and_grads(fn, q, k, v, jit=False):
    q, k, v = (ops.convert_to_tensor(x) for x in (q, k, v))
    directions = np.random.default_rng(9).normal(size=(*q.shape[:3], D + 1))
    directions = directions.astype("float32")
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        def run(q, k, v):
            with tf.GradientTape() as tape:
                tape.watch([q, k, v])
                out = fn(q, k, v)
                loss = tf.reduce_sum(tf.cast(out, "float32") * directions)
            return out, tape.gradient(loss, [q, k, v])

        run = tf.function(run, jit_compile=True) if jit else run
    elif keras.backend.backend() == "torch":
        import torch

        def run(q, k, v):  # eager autograd
            q, k, v = (x.detach().requires_grad_(True) for x in (q, k, v))
            out = fn(q, k, v)
            loss = (out.float() * torch.tensor(directions)).sum()
            return out.detach(), torch.autograd.grad(loss, [q, k, v])

    else:
        import jax

        def loss(q, k, v):
            out = fn(q, k, v)
            return ops.sum(ops.cast(out, "float32") * directions), out

        def run(q, k, v):
            (_, out), grads = jax.value_and_grad(loss, (0, 1, 2), has_aux=True)(q, k, v)
            return out, grads

        run = jax.jit(run)  # one compilation, faster than op by op
    out, grads = run(q, k, v)
    to_np = ops.convert_to_numpy
    return to_np(out).astype("float32"), [to_np(g).astype("float32") for g in grads]


def _assert_close(got, expected, atol=1e-5):
    for a, b in zip([got[0], *got[1]], [expected[0], *expected[1]], strict=True):
        assert np.all(np.isfinite(a))
        np.testing.assert_allclose(a, b, atol=atol, rtol=atol)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(
    "length, radius, masks",
    [
        (24, 4, "padding"),  # blocks divide T
        (23, 4, "none"),  # they do not
        (10, 3, "padding"),
        (7, 0, "padding"),  # each position sees itself only
        (5, 9, "none"),  # radius beyond T: full attention
    ],
)
def test_matches_full_attention_with_a_band_mask(length, radius, causal, masks):
    q, k, v = _inputs(length)
    kwargs = {"causal": causal}
    if masks == "padding":
        kwargs["key_mask"] = _padding(length)
    got = _value_and_grads(
        lambda q, k, v: windowed_attention(q, k, v, radius, **kwargs), q, k, v
    )
    expected = _value_and_grads(
        lambda q, k, v: _reference(q, k, v, radius, **kwargs), q, k, v
    )
    _assert_close(got, expected)


def _pair_mask(shape, seed=4):
    return np.random.default_rng(seed).random(shape) < 0.7


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(
    "shape",
    [
        (13, 13),  # (T, T)
        (B, 13, 13),
        (B, H, 13, 13),
        (1, H, 13, 13),  # broadcast over the batch
        (B, 1, 1, 13),  # one row for every query
        (B, H, 13, 1),  # one column for every key
    ],
)
def test_attention_mask_every_shape(shape, causal):
    length, radius = 13, 3
    q, k, v = _inputs(length)
    kwargs = {"causal": causal, "attention_mask": _pair_mask(shape)}
    got = _value_and_grads(
        lambda q, k, v: windowed_attention(q, k, v, radius, **kwargs), q, k, v
    )
    expected = _value_and_grads(
        lambda q, k, v: _reference(q, k, v, radius, **kwargs), q, k, v
    )
    _assert_close(got, expected)


def test_attention_mask_bad_shape():
    x = np.zeros((1, 6, D), "float32")
    with pytest.raises(ValueError, match="attention_mask"):
        windowed_attention(x, x, x, 2, attention_mask=np.ones((6, 5), bool))


def test_empty_rows_query_mask_score_and_dropout_under_jit():
    length, radius = 19, 3
    q, k, v = _inputs(length)
    key_mask = np.ones((B, length), bool)
    key_mask[0, :8] = False  # causal: the first 8 rows of example 0 see nothing
    query_mask = np.ones((B, length), bool)
    query_mask[1, 10] = False
    score = scores.get("general")
    score.build((None, length, D), (None, length, D))
    kwargs = {
        "causal": True,
        "key_mask": key_mask,
        "query_mask": query_mask,
        "score_fn": score,
        "dropout_rate": 0.25,
        "seed": 3,
    }
    got = _value_and_grads(
        lambda q, k, v: windowed_attention(q, k, v, radius, **kwargs), q, k, v, jit=True
    )
    expected = _value_and_grads(
        lambda q, k, v: _reference(q, k, v, radius, **kwargs), q, k, v
    )
    _assert_close(got, expected)
    out, (dq, _, _) = got
    np.testing.assert_array_equal(out[0, :8], 0.0)
    np.testing.assert_array_equal(out[1, 10], 0.0)
    np.testing.assert_array_equal(dq[0, :8], 0.0)


def test_rank_3_and_float16():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(3, 17, D)).astype("float32")
    full = windowed_attention(x, x, x, 5)
    half = windowed_attention(*(x.astype("float16"),) * 3, 5)
    mask = _band(17, 5, False)
    raw = np.einsum("bqd,bkd->bqk", x, x) / 2.0
    raw = np.where(mask, raw, -np.inf)
    weights = np.exp(raw - raw.max(-1, keepdims=True))
    expected = np.einsum("bqk,bkd->bqd", weights / weights.sum(-1, keepdims=True), x)
    np.testing.assert_allclose(ops.convert_to_numpy(full), expected, atol=1e-5)
    half = ops.convert_to_numpy(half).astype("float32")
    assert np.all(np.isfinite(half))
    np.testing.assert_allclose(half, expected, atol=2e-2)


@pytest.mark.parametrize(
    "kwargs, match",
    [({"radius": -1}, "radius"), ({"radius": 2, "dropout_rate": 0.5}, "seed")],
)
def test_bad_arguments_raise(kwargs, match):
    x = np.zeros((1, 6, D), "float32")
    with pytest.raises(ValueError, match=match):
        windowed_attention(x, x, x, **kwargs)


def test_self_attention_only():
    x, y = np.zeros((1, 6, D), "float32"), np.zeros((1, 7, D), "float32")
    with pytest.raises(ValueError, match="same, known T"):
        windowed_attention(x, y, y, 2)
