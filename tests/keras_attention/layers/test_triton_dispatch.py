"""The chunked path hands off to JAX's Triton flash kernel on a GPU.

The GPU is stubbed (`dispatch.platform`) and the kernel runs in Pallas's
interpreter, so these run on a CPU under JAX; the kernel's speed and memory
on a real GPU are in `experiments/benchmarks/logs/` (H100).
"""

import keras
import numpy as np
import pytest

from keras_attention.layers import MultiHeadAttention, dispatch

pytestmark = pytest.mark.skipif(
    keras.config.backend() != "jax" or dispatch._triton_mha() is None,
    reason="JAX's Pallas Triton kernel (JAX only)",
)


@pytest.fixture
def gpu(monkeypatch):
    """A stubbed GPU; records the calls of the Triton kernel."""
    calls = []
    kernel = dispatch.triton_flash_attention

    def spy(*args, **kwargs):
        calls.append(args[0].shape)
        return kernel(*args, **kwargs)

    monkeypatch.setattr(dispatch, "platform", lambda tensor=None: "gpu")
    monkeypatch.setattr(dispatch, "TRITON_INTERPRET", True)
    monkeypatch.setattr(dispatch, "triton_flash_attention", spy)
    return calls


def _layers(**kwargs):
    ours = MultiHeadAttention(2, 16, chunk_threshold=128, **kwargs)
    reference = MultiHeadAttention(2, 16, chunk_threshold=None, **kwargs)
    x = np.random.default_rng(0).normal(size=(1, 256, 24)).astype("float32")
    ours(x[:, :8], x[:, :8])
    reference(x[:, :8], x[:, :8])
    reference.set_weights(ours.get_weights())
    return ours, reference, x


def _value_and_grads(layer, x, **kwargs):
    import jax

    trainable = [v.value for v in layer.trainable_variables]
    fixed = [v.value for v in layer.non_trainable_variables]

    def loss(params, x):
        out, _ = layer.stateless_call(params, fixed, x, x, **kwargs)
        return (out**2).sum(), out

    (_, out), grads = jax.value_and_grad(loss, (0, 1), has_aux=True)(trainable, x)
    return np.asarray(out), [np.asarray(g) for g in jax.tree_util.tree_leaves(grads)]


@pytest.mark.parametrize("causal", [False, True])
def test_kernel_matches_the_explicit_path_with_gradients(gpu, causal):
    ours, reference, x = _layers()
    out, grads = _value_and_grads(ours, x, use_causal_mask=causal)
    assert gpu, "the Triton kernel was not called"
    expected, expected_grads = _value_and_grads(reference, x, use_causal_mask=causal)
    np.testing.assert_allclose(out, expected, atol=2e-5)
    for got, want in zip(grads, expected_grads, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "case",
    ["length not in blocks of 128", "padding mask", "explicit chunk_size", "dropout"],
)
def test_other_calls_keep_the_chunked_loop(gpu, case):
    kwargs, call = {}, {}
    x_len = 256
    if case == "length not in blocks of 128":
        x_len = 200
    if case == "explicit chunk_size":
        kwargs["chunk_size"] = 64
    if case == "dropout":
        kwargs["dropout"] = 0.5
        call["training"] = True
    ours, reference, x = _layers(**kwargs)
    x = x[:, :x_len]
    if case == "padding mask":
        mask = np.ones((1, x_len), bool)
        mask[:, -10:] = False
        call["value_mask"] = mask
    out = ours(x, x, **call)
    assert not gpu
    if case != "dropout":
        np.testing.assert_allclose(out, reference(x, x, **call), atol=2e-5)


def test_rule():
    assert dispatch.triton_flash_applies("jax", "gpu", "none", 4224, 4224) is True
    assert dispatch.triton_flash_applies("jax", "gpu", "causal", 4224, 4096) is False
    assert dispatch.triton_flash_applies("jax", "gpu", "padding", 4224, 4224) is False
    assert dispatch.triton_flash_applies("jax", "gpu", "none", 4200, 4224) is False
