"""chunked_attention equals the explicit path: values and gradients, any mask."""

import functools

import keras
import numpy as np
import pytest
from keras import ops

from keras_attention import scores
from keras_attention.layers.chunked import chunked_attention, dropout_keep_mask
from keras_attention.layers.masking import masked_softmax

B, H, D = 2, 2, 4
T = 20
# (query_chunk_size, key_chunk_size): one that divides T, one that does not
# (and, below, one chunk larger than T: the single-block path).
CHUNKS = [(5, 4), (8, 6)]
MASKS = [
    "none",
    "padding",
    "full",
    "per_head",
    "causal",
    "causal_padding",
    "empty_rows",
]


def _inputs(seed=0, q_len=T, k_len=T, dtype="float32"):
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(B, q_len, H, D)).astype(dtype)
    k = rng.normal(size=(B, k_len, H, D)).astype(dtype)
    v = rng.normal(size=(B, k_len, H, D + 1)).astype(dtype)
    return q, k, v


def _masks(kind, q_len=T, k_len=T, seed=1):
    """Keyword arguments of chunked_attention for one mask kind."""
    rng = np.random.default_rng(seed)
    padding = np.ones((B, k_len), bool)
    padding[0, k_len - 7 :] = False
    padding[1, :3] = False
    if kind == "none":
        return {}
    if kind == "padding":
        return {"key_mask": padding}
    if kind == "full":
        return {"attention_mask": rng.random((B, q_len, k_len)) < 0.6}
    if kind == "per_head":
        return {"attention_mask": rng.random((B, H, q_len, k_len)) < 0.6}
    if kind == "causal":
        return {"use_causal_mask": True}
    if kind == "causal_padding":
        return {"use_causal_mask": True, "key_mask": padding}
    # Rows with nothing to attend to: a masked query, an all-False mask row,
    # and causal + padding hiding every key of the first rows of example 1.
    full = rng.random((B, q_len, k_len)) < 0.6
    full[0, 3] = False
    query_mask = np.ones((B, q_len), bool)
    query_mask[1, 5] = False
    return {
        "attention_mask": full,
        "query_mask": query_mask,
        "key_mask": padding,
        "use_causal_mask": True,
    }


def _reference(q, k, v, score_fn=None, scale=None, dropout_rate=0.0, seed=None, **m):
    """Explicit path: (B, H, Tq, Tv) scores, full mask, float32 softmax."""
    q, k, v = (ops.transpose(ops.convert_to_tensor(x), (0, 2, 1, 3)) for x in (q, k, v))
    q_len, k_len = q.shape[2], k.shape[2]
    if score_fn is None:
        scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale
        raw = ops.matmul(q * ops.cast(scale, q.dtype), ops.swapaxes(k, -1, -2))
    else:
        fold = (-1, q_len, q.shape[-1])
        raw = score_fn(ops.reshape(q, fold), ops.reshape(k, (-1, k_len, k.shape[-1])))
        raw = ops.reshape(raw, (-1, H, q_len, k_len))
    mask = np.ones((B, H, q_len, k_len), bool)
    if m.get("key_mask") is not None:
        mask &= m["key_mask"][:, None, None, :]
    if m.get("query_mask") is not None:
        mask &= m["query_mask"][:, None, :, None]
    if m.get("attention_mask") is not None:
        pair = m["attention_mask"]
        mask &= pair[:, None] if pair.ndim == 3 else pair
    distance = (
        np.arange(q_len)[:, None]
        + m.get("causal_offset", 0)
        - np.arange(k_len)[None, :]
    )
    if m.get("use_causal_mask"):
        mask &= distance >= 0
    if m.get("sliding_window"):
        mask &= np.abs(distance) < m["sliding_window"]
    weights = ops.cast(masked_softmax(raw, mask), v.dtype)
    if dropout_rate:
        keep = dropout_keep_mask(seed, (B, H, q_len, k_len), dropout_rate)
        weights = ops.where(keep, weights / (1.0 - dropout_rate), 0.0)
    out = ops.matmul(weights, v)
    return ops.transpose(out, (0, 2, 1, 3))


def _value_and_grads(fn, q, k, v, jit=False):
    """fn(q, k, v), and the gradients of sum(fn * fixed directions)."""
    q, k, v = (ops.convert_to_tensor(x) for x in (q, k, v))
    out_shape = (B, q.shape[1], H, v.shape[-1])
    directions = np.random.default_rng(9).normal(size=out_shape).astype("float32")
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        def run(q, k, v):
            with tf.GradientTape() as tape:
                tape.watch([q, k, v])
                out = fn(q, k, v)
                loss = tf.reduce_sum(tf.cast(out, "float32") * directions)
            return out, tape.gradient(loss, [q, k, v])

        if jit:
            run = tf.function(run, jit_compile=True)
        # (JAX below is always jitted; `jit` adds nothing there.)
    elif backend == "jax":
        import jax

        def loss(q, k, v):
            out = fn(q, k, v)
            return ops.sum(ops.cast(out, "float32") * directions), out

        def run(q, k, v):
            (_, out), grads = jax.value_and_grad(loss, (0, 1, 2), has_aux=True)(q, k, v)
            return out, grads

        # Always compiled on JAX: one XLA program instead of a compilation
        # per loop (op-by-op mode), several times faster here.
        run = jax.jit(run)
    elif backend == "torch":
        import torch

        def run(q, k, v):  # eager autograd
            q, k, v = (x.detach().requires_grad_(True) for x in (q, k, v))
            out = fn(q, k, v)
            loss = (out.float() * torch.tensor(directions)).sum()
            return out.detach(), torch.autograd.grad(loss, [q, k, v])

    else:
        pytest.skip(f"no gradient helper for {backend}")
    out, grads = run(q, k, v)
    as_np = keras.ops.convert_to_numpy
    return as_np(out).astype("float32"), [as_np(g).astype("float32") for g in grads]


def _assert_close(chunked, reference, atol=1e-5):
    out, grads = chunked
    ref_out, ref_grads = reference
    assert np.all(np.isfinite(out)) and all(np.all(np.isfinite(g)) for g in grads)
    np.testing.assert_allclose(out, ref_out, atol=atol, rtol=atol)
    for grad, ref in zip(grads, ref_grads, strict=True):
        np.testing.assert_allclose(grad, ref, atol=atol, rtol=atol)


@functools.cache
def _reference_of(kind):
    """The explicit path's values and gradients for a mask kind (any chunks)."""
    masks = _masks(kind)
    return _value_and_grads(lambda q, k, v: _reference(q, k, v, **masks), *_inputs())


@pytest.mark.parametrize(
    "kind, chunks",
    [(kind, CHUNKS[i % 2]) for i, kind in enumerate(MASKS)]
    + [("none", CHUNKS[1]), ("causal", CHUNKS[1]), ("empty_rows", (32, 32))],
)
def test_dot_product_matches_full_path(kind, chunks):
    q, k, v = _inputs()
    masks = _masks(kind)
    sizes = {"query_chunk_size": chunks[0], "key_chunk_size": chunks[1]}
    chunked = _value_and_grads(
        lambda q, k, v: chunked_attention(q, k, v, **masks, **sizes), q, k, v
    )
    _assert_close(chunked, _reference_of(kind))
    if kind == "empty_rows":  # Exact zeros, values and gradients.
        out, (dq, _, _) = chunked
        np.testing.assert_array_equal(out[0, 3], 0.0)  # all-False mask row
        np.testing.assert_array_equal(out[1, 5], 0.0)  # masked query
        np.testing.assert_array_equal(dq[0, 3], 0.0)
        np.testing.assert_array_equal(dq[1, 5], 0.0)


@pytest.mark.parametrize("kind", MASKS)
def test_one_block_matches_full_path(kind):
    """Chunks as large as the sequences: the one-block path (plain autodiff)."""
    q, k, v = _inputs()
    masks = _masks(kind)
    chunked = _value_and_grads(
        lambda q, k, v: chunked_attention(
            q, k, v, query_chunk_size=T, key_chunk_size=512, **masks
        ),
        q,
        k,
        v,
    )
    _assert_close(chunked, _reference_of(kind))


@pytest.mark.parametrize("score", [None, "general"])
def test_one_block_dropout_and_score_under_jit(score):
    q, k, v = _inputs()
    score_fn = None
    if score is not None:
        score_fn = scores.get(score)
        score_fn.build((None, T, D), (None, T, D))
    common = {"score_fn": score_fn, "dropout_rate": 0.3, "seed": 7}
    common.update(_masks("empty_rows"))
    one_block = _value_and_grads(
        lambda q, k, v: chunked_attention(q, k, v, **common), q, k, v, jit=True
    )
    reference = _value_and_grads(lambda q, k, v: _reference(q, k, v, **common), q, k, v)
    _assert_close(one_block, reference)
    out, (dq, _, _) = one_block
    np.testing.assert_array_equal(out[1, 5], 0.0)  # masked query: zeros
    np.testing.assert_array_equal(dq[1, 5], 0.0)


def test_score_function_matches_full_path():
    """A parametrised score (general) through the rematerialised path.

    With every mask kind at once (padding, full, query, causal, empty rows).
    """
    kind = "empty_rows"
    q, k, v = _inputs()
    score = scores.get("general")
    score.build((None, T, D), (None, T, D))
    score.set_weights([np.random.default_rng(3).normal(size=(D, D)).astype("float32")])
    masks = _masks(kind)
    chunked = _value_and_grads(
        lambda q, k, v: chunked_attention(
            q, k, v, score_fn=score, query_chunk_size=10, key_chunk_size=8, **masks
        ),
        q,
        k,
        v,
    )
    reference = _value_and_grads(
        lambda q, k, v: _reference(q, k, v, score_fn=score, **masks), q, k, v
    )
    _assert_close(chunked, reference)


@pytest.mark.tensorflow_only
def test_score_weights_get_the_full_path_gradient():
    import tensorflow as tf

    q, k, v = (tf.constant(x) for x in _inputs())
    score = scores.get("additive")
    score.build((None, T, D), (None, T, D))
    masks = _masks("causal_padding")
    grads = []
    for fn in (
        lambda: chunked_attention(
            q, k, v, score_fn=score, query_chunk_size=8, key_chunk_size=6, **masks
        ),
        lambda: _reference(q, k, v, score_fn=score, **masks),
    ):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(fn() ** 2)
        grads.append(
            [g.numpy() for g in tape.gradient(loss, score.trainable_variables)]
        )
    for chunked, reference in zip(*grads, strict=True):
        np.testing.assert_allclose(chunked, reference, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("causal", [False, True])
def test_sliding_window_matches_full_path(causal):
    """Keras's `sliding_window`, with a causal offset (cached decoding)."""
    q, _, _ = _inputs(q_len=7)
    _, k, v = _inputs(k_len=T)
    masks = {"sliding_window": 5, "use_causal_mask": causal, "causal_offset": 10}
    chunked = _value_and_grads(
        lambda q, k, v: chunked_attention(
            q, k, v, query_chunk_size=4, key_chunk_size=6, **masks
        ),
        q,
        k,
        v,
    )
    reference = _value_and_grads(lambda q, k, v: _reference(q, k, v, **masks), q, k, v)
    _assert_close(chunked, reference)


def test_rank_3_inputs_scale_and_causal_offset():
    """(B, T, D) inputs, a dot score (scale 1), causal aligned at the end."""
    rng = np.random.default_rng(4)
    q = rng.normal(size=(B * H, 6, D)).astype("float32")
    k = rng.normal(size=(B * H, 15, D)).astype("float32")
    v = rng.normal(size=(B * H, 15, 3)).astype("float32")
    out = chunked_attention(
        q,
        k,
        v,
        use_causal_mask=True,
        causal_offset=9,
        scale=1.0,
        query_chunk_size=4,
        key_chunk_size=4,
    )
    raw = np.einsum("bqd,bkd->bqk", q, k)
    raw = np.where(np.arange(6)[:, None] + 9 >= np.arange(15), raw, -np.inf)
    weights = np.exp(raw - raw.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    expected = np.einsum("bqk,bkd->bqd", weights, v)
    np.testing.assert_allclose(ops.convert_to_numpy(out), expected, atol=1e-5)


def test_cross_attention_lengths_and_broadcast_mask():
    q, _, _ = _inputs(q_len=9)
    _, k, v = _inputs(k_len=13)
    mask = np.random.default_rng(5).random((9, 13)) < 0.7
    chunked = _value_and_grads(
        lambda q, k, v: chunked_attention(
            q, k, v, attention_mask=mask, query_chunk_size=4, key_chunk_size=5
        ),
        q,
        k,
        v,
    )
    reference = _value_and_grads(
        lambda q, k, v: _reference(q, k, v, attention_mask=mask[None]), q, k, v
    )
    _assert_close(chunked, reference)


def test_dropout_matches_the_full_path_with_the_same_mask():
    """(A score function with dropout: `test_under_jit`.)"""
    q, k, v = _inputs()
    masks = _masks("causal_padding")
    common = {"dropout_rate": 0.3, "seed": 11, **masks}
    chunked = _value_and_grads(
        lambda q, k, v: chunked_attention(
            q, k, v, query_chunk_size=8, key_chunk_size=6, **common
        ),
        q,
        k,
        v,
    )
    reference = _value_and_grads(lambda q, k, v: _reference(q, k, v, **common), q, k, v)
    _assert_close(chunked, reference)
    # The dropout did something: not the undropped result.
    undropped = _reference(q, k, v, **masks)
    assert not np.allclose(chunked[0], ops.convert_to_numpy(undropped), atol=1e-3)


def test_dropout_keep_mask_is_uniform_and_chunking_independent():
    full = ops.convert_to_numpy(dropout_keep_mask(3, (2, 2, 64, 64), 0.25))
    assert abs(full.mean() - 0.75) < 0.02
    # Independent draws: neighbours agree as often as chance says (0.625).
    assert abs((full[..., 1:] == full[..., :-1]).mean() - 0.625) < 0.03
    block = dropout_keep_mask(3, (2, 2, 16, 8), 0.25, query_start=32, key_start=24)
    np.testing.assert_array_equal(ops.convert_to_numpy(block), full[:, :, 32:48, 24:32])
    other = ops.convert_to_numpy(dropout_keep_mask(4, (2, 2, 64, 64), 0.25))
    assert (other != full).mean() > 0.2


@pytest.mark.parametrize(
    "score, window", [(None, None), ("general", None), ("general", 6)]
)
def test_under_jit(score, window):
    """Compiled; a `score_fn` takes the traced loops (`ops.map`), whose
    `ops.cond` skips the blocks that the causal mask or the window hides."""
    q, k, v = _inputs()
    score_fn = None
    if score is not None:
        score_fn = scores.get(score)
        score_fn.build((None, T, D), (None, T, D))
    masks = _masks("empty_rows")
    if window is not None:
        masks["sliding_window"] = window
    common = {"score_fn": score_fn, "dropout_rate": 0.2, "seed": 5, **masks}
    chunked = _value_and_grads(
        lambda q, k, v: chunked_attention(
            q, k, v, query_chunk_size=10, key_chunk_size=8, **common
        ),
        q,
        k,
        v,
        jit=True,
    )
    reference = _value_and_grads(lambda q, k, v: _reference(q, k, v, **common), q, k, v)
    _assert_close(chunked, reference)


def test_float16_is_finite_and_close_to_float32():
    q, k, v = _inputs()
    masks = _masks("empty_rows")
    half = _value_and_grads(
        lambda q, k, v: chunked_attention(
            q, k, v, query_chunk_size=8, key_chunk_size=6, **masks
        ),
        *(x.astype("float16") for x in (q, k, v)),
    )
    _assert_close(half, _reference_of("empty_rows"), atol=2e-2)


@pytest.mark.parametrize(
    "kwargs, match, error",
    [
        ({"query_chunk_size": 0}, "query_chunk_size", ValueError),
        ({"key_chunk_size": 2.5}, "key_chunk_size", TypeError),
        ({"dropout_rate": 0.1}, "seed", ValueError),
        ({"dropout_rate": 1.0, "seed": 1}, "dropout_rate", ValueError),
        ({"scale": 1.0, "score_fn": scores.Dot()}, "scale", ValueError),
        ({"sliding_window": 0}, "sliding_window", ValueError),
        (
            {"attention_mask": np.ones((B, T, T + 1), bool)},
            "attention_mask",
            ValueError,
        ),
    ],
)
def test_bad_arguments_raise(kwargs, match, error):
    q, k, v = _inputs()
    with pytest.raises(error, match=match):
        chunked_attention(q, k, v, **kwargs)
