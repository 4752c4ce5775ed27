"""The chunked path hands off to JAX's Triton flash kernel on a GPU.

The GPU is stubbed (`dispatch.platform`) and the kernel runs in Pallas's
interpreter, so these run on a CPU under JAX; the kernel's speed and memory
on a real GPU are in `experiments/benchmarks/logs/` (H100). Each layer on
the kernel is compared with its twin on the explicit path (same weights,
`chunk_threshold=None`): the output and the gradients with respect to the
input and every trainable weight. A spy on `dispatch.triton_flash_attention`
tells which path ran.
"""

import keras
import numpy as np
import pytest

from keras_attention.layers import (
    Attention,
    ImageSelfAttention,
    MultiHeadAttention,
    dispatch,
)

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


def _data(batch=1, length=256, width=24):
    return (
        np.random.default_rng(0).normal(size=(batch, length, width)).astype("float32")
    )


def _twins(cls, x, build, **config):
    """The layer that chunks above 128 keys and its explicit twin, same weights."""
    ours = cls(chunk_threshold=128, **config)
    reference = cls(chunk_threshold=None, **config)
    for layer in (ours, reference):
        layer(*build(x))
    reference.set_weights(ours.get_weights())
    return ours, reference


def _mha(x, **config):
    return _twins(
        MultiHeadAttention, x[:, :8], _self, num_heads=2, key_dim=16, **config
    )


def _self(x):
    return x, x


def _value_and_grads(layer, x, arrange=_self, **kwargs):
    """`layer(*arrange(x), **kwargs)` and the gradients of `sum(output**2)`
    with respect to every trainable weight and `x`."""
    import jax

    trainable = [v.value for v in layer.trainable_variables]
    fixed = [v.value for v in layer.non_trainable_variables]

    def loss(params, x):
        out, _ = layer.stateless_call(params, fixed, *arrange(x), **kwargs)
        return (out**2).sum(), out

    (_, out), grads = jax.value_and_grad(loss, (0, 1), has_aux=True)(trainable, x)
    return np.asarray(out), [np.asarray(g) for g in jax.tree_util.tree_leaves(grads)]


def _assert_same(got, expected):
    (out, grads), (want, want_grads) = got, expected
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(out, want, atol=2e-5, rtol=1e-4)
    assert len(grads) == len(want_grads)
    # float32 rounding grows with the gradients' scale (an image weight's
    # gradient sums hundreds of positions' terms; the key bias's, zero in
    # exact arithmetic, is what remains of them).
    atol = max(1e-4, 1e-5 * max(np.abs(g).max() for g in want_grads))
    for grad, want_grad in zip(grads, want_grads, strict=True):
        assert np.all(np.isfinite(grad))
        np.testing.assert_allclose(grad, want_grad, rtol=1e-4, atol=atol)


def _padding(batch, length):
    """Example 0 hides its last 40 positions and a hole in the middle (not a
    prefix: an `Embedding(mask_zero=True)` mask can look so); example 1, when
    there is one, hides every position (all its rows have nothing to attend)."""
    mask = np.ones((batch, length), bool)
    mask[0, length - 40 :] = False
    mask[0, 50:60] = False
    mask[1:] = False
    return mask


@pytest.mark.parametrize("causal", [False, True])
def test_kernel_matches_the_explicit_path_with_gradients(gpu, causal):
    x = _data()
    ours, reference = _mha(x)
    got = _value_and_grads(ours, x, use_causal_mask=causal)
    assert gpu, "the Triton kernel was not called"
    _assert_same(got, _value_and_grads(reference, x, use_causal_mask=causal))


@pytest.mark.parametrize(
    "case", ["shared", "shared, causal", "shared, key_mask too", "queries only"]
)
def test_padding_the_kernel_takes_matches_the_explicit_path(gpu, case):
    """A query mask that is also the keys' mask (one object) becomes segment
    ids; padded query rows give the projection's bias alone, as on the
    explicit path, with their gradients; never NaN."""
    x = _data(batch=2)
    mask = _padding(2, 256)
    kwargs = {"query_mask": mask}
    if case.startswith("shared"):
        kwargs["value_mask"] = mask
    if case == "shared, key_mask too":
        kwargs["key_mask"] = mask
    if case == "shared, causal":
        kwargs["use_causal_mask"] = True
    ours, reference = _mha(x)
    got = _value_and_grads(ours, x, **kwargs)
    assert len(gpu) == 1
    expected = _value_and_grads(reference, x, **kwargs)
    _assert_same(got, expected)
    bias = ours.get_weights()[-1]
    np.testing.assert_allclose(got[0][1], np.broadcast_to(bias, got[0][1].shape))


def test_bfloat16_with_a_shared_padding_mask_takes_the_kernel(gpu):
    """bfloat16 with padding has no memory-efficient cuDNN form (dispatch):
    above the threshold it chunks, on the kernel with segment ids."""
    x = _data(batch=2)
    mask = keras.ops.convert_to_tensor(_padding(2, 256))
    ours, reference = _mha(x, dtype="mixed_bfloat16")
    out = ours(x, x, query_mask=mask, value_mask=mask)
    assert len(gpu) == 1
    want = reference(x, x, query_mask=mask, value_mask=mask)
    out, want = (
        keras.ops.convert_to_numpy(keras.ops.cast(y, "float32")) for y in (out, want)
    )
    # Two bfloat16 ulps relative (8-bit mantissa), as test_dispatch.py.
    np.testing.assert_allclose(out, want, rtol=2**-6, atol=3e-2)


def test_a_keras_mask_propagated_into_self_attention_takes_the_kernel(gpu):
    """`Embedding(mask_zero=True)` then `mha(x, x)`: Keras fills `query_mask`
    and `value_mask` with the same mask object."""
    ids = np.random.default_rng(1).integers(1, 50, size=(2, 256))
    ids[0, 200:] = 0
    ids[1, 10:20] = 0
    tokens = keras.Input((256,), dtype="int32")
    embedded = keras.layers.Embedding(50, 24, mask_zero=True)(tokens)
    layer = MultiHeadAttention(2, 16, chunk_threshold=128)
    model = keras.Model(tokens, layer(embedded, embedded))
    reference = MultiHeadAttention(2, 16, chunk_threshold=None)
    gpu.clear()
    out = keras.ops.convert_to_numpy(model(ids))
    assert len(gpu) == 1
    x = keras.ops.convert_to_numpy(model.layers[1](ids))
    mask = ids != 0
    reference(x, x)
    reference.set_weights(layer.get_weights())
    want = reference(x, x, query_mask=mask, value_mask=mask)
    np.testing.assert_allclose(out, want, atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize(
    "case",
    [
        "key padding only",
        "two equal mask objects",
        "attention_mask",
        "keys not in blocks of 128",
        "head width 8",
        "explicit chunk_size",
        "dropout",
    ],
)
def test_other_calls_keep_the_chunked_loop(gpu, case):
    """Segment ids are shared by queries and keys: a key mask that the
    queries do not share has no segment form; nor have the other cases."""
    x = _data(batch=2)
    config, call = {}, {}
    query = x
    mask = _padding(2, 256)
    if case == "key padding only":
        call["value_mask"] = mask
    if case == "two equal mask objects":
        call["query_mask"], call["value_mask"] = mask, mask.copy()
    if case == "attention_mask":
        call["attention_mask"] = mask[:, None, :] & mask[:, :, None]
    if case == "keys not in blocks of 128":
        x, query = x[:, :200], x[:, :128]
    if case == "head width 8":
        config["key_dim"] = 8
    if case == "explicit chunk_size":
        config["chunk_size"] = 64
    if case == "dropout":
        config["dropout"] = 0.5
        call["training"] = True
    config = {"num_heads": 2, "key_dim": 16, **config}
    ours, reference = _twins(MultiHeadAttention, x[:, :8], _self, **config)
    out = ours(query, x, **call)
    assert not gpu
    if case != "dropout":
        np.testing.assert_allclose(out, reference(query, x, **call), atol=2e-5)


@pytest.mark.parametrize("length", [200, 256])
def test_self_attention_of_any_length_pads_to_whole_blocks(gpu, length):
    """200 positions: padded to 256, the padding a segment of its own."""
    x = _data(batch=2, length=length)
    ours, reference = _mha(x)
    got = _value_and_grads(ours, x)
    assert gpu == [(2, length, 2, 16)]
    _assert_same(got, _value_and_grads(reference, x))


def _list(x):
    return ([x, x],)


@pytest.mark.parametrize(
    "case", ["none", "causal", "shared", "list call, shared", "list call, queries"]
)
@pytest.mark.parametrize("score", ["dot", "scaled_dot"])
def test_soft_attention_takes_the_kernel(gpu, case, score):
    x = _data(batch=2, width=16)
    mask = _padding(2, 256)
    arrange, kwargs = _self, {}
    if case == "causal":
        kwargs["use_causal_mask"] = True
    if case == "shared":
        kwargs["query_mask"] = kwargs["value_mask"] = mask
    if case.startswith("list call"):
        arrange = _list
        kwargs["mask"] = [mask, mask if case.endswith("shared") else None]
    ours, reference = _twins(Attention, x[:, :8], _self, score=score)
    got = _value_and_grads(ours, x, arrange, **kwargs)
    assert gpu == [(2, 256, 1, 16)]
    _assert_same(got, _value_and_grads(reference, x, arrange, **kwargs))


@pytest.mark.parametrize(
    "case", ["general score", "key padding only", "dropout", "value wider than 128"]
)
def test_soft_attention_keeps_the_loop(gpu, case):
    x = _data(batch=2, width=16)
    config, call = {"score": "dot"}, {}
    value = x
    if case == "general score":
        config["score"] = "general"
    if case == "key padding only":
        call["value_mask"] = _padding(2, 256)
    if case == "dropout":
        config["dropout"] = 0.5
        call["training"] = True
    if case == "value wider than 128":
        value = _data(batch=2, width=136)
    ours = Attention(chunk_threshold=128, **config)
    ours(x, value, key=x, **call)
    assert not gpu


def _image(x):
    return (x,)


@pytest.mark.parametrize("side", [12, 16])
@pytest.mark.parametrize("score", ["dot", "scaled_dot"])
def test_image_self_attention_takes_the_kernel(gpu, side, score):
    """12 x 12 = 144 positions, padded to 256; 16 x 16 = 256. Key width 4,
    value width 16: the keys get zero channels."""
    x = np.random.default_rng(2).normal(size=(1, side, side, 32)).astype("float32")
    ours, reference = _twins(
        ImageSelfAttention, x[:, :4, :4], _image, score=score, gamma_initializer="ones"
    )
    got = _value_and_grads(ours, x, _image)
    assert gpu == [(1, side * side, 1, 16)]
    _assert_same(got, _value_and_grads(reference, x, _image))


@pytest.mark.parametrize("case", ["general score", "value width 8", "chunk size"])
def test_image_self_attention_keeps_the_loop(gpu, case):
    channels = 16 if case == "value width 8" else 32
    config = {"score": "general" if case == "general score" else "dot"}
    if case == "chunk size":
        config["query_chunk_size"] = 64
    x = np.ones((1, 16, 16, channels), "float32")
    ImageSelfAttention(chunk_threshold=128, **config)(x)
    assert not gpu


def test_padding_rule():
    mask, other = np.ones((2, 8), bool), np.ones((2, 8), bool)
    assert dispatch.triton_padding() == "none"
    assert dispatch.triton_padding(mask, (None, None)) == "queries"
    assert dispatch.triton_padding(mask, (mask, mask)) == "shared"
    assert dispatch.triton_padding(mask, (mask, other)) is None
    assert dispatch.triton_padding(None, (mask,)) is None
    assert dispatch.triton_padding(mask, (other,)) is None


def test_rule():
    applies = dispatch.triton_flash_applies
    assert applies("jax", "gpu", 4224, 4224, 64) is True
    assert applies("jax", "gpu", 4200, 4200, 64, padding="shared") is True
    assert applies("jax", "gpu", 4200, 4224, 64, padding="queries") is True
    assert applies("jax", "gpu", 4224, 4200, 64) is False
    assert applies("jax", "gpu", 4224, 4096, 64, causal=True) is False
    assert applies("jax", "gpu", 4224, 4096, 64, padding="shared") is False
    assert applies("jax", "gpu", 4224, 4224, 64, padding=None) is False
    assert applies("jax", "gpu", 4224, 4224, 8) is False
    assert applies("jax", "gpu", 4224, 4224, 256) is False
    assert applies("jax", "cpu", 4224, 4224, 64) is False
    with pytest.raises(ValueError, match="padding='pairwise'"):
        applies("jax", "gpu", 4224, 4224, 64, padding="pairwise")
