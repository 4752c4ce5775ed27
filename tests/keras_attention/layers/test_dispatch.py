"""`chunk_threshold="auto"`: the fused, explicit or chunked path by device.

The backend and device queries of `keras_attention.layers.dispatch` are
stubbed, so every rule is exercised on this machine's real backend: a spy
on `chunked_attention` and on `keras.ops.dot_product_attention` shows which
path ran, and the output is compared with the explicit path
(`chunk_threshold=None`, same weights).
"""

import importlib.util
import os

import keras
import numpy as np
import pytest

from keras_attention.layers import ALiBi, ImageSelfAttention, dispatch
from keras_attention.layers import attention as attention_module
from keras_attention.layers import image_attention as image_module
from keras_attention.layers import multi_head_attention as mha_module
from keras_attention.layers import multi_head_paths as mha_paths
from keras_attention.layers.attention import Attention
from keras_attention.layers.chunked import chunked_attention
from keras_attention.layers.multi_head_attention import MultiHeadAttention

_spec = importlib.util.spec_from_file_location(
    "attention_cases", os.path.join(os.path.dirname(__file__), "attention_cases.py")
)
cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cases)

B, DIM, HEADS = cases.B, cases.DIM, cases.HEADS
T = 12  # above the stubbed thresholds below
SMALL = 8


@pytest.fixture
def paths(monkeypatch):
    """Stubbable device; counts of the chunked and fused calls; small limits."""
    calls = {"chunked": [], "fused": 0}

    def chunked(*args, **kwargs):
        calls["chunked"].append(kwargs.get("query_chunk_size"))
        return chunked_attention(*args, **kwargs)

    fused_op = keras.ops.dot_product_attention

    def fused(*args, **kwargs):
        calls["fused"] += 1
        return fused_op(*args, **kwargs)

    for module in (mha_paths, attention_module, image_module):
        monkeypatch.setattr(module, "chunked_attention", chunked)
    monkeypatch.setattr(mha_module.ops, "dot_product_attention", fused)
    monkeypatch.setattr(dispatch, "CPU_CHUNK_THRESHOLD", SMALL)
    monkeypatch.setattr(dispatch, "DEVICE_CHUNK_THRESHOLD", SMALL)
    monkeypatch.setattr(dispatch, "CPU_CHUNK_SIZE", 5)
    monkeypatch.setattr(dispatch, "EAGER_CPU_CHUNK_SIZE", 7)
    monkeypatch.setattr(dispatch, "EAGER_CPU_CHUNK_THRESHOLD", T)
    # As if compiled: whether TensorFlow runs eagerly has its own tests.
    monkeypatch.setattr(dispatch, "tensorflow_eager", lambda: False)

    def stub(backend, device):
        monkeypatch.setattr(dispatch, "backend", lambda: backend)
        monkeypatch.setattr(dispatch, "platform", lambda tensor=None: device)

    calls["stub"] = stub
    return calls


def test_the_layers_use_the_dispatch_module_the_tests_stub():
    """One `dispatch` module: pytest collecting its examples first must not
    execute it again as a second module (see the root `conftest.py`)."""
    for module in (mha_module, mha_paths, attention_module, image_module):
        assert module.dispatch is dispatch, module.__name__


MASKS = {
    "none": {},
    "causal": {"use_causal_mask": True},
    "padding": {"value_mask": cases.padding(T)},
    "causal_padding": {"use_causal_mask": True, "value_mask": cases.padding(T)},
    "attention_mask": {
        "attention_mask": np.random.default_rng(1).random((B, T, T)) < 0.7
    },
}

# (backend, device, dtype, mask) -> the path `"auto"` takes, per rule.
RULES = [
    # PyTorch: SDPA is memory-efficient on CUDA and on CPU, any dtype/mask.
    ("torch", "gpu", "float32", "none", "fused"),
    ("torch", "gpu", "float32", "padding", "fused"),
    ("torch", "gpu", "mixed_bfloat16", "causal", "fused"),
    ("torch", "cpu", "float32", "none", "fused"),
    ("torch", "cpu", "float32", "causal", "fused"),
    ("torch", "cpu", "float32", "padding", "fused"),
    ("torch", "cpu", "float32", "causal_padding", "fused"),
    ("torch", "cpu", "float32", "attention_mask", "fused"),
    # JAX: cuDNN flash in bfloat16 without a mask or causal only.
    ("jax", "gpu", "mixed_bfloat16", "none", "fused"),
    ("jax", "gpu", "mixed_bfloat16", "causal", "fused"),
    ("jax", "gpu", "mixed_bfloat16", "padding", "chunked"),
    ("jax", "gpu", "mixed_bfloat16", "causal_padding", "chunked"),
    ("jax", "gpu", "float32", "none", "chunked"),
    ("jax", "gpu", "float32", "causal", "chunked"),
    ("jax", "cpu", "float32", "none", "chunked"),
    ("jax", "cpu", "mixed_bfloat16", "none", "chunked"),
    ("jax", "tpu", "mixed_bfloat16", "none", "chunked"),
    # TensorFlow: no memory-efficient kernel on any device.
    ("tensorflow", "cpu", "float32", "none", "chunked"),
    ("tensorflow", "gpu", "mixed_bfloat16", "causal", "chunked"),
    ("tensorflow", "gpu", "float32", "padding", "chunked"),
]


def _pair(config, query, value):
    """A layer with `chunk_threshold="auto"` and its explicit twin."""
    auto = MultiHeadAttention(num_heads=HEADS, key_dim=4, **config)
    explicit = MultiHeadAttention(
        num_heads=HEADS, key_dim=4, chunk_threshold=None, **config
    )
    for layer in (auto, explicit):
        layer(query, value)
    explicit.set_weights(auto.get_weights())
    return auto, explicit


def _assert_close(out, ref, dtype):
    """Within rounding: bfloat16 outputs to two of its ulps (8-bit mantissa:
    a spacing of 2**-7 relative, 0.03 near 4), float32 to 2e-5."""
    if "bfloat16" in dtype:
        np.testing.assert_allclose(out, ref, rtol=2**-6, atol=3e-2)
    else:
        np.testing.assert_allclose(out, ref, atol=2e-5)


@pytest.mark.parametrize(("backend", "device", "dtype", "mask", "path"), RULES)
def test_mha_auto_path_per_rule(paths, backend, device, dtype, mask, path):
    query, value = cases.data(T), cases.data(T, seed=1)
    auto, explicit = _pair({"dtype": dtype}, query, value)
    paths["stub"](backend, device)
    paths["chunked"].clear()
    paths["fused"] = 0
    out = keras.ops.convert_to_numpy(
        keras.ops.cast(auto(query, value, **MASKS[mask]), "float32")
    )
    took = "chunked" if paths["chunked"] else "fused" if paths["fused"] else "explicit"
    assert took == path
    ref = explicit(query, value, **MASKS[mask])
    ref = keras.ops.convert_to_numpy(keras.ops.cast(ref, "float32"))
    _assert_close(out, ref, dtype)


@pytest.mark.parametrize(
    ("config", "kwargs"),
    [
        ({"score": "general"}, {}),  # no fused path for another score
        ({"dropout": 0.5}, {"training": True}),  # dropout: explicit weights
        ({"value_dim": 3}, {}),  # value_dim != key_dim
    ],
)
def test_mha_auto_chunks_where_nothing_is_fused(paths, config, kwargs):
    query, value = cases.data(T), cases.data(T, seed=1)
    layer = MultiHeadAttention(num_heads=HEADS, key_dim=4, **config)
    layer(query, value)
    paths["stub"]("torch", "gpu")
    paths["chunked"].clear()
    layer(query, value, **kwargs)
    assert len(paths["chunked"]) == 1


def test_mha_auto_below_the_threshold_is_not_chunked(paths):
    query, value = cases.data(SMALL), cases.data(SMALL, seed=1)
    layer = MultiHeadAttention(num_heads=HEADS, key_dim=4)
    paths["stub"]("tensorflow", "cpu")
    layer(query, value)
    assert paths["chunked"] == [] and paths["fused"] == 1


@pytest.mark.parametrize(
    ("threshold", "backend", "device", "chunked"),
    [
        (None, "tensorflow", "cpu", False),  # never, where auto would chunk
        (0, "torch", "gpu", True),  # always, where auto would fuse
        (SMALL, "jax", "gpu", True),  # an int: the old meaning on any device
        (T, "tensorflow", "cpu", False),
    ],
)
def test_int_and_none_thresholds_override_the_device(
    paths, threshold, backend, device, chunked
):
    query, value = cases.data(T), cases.data(T, seed=1)
    layer = MultiHeadAttention(num_heads=HEADS, key_dim=4, chunk_threshold=threshold)
    paths["stub"](backend, device)
    layer(query, value)
    assert bool(paths["chunked"]) is chunked


def test_flash_attention_true_is_never_chunked(paths):
    query, value = cases.data(T), cases.data(T, seed=1)
    layer = MultiHeadAttention(
        num_heads=HEADS, key_dim=4, chunk_threshold=0, flash_attention=True
    )
    paths["stub"]("tensorflow", "cpu")
    try:
        layer(query, value)
    except Exception:  # no flash kernel on this machine: it raises, as Keras
        pass
    assert paths["chunked"] == []


@pytest.mark.parametrize(("device", "size"), [("cpu", 5), ("gpu", 4096)])
def test_auto_chunk_size_per_device(paths, device, size):
    query, value = cases.data(T), cases.data(T, seed=1)
    layer = MultiHeadAttention(num_heads=HEADS, key_dim=4, score="general")
    layer(query, value)
    paths["stub"]("tensorflow", device)
    paths["chunked"].clear()
    layer(query, value)
    assert paths["chunked"] == [size]


@pytest.mark.parametrize(
    ("backend", "device", "eager", "size"),
    [
        ("tensorflow", "cpu", True, 7),  # op by op: larger blocks
        ("tensorflow", "cpu", False, 5),  # in a `tf.function`
        ("tensorflow", "gpu", True, 4096),  # the accelerator's rule
    ],
)
def test_auto_chunk_size_while_tensorflow_runs_eagerly(
    paths, monkeypatch, backend, device, eager, size
):
    query, value = cases.data(T), cases.data(T, seed=1)
    layer = MultiHeadAttention(num_heads=HEADS, key_dim=4, chunk_threshold=0)
    layer(query, value)
    paths["stub"](backend, device)
    monkeypatch.setattr(dispatch, "tensorflow_eager", lambda: eager)
    paths["chunked"].clear()
    layer(query, value)
    assert paths["chunked"] == [size]


@pytest.mark.parametrize(
    ("backend", "device", "eager", "hooked", "path"),
    [
        ("tensorflow", "cpu", True, False, "fused"),  # not above eager's
        ("tensorflow", "cpu", True, True, "chunked"),  # a hook: the CPU's
        ("tensorflow", "cpu", False, False, "chunked"),  # compiled: the CPU's
        ("jax", "cpu", True, False, "chunked"),  # (no eager TensorFlow on JAX)
        ("tensorflow", "gpu", True, False, "chunked"),  # the accelerator's rule
    ],
)
def test_auto_threshold_while_tensorflow_runs_eagerly(
    paths, monkeypatch, backend, device, eager, hooked, path
):
    query, value = cases.data(T), cases.data(T, seed=1)
    hook = ALiBi() if hooked else None
    layer = MultiHeadAttention(num_heads=HEADS, key_dim=4, score_mod=hook)
    layer(query, value)
    paths["stub"](backend, device)
    monkeypatch.setattr(
        dispatch, "tensorflow_eager", lambda: eager and backend == "tensorflow"
    )
    _reset(paths)
    layer(query, value)
    assert _took(paths) == path


def test_tensorflow_eager_is_read_from_tensorflow():
    if keras.config.backend() != "tensorflow":
        assert not dispatch.tensorflow_eager()
        return
    import tensorflow as tf

    assert dispatch.tensorflow_eager()
    traced = tf.function(lambda: tf.constant(dispatch.tensorflow_eager()))
    assert not traced().numpy()


def test_auto_chunk_size_bounds_the_block():
    for rows in (1, 8, 32, 128, 512, 10**4):
        size = dispatch.auto_chunk_size("gpu", rows)
        assert size in dispatch.DEVICE_CHUNK_SIZES
        fits = rows * size * size * 4 <= dispatch.DEVICE_BLOCK_BYTES
        assert fits or size == dispatch.DEVICE_CHUNK_SIZES[-1]
        larger = [s for s in dispatch.DEVICE_CHUNK_SIZES if s > size]
        assert all(rows * s * s * 4 > dispatch.DEVICE_BLOCK_BYTES for s in larger)
    assert dispatch.auto_chunk_size("cpu", 8) == dispatch.CPU_CHUNK_SIZE


@pytest.mark.parametrize(
    ("backend", "device", "threshold"),
    [
        ("tensorflow", "cpu", "CPU_CHUNK_THRESHOLD"),
        ("jax", "cpu", "CPU_CHUNK_THRESHOLD"),
        ("torch", "cpu", "DEVICE_CHUNK_THRESHOLD"),
        ("jax", "gpu", "DEVICE_CHUNK_THRESHOLD"),
        ("tensorflow", "gpu", "DEVICE_CHUNK_THRESHOLD"),
    ],
)
def test_auto_threshold(backend, device, threshold):
    assert dispatch.auto_threshold(backend, device) == getattr(dispatch, threshold)
    eager = "EAGER_CPU_CHUNK_THRESHOLD" if threshold == "CPU_CHUNK_THRESHOLD" else None
    expected = getattr(dispatch, eager or threshold)
    assert dispatch.auto_threshold(backend, device, eager=True) == expected
    # A score hook's bias would add to the full path's scores: no eager rise.
    hooked = dispatch.auto_threshold(backend, device, eager=True, hooked=True)
    assert hooked == getattr(dispatch, threshold)


def _took(paths):
    return "chunked" if paths["chunked"] else "fused" if paths["fused"] else "explicit"


def _numpy(x):
    return keras.ops.convert_to_numpy(keras.ops.cast(x, "float32"))


def _reset(paths):
    paths["chunked"].clear()
    paths["fused"] = 0


# `Attention`'s masks: every `MASKS` form, plus rows with nothing to attend
# to (an example with no value, masked queries), which the fused kernels
# average uniformly and the layer must give as zeros.
def _attention_masks(kind):
    if kind != "empty_rows":
        return MASKS[kind]
    values = cases.padding(T)
    values[1] = False
    return {"value_mask": values, "query_mask": cases.query_padding(T)}


@pytest.mark.parametrize(
    ("backend", "device", "dtype", "mask", "path"),
    RULES
    + [
        ("torch", "cpu", "float32", "empty_rows", "fused"),
        ("jax", "gpu", "mixed_bfloat16", "empty_rows", "chunked"),
    ],
)
def test_attention_auto_path_per_rule(paths, backend, device, dtype, mask, path):
    """`Attention(mode="soft")` with the scaled dot product: MHA's rules."""
    query, value = cases.data(T), cases.data(T, seed=1)
    layer = Attention(dtype=dtype)
    kwargs = _attention_masks(mask)
    paths["stub"](backend, device)
    _reset(paths)
    out = _numpy(layer(query, value, **kwargs))
    assert _took(paths) == path
    # The weights need the explicit path, whatever the device.
    _reset(paths)
    ref, _ = layer(query, value, return_attention_scores=True, **kwargs)
    assert _took(paths) == "explicit"
    _assert_close(out, _numpy(ref), dtype)
    if mask == "empty_rows":
        np.testing.assert_array_equal(out[1], 0.0)


LEARNED_SCALE = {"class_name": "dot", "config": {"use_scale": True}}


@pytest.mark.parametrize(
    ("score", "config", "kwargs", "path"),
    [
        ("scaled_dot", {}, {}, "fused"),
        ("dot", {}, {}, "fused"),  # Keras's score, a scale of 1
        (LEARNED_SCALE, {}, {}, "chunked"),
        ("general", {}, {}, "chunked"),
        ("cosine", {}, {}, "chunked"),
        ("scaled_dot", {"dropout": 0.5}, {"training": True}, "chunked"),
        ("scaled_dot", {"dropout": 0.5}, {"training": False}, "fused"),
        ("scaled_dot", {"dtype": "mixed_float16"}, {}, "chunked"),
        ("scaled_dot", {"window": 2}, {}, "explicit"),
        ("scaled_dot", {"mode": "hard"}, {}, "explicit"),
        ("scaled_dot", {}, {"return_attention_scores": True}, "explicit"),
    ],
)
def test_attention_fuses_only_a_scaled_dot_product(paths, score, config, kwargs, path):
    query, value = cases.data(T), cases.data(T, seed=1)
    layer = Attention(score=score, seed=0, **config)
    paths["stub"]("torch", "gpu")
    _reset(paths)
    layer(query, value, **kwargs)
    assert _took(paths) == path


@pytest.mark.parametrize("call", ["tensor", "list"])
@pytest.mark.parametrize(("q_len", "value_dim"), [(T, DIM), (5, DIM), (T, 3), (T, 11)])
def test_attention_fused_alignment_and_widths(paths, call, q_len, value_dim):
    """The causal mask's alignment (the tensor call's last query with the
    last value, the list call's first with the first), padding, and values
    narrower or wider than the keys (zero channels make them one width)."""
    rng = np.random.default_rng(4)
    query, key = cases.data(q_len), cases.data(T, seed=1)
    value = rng.normal(size=(B, T, value_dim)).astype("float32")
    values = cases.padding(T)
    layer = Attention()
    paths["stub"]("torch", "cpu")
    _reset(paths)
    if call == "tensor":
        kwargs = {"value_mask": values, "use_causal_mask": True}
        out = layer(query, value, key, **kwargs)
        ref, _ = layer(query, value, key, return_attention_scores=True, **kwargs)
    else:
        kwargs = {"mask": [None, values], "use_causal_mask": True}
        out = layer([query, value, key], **kwargs)
        ref, _ = layer([query, value, key], return_attention_scores=True, **kwargs)
    assert paths["fused"] == 1 and not paths["chunked"]
    assert tuple(out.shape) == (B, q_len, value_dim)
    np.testing.assert_allclose(_numpy(out), _numpy(ref), atol=2e-5)


def test_attention_fused_gradients_match_the_explicit_path(paths):
    """Rows with nothing to attend to: zero outputs and finite gradients,
    those of the explicit path (which the weights ask for)."""
    query, value = cases.data(T), cases.data(T, seed=1)
    kwargs = _attention_masks("empty_rows")
    probe = np.random.default_rng(5).normal(size=query.shape).astype("float32")
    loss = cases.gradients.weighted_sum(probe)
    layer = Attention()
    layer(query, value)  # built, for JAX's `stateless_call`
    paths["stub"]("torch", "cpu")
    _reset(paths)
    fused = cases.gradients.value_and_gradients(layer, [query, value], loss, kwargs)
    assert _took(paths) == "fused"
    _reset(paths)
    (context, _), grads = cases.gradients.value_and_gradients(
        layer,
        [query, value],
        lambda outputs: loss(outputs[0]),
        {**kwargs, "return_attention_scores": True},
    )
    assert _took(paths) == "explicit"
    cases.assert_same(fused, (context, grads))


# (backend, device, dtype) -> `ImageSelfAttention`'s path: it has no mask.
IMAGE_RULES = [
    ("torch", "gpu", "float32", "fused"),
    ("torch", "cpu", "float32", "fused"),
    ("torch", "cpu", "mixed_bfloat16", "fused"),
    ("jax", "gpu", "mixed_bfloat16", "fused"),
    ("jax", "gpu", "float32", "chunked"),
    ("jax", "cpu", "float32", "chunked"),
    ("tensorflow", "gpu", "mixed_bfloat16", "chunked"),
    ("tensorflow", "cpu", "float32", "chunked"),
]


def _image_pair(images, **config):
    """An `ImageSelfAttention` with `"auto"` and its explicit twin."""
    layer = ImageSelfAttention(gamma_initializer="ones", seed=0, **config)
    twin = ImageSelfAttention(
        chunk_threshold=None, gamma_initializer="ones", seed=0, **config
    )
    layer(images)
    twin(images)
    twin.set_weights(layer.get_weights())
    return layer, twin


@pytest.mark.parametrize(("backend", "device", "dtype", "path"), IMAGE_RULES)
@pytest.mark.parametrize("score", ["dot", "scaled_dot"])
def test_image_attention_auto_path_per_rule(paths, backend, device, dtype, path, score):
    """12 positions; the default widths (key 1, value 4 channels) differ."""
    images = np.random.default_rng(0).normal(size=(B, 3, 4, 8)).astype("float32")
    layer, twin = _image_pair(images, score=score, dtype=dtype)
    paths["stub"]("tensorflow", "cpu")  # no fused kernel: the explicit path
    _reset(paths)
    ref = _numpy(twin(images))
    assert _took(paths) == "explicit"
    paths["stub"](backend, device)
    _reset(paths)
    out = _numpy(layer(images))
    assert _took(paths) == path
    _assert_close(out, ref, dtype)


@pytest.mark.parametrize(
    ("config", "kwargs", "path"),
    [
        ({"score": "general"}, {}, "chunked"),
        ({"dropout": 0.5}, {"training": True}, "chunked"),
        ({"dropout": 0.5}, {"training": False}, "fused"),
        ({"dtype": "mixed_float16"}, {}, "chunked"),
        ({"chunk_threshold": 0}, {}, "chunked"),  # an int forces it
    ],
)
def test_image_attention_fuses_only_a_scaled_dot_product(paths, config, kwargs, path):
    images = np.random.default_rng(0).normal(size=(B, 3, 4, 8)).astype("float32")
    layer = ImageSelfAttention(seed=0, **config)
    layer(images)
    paths["stub"]("torch", "gpu")
    _reset(paths)
    layer(images, **kwargs)
    assert _took(paths) == path


def test_platform_is_the_backends_device():
    backend = keras.config.backend()
    if backend == "jax":
        import jax

        expected = jax.devices()[0].platform
    elif backend == "torch":
        import torch

        expected = "gpu" if torch.cuda.is_available() else "cpu"
    else:
        import tensorflow as tf

        expected = "gpu" if tf.config.list_logical_devices("GPU") else "cpu"
    assert dispatch.platform() == {"cuda": "gpu"}.get(expected, expected)


@pytest.mark.parametrize(
    "bad",
    [
        {"chunk_threshold": "fast"},
        {"chunk_threshold": -1},
        {"chunk_size": "big"},
        {"chunk_size": 0},
    ],
)
def test_bad_auto_arguments(bad):
    name = next(iter(bad))
    with pytest.raises(ValueError, match=f"{name}={bad[name]!r}"):
        MultiHeadAttention(num_heads=HEADS, key_dim=4, **bad)
    with pytest.raises(ValueError, match=name):
        Attention(**bad)


def test_fused_rule_rejects_an_unknown_mask():
    with pytest.raises(ValueError, match="mask='band'"):
        dispatch.fused_is_memory_efficient("torch", "cpu", "float32", "band")
