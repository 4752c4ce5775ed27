"""The harness of the fast-path attention tests: a layer against its twin.

A layer on a fast path (chunked or windowed attention) is compared with an
explicit twin holding the same weights: the output, and the gradients of
`sum(output * probe)` with respect to every input and every trainable
weight, on TensorFlow, JAX and PyTorch (`../gradients.py`). A spy counts
the calls of the fast path, so a test also knows which path ran. Used by
`test_chunked_dispatch.py`, `test_dispatch.py`,
`test_windowed_multi_head_attention.py` and `test_transformer_chunking.py`.
"""

import importlib.util
import os

import numpy as np

_spec = importlib.util.spec_from_file_location(
    "gradients", os.path.join(os.path.dirname(__file__), "..", "gradients.py")
)
gradients = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gradients)

B, DIM, HEADS = 2, 8, 2


def spy(monkeypatch, function, *modules):
    """Counts the calls of `function` made through `modules` (`count["n"]`)."""
    count = {"n": 0}

    def counted(*args, **kwargs):
        count["n"] += 1
        return function(*args, **kwargs)

    for module in modules:
        monkeypatch.setattr(module, function.__name__, counted)
    return count


def data(length, seed=0, scale=1.0):
    """A `(B, length, DIM)` float32 batch."""
    rng = np.random.default_rng(seed)
    return (scale * rng.normal(size=(B, length, DIM))).astype("float32")


def padding(length, hidden_at_end=9):
    """Example 0 hides its last keys, example 1 its first 4."""
    mask = np.ones((B, length), bool)
    mask[0, length - hidden_at_end :] = False
    mask[1, :4] = False
    return mask


def query_padding(length):
    """Example 1 hides its last 5 queries."""
    mask = np.ones((B, length), bool)
    mask[1, length - 5 :] = False
    return mask


def masks(kind, q_len, v_len):
    """The mask arguments of one `MultiHeadAttention` call, by kind.

    Every form the layer takes: none, query/value padding, a separate
    `key_mask`, an `attention_mask` of rank 2, 3 and 4, the causal mask
    alone and with padding. (Rows with nothing to attend to are built by
    each test file: which rows empty out depends on its path.)
    """
    rng = np.random.default_rng(3)
    keys = padding(v_len)
    if kind == "none":
        return {}
    if kind == "padding":
        return {"query_mask": query_padding(q_len), "value_mask": keys}
    if kind == "key_mask":
        return {"key_mask": keys, "value_mask": np.roll(keys, 1, axis=1)}
    if kind == "mask_2d":
        return {"attention_mask": rng.random((q_len, v_len)) < 0.6}
    if kind == "mask_3d":
        return {"attention_mask": rng.random((B, q_len, v_len)) < 0.6}
    if kind == "mask_4d":
        return {
            "attention_mask": rng.random((B, HEADS, q_len, v_len)) < 0.6,
            "value_mask": keys,
        }
    if kind == "causal":
        return {"use_causal_mask": True}
    if kind == "causal_padding":
        return {"use_causal_mask": True, "value_mask": keys}
    raise ValueError(f"unknown mask kind: {kind!r}")


MASKS = [
    "none",
    "padding",
    "key_mask",
    "mask_2d",
    "mask_3d",
    "mask_4d",
    "causal",
    "causal_padding",
]


def value_and_grads(layer, inputs, kwargs, jit=False):
    """`layer(*inputs, **kwargs)` and the gradients of `sum(output * probe)`.

    Gradients with respect to each input, then each trainable weight, all as
    float32 NumPy arrays. The probe has the first input's shape (the layers
    here keep it). Eager, or compiled with `jit` (`tf.function(jit_compile=
    True)`, `jax.jit`; PyTorch runs eagerly): compiling one program per case
    costs more than running it op by op, on either backend.
    """
    probe = np.random.default_rng(5).normal(size=inputs[0].shape).astype("float32")
    loss = gradients.weighted_sum(probe)
    return gradients.value_and_gradients(layer, inputs, loss, kwargs, jit)


def assert_same(got, expected, atol=2e-5, grad_atol=5e-5):
    """Finite and equal outputs and gradients, `(output, grads)` pairs."""
    (out, grads), (ref_out, ref_grads) = got, expected
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(out, ref_out, atol=atol, rtol=1e-4)
    assert len(grads) == len(ref_grads)
    for grad, ref in zip(grads, ref_grads, strict=True):
        assert np.all(np.isfinite(grad))
        np.testing.assert_allclose(grad, ref, atol=grad_atol, rtol=1e-4)
