"""MultiHeadAttention(window=r): blockwise restricted self-attention.

The reference is the same layer (same weights) on its explicit path with
`window=None`, `chunk_threshold=None` and the band `|i - j| <= r` passed as
an `attention_mask`: outputs and gradients with respect to the inputs and
every trainable weight, on TF and JAX. A spy on `windowed_attention` checks
which path ran; a shape-level walk of the traced graph checks that no
`(T, T)` tensor is formed, forward or backward.
"""

import importlib.util
import os

import keras
import numpy as np
import pytest

from keras_attention.layers import multi_head_paths as mha_paths
from keras_attention.layers.multi_head_attention import MultiHeadAttention
from keras_attention.layers.windowed import windowed_attention

_spec = importlib.util.spec_from_file_location(
    "attention_cases", os.path.join(os.path.dirname(__file__), "attention_cases.py")
)
cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cases)

B, DIM, HEADS = cases.B, cases.DIM, cases.HEADS
T, KEY_DIM, RADIUS = 23, 4, 4


@pytest.fixture
def calls(monkeypatch):
    """Counts the calls of `windowed_attention` from the layer's module."""
    return cases.spy(monkeypatch, windowed_attention, mha_paths)


def _data(length=T, seed=0, scale=1.0):
    return cases.data(length, seed, scale)


def _band(length, radius):
    distance = np.arange(length)[:, None] - np.arange(length)[None, :]
    return np.abs(distance) <= radius


def _pair(x, radius=RADIUS, **config):
    """The windowed layer and its explicit twin, same weights."""
    config = {"num_heads": HEADS, "key_dim": KEY_DIM, **config}
    windowed = MultiHeadAttention(window=radius, **config)
    explicit = MultiHeadAttention(chunk_threshold=None, **config)
    for layer in (windowed, explicit):
        layer(x, x)
    rng = np.random.default_rng(1)
    # Non-zero biases, so an empty row's output (the output bias) is visible.
    weights = [w + 0.1 * rng.normal(size=w.shape) for w in windowed.get_weights()]
    windowed.set_weights(weights)
    explicit.set_weights(weights)
    return windowed, explicit


def _with_band(kwargs, length, radius):
    """The explicit twin's arguments: the band ANDed into the attention mask."""
    band = _band(length, radius)
    mask = kwargs.get("attention_mask")
    if mask is None:
        mask = band
    else:
        mask = np.logical_and(mask, band)
    return {**kwargs, "attention_mask": mask}


def _value_and_grads(layer, x, kwargs, jit=False):
    """Output and gradients (query, value, weights) of self-attention on x."""
    return cases.value_and_grads(layer, (x, x), kwargs, jit)


def _assert_same(got, expected, atol=2e-5):
    cases.assert_same(got, expected, atol, grad_atol=5 * atol)


def _masks(kind, length=T):
    if kind != "empty_rows":
        return cases.masks(kind, length, length)
    # Rows with nothing to attend to: an example with no key, an all-False
    # attention row, a masked query, one head emptied for one row, and (with
    # the causal band) the first rows of example 0, whose keys are padded.
    empty = cases.padding(length)
    empty[1] = False
    empty[0, :6] = False
    mask = np.random.default_rng(3).random((B, HEADS, length, length)) < 0.6
    mask[0, :, 8] = False
    mask[0, 1, 12] = False
    return {
        "value_mask": empty,
        "attention_mask": mask,
        "query_mask": cases.query_padding(length),
        "use_causal_mask": True,
    }


MASKS = [*cases.MASKS, "empty_rows"]
# Every mask with the dot product; a parametrised score (gradients through
# its weights) on the two-sided band with padding, and on the causal band
# with every other mask at once ("empty_rows": value and query padding, a
# rank-4 mask, rows with nothing to attend to). Compiling every case costs
# minutes: these run under XLA (TF) or `jax.jit`, the others op by op.
CASES = [("scaled_dot", kind) for kind in MASKS] + [
    ("general", kind) for kind in ("padding", "empty_rows")
]
JIT_CASES = {"causal_padding", "empty_rows"}


@pytest.mark.parametrize(("score", "kind"), CASES)
def test_window_equals_explicit_band(calls, score, kind):
    x = _data()
    windowed, explicit = _pair(x, score=score)
    kwargs = _masks(kind)
    jit = kind in JIT_CASES
    calls["n"] = 0
    got = _value_and_grads(windowed, x, kwargs, jit)
    assert calls["n"] >= 1
    expected = _value_and_grads(explicit, x, _with_band(kwargs, T, RADIUS), jit)
    _assert_same(got, expected)


@pytest.mark.parametrize("radius", [1, 7, 40])  # blocks of 1, 7 > T / 4, r > T
def test_window_radii(calls, radius):
    x = _data(length=17)
    windowed, explicit = _pair(x, radius=radius)
    kwargs = {"use_causal_mask": True}
    got = _value_and_grads(windowed, x, kwargs)
    expected = _value_and_grads(explicit, x, _with_band(kwargs, 17, radius))
    _assert_same(got, expected)
    assert calls["n"] >= 1


def test_empty_rows_give_the_bias_and_finite_gradients(calls):
    x = _data()
    windowed, _ = _pair(x)
    padding = np.ones((B, T), bool)
    padding[1] = False  # example 1 has no key at all
    padding[0, :6] = False  # causal band: rows 0..5 of example 0 see nothing
    kwargs = {"value_mask": padding, "use_causal_mask": True}
    out, grads = _value_and_grads(windowed, x, kwargs)
    bias = keras.ops.convert_to_numpy(windowed.output_dense.bias)
    np.testing.assert_allclose(out[1], np.broadcast_to(bias, (T, DIM)), atol=1e-6)
    np.testing.assert_allclose(out[0, :6], np.broadcast_to(bias, (6, DIM)), atol=1e-6)
    for grad in grads:
        assert np.all(np.isfinite(grad))
    # Example 1 reaches the output only through the (empty) attention: its
    # query and value get no gradient.
    np.testing.assert_array_equal(grads[0][1], 0.0)
    np.testing.assert_array_equal(grads[1][1], 0.0)


def test_return_attention_scores_gives_the_banded_full_weights(calls):
    x = _data()
    windowed, explicit = _pair(x)
    calls["n"] = 0
    out, weights = windowed(x, x, use_causal_mask=True, return_attention_scores=True)
    assert calls["n"] == 0  # the full weights come from the explicit path
    ref_out, ref_weights = explicit(
        x,
        x,
        attention_mask=_band(T, RADIUS),
        use_causal_mask=True,
        return_attention_scores=True,
    )
    weights = keras.ops.convert_to_numpy(weights)
    assert weights.shape == (B, HEADS, T, T)
    np.testing.assert_allclose(
        weights, keras.ops.convert_to_numpy(ref_weights), atol=1e-6
    )
    np.testing.assert_array_equal(weights[..., ~_band(T, RADIUS)], 0.0)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(out), keras.ops.convert_to_numpy(ref_out), atol=1e-5
    )
    windowed_out = keras.ops.convert_to_numpy(windowed(x, x, use_causal_mask=True))
    np.testing.assert_allclose(windowed_out, keras.ops.convert_to_numpy(out), atol=2e-5)


def test_cache_decoding_matches_the_whole_sequence(calls):
    x = _data(length=9)
    layer = MultiHeadAttention(num_heads=HEADS, key_dim=KEY_DIM, window=2)
    whole = keras.ops.convert_to_numpy(layer(x, x, use_causal_mask=True))
    assert calls["n"] == 1
    cache = np.zeros((B, 2, 9, HEADS, KEY_DIM), "float32")
    for step in range(9):
        out, cache = layer(
            x[:, step : step + 1],
            x[:, step : step + 1],
            cache=cache,
            cache_update_index=step,
            use_causal_mask=True,
        )
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(out)[:, 0], whole[:, step], atol=2e-5
        )
    assert calls["n"] == 1  # decoding takes the explicit path


def test_dropout_matches_the_chunked_path(calls):
    """Same seed, same per-position hash: the chunked path with Keras's
    `sliding_window = r + 1` drops the same weights."""
    x = _data()
    config = {"num_heads": HEADS, "key_dim": KEY_DIM, "dropout": 0.3, "seed": 11}
    windowed = MultiHeadAttention(window=RADIUS, **config)
    chunked = MultiHeadAttention(
        chunk_threshold=0, chunk_size=5, sliding_window=RADIUS + 1, **config
    )
    for layer in (windowed, chunked):
        layer(x, x)
    chunked.set_weights(windowed.get_weights())
    calls["n"] = 0
    inference = keras.ops.convert_to_numpy(windowed(x, x))
    trained = keras.ops.convert_to_numpy(windowed(x, x, training=True))
    reference = keras.ops.convert_to_numpy(chunked(x, x, training=True))
    assert calls["n"] == 2
    assert np.all(np.isfinite(trained))
    assert not np.allclose(trained, inference, atol=1e-3)
    np.testing.assert_allclose(trained, reference, atol=2e-5)


def test_mixed_precision_softmax_in_float32(calls):
    keras.config.set_dtype_policy("mixed_float16")
    # Scores of ~1e5 overflow float16 (max 65504) unless scored in float32.
    x = _data(scale=30.0)
    windowed, explicit = _pair(x)
    out = windowed(x, x, use_causal_mask=True)
    assert keras.backend.standardize_dtype(out.dtype) == "float16"
    ref = explicit(x, x, attention_mask=_band(T, RADIUS), use_causal_mask=True)
    out, ref = (keras.ops.convert_to_numpy(a).astype("float32") for a in (out, ref))
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(out, ref, atol=0.05 * np.abs(ref).max(), rtol=0.05)
    assert calls["n"] >= 1


@pytest.mark.parametrize(
    "window, error",
    [
        (0, ValueError),
        (-2, ValueError),
        (2.5, TypeError),
        (True, TypeError),
        ("3", TypeError),
    ],
)
def test_bad_window_values(window, error):
    # A bad value is a ValueError, a bad type a TypeError, as in Keras
    # (`keras_attention.arguments.int_argument`).
    with pytest.raises(error, match="window"):
        MultiHeadAttention(num_heads=HEADS, key_dim=KEY_DIM, window=window)


@pytest.mark.parametrize(
    "config",
    [
        {"sliding_window": 3},
        {"flash_attention": True},
        {"score": "location"},
    ],
)
def test_window_does_not_combine_with(config):
    with pytest.raises(ValueError, match="window"):
        MultiHeadAttention(num_heads=HEADS, key_dim=KEY_DIM, window=3, **config)


def test_window_needs_self_attention():
    layer = MultiHeadAttention(num_heads=HEADS, key_dim=KEY_DIM, window=3)
    with pytest.raises(ValueError, match="window=3"):
        layer(_data(length=7), _data(length=9))
    layer = MultiHeadAttention(num_heads=HEADS, key_dim=KEY_DIM, window=3)
    layer(_data(length=7), _data(length=7))
    with pytest.raises(ValueError, match="window=3"):
        layer(_data(length=7), _data(length=9))


def test_window_needs_rank_3():
    layer = MultiHeadAttention(
        num_heads=HEADS, key_dim=KEY_DIM, window=3, attention_axes=(1, 2)
    )
    x = np.zeros((1, 4, 4, DIM), "float32")
    with pytest.raises(ValueError, match="window"):
        layer(x, x)


def test_config_and_saving_round_trip(tmp_path, calls):
    layer = MultiHeadAttention(
        num_heads=HEADS, key_dim=KEY_DIM, window=3, score="general", name="mha"
    )
    config = layer.get_config()
    assert config["window"] == 3 and config["sliding_window"] is None
    assert MultiHeadAttention.from_config(config).window == 3
    legacy = {k: v for k, v in config.items() if k != "window"}
    assert MultiHeadAttention.from_config(legacy).window is None
    restored = keras.saving.deserialize_keras_object(
        keras.saving.serialize_keras_object(layer)
    )
    assert isinstance(restored, MultiHeadAttention) and restored.window == 3

    inputs = keras.Input((T, DIM))
    model = keras.Model(inputs, layer(inputs, inputs, use_causal_mask=True))
    x = _data()
    expected = keras.ops.convert_to_numpy(model(x))
    path = str(tmp_path / "windowed.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)  # no custom_objects: registered
    assert loaded.get_layer("mha").window == 3
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(loaded(x)), expected, atol=1e-6
    )
    assert calls["n"] >= 2


def test_functional_model_implicit_masks(calls):
    """An Embedding(mask_zero=True) gives the layer query and value masks."""
    tokens = keras.Input((T,), dtype="int32")
    embedded = keras.layers.Embedding(11, DIM, mask_zero=True)(tokens)
    config = {"num_heads": HEADS, "key_dim": KEY_DIM}
    windowed = MultiHeadAttention(window=RADIUS, **config)
    explicit = MultiHeadAttention(chunk_threshold=None, **config)
    model = keras.Model(tokens, windowed(embedded, embedded))
    twin = keras.Model(
        tokens, explicit(embedded, embedded, attention_mask=_band(T, RADIUS))
    )
    twin.set_weights(model.get_weights())
    ids = np.random.default_rng(2).integers(1, 11, size=(B, T)).astype("int32")
    ids[0, 15:] = 0
    ids[1, :3] = 0
    out, ref = (keras.ops.convert_to_numpy(m(ids)) for m in (model, twin))
    np.testing.assert_allclose(out, ref, atol=2e-5)
    assert calls["n"] >= 1


def _largest_intermediate(layer, x, kwargs):
    """Elements of the largest tensor traced in forward + backward of `layer`."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        @tf.function
        def step(x):
            with tf.GradientTape() as tape:
                tape.watch(x)
                loss = tf.reduce_sum(layer(x, x, **kwargs))
            return tape.gradient(loss, [x, *layer.trainable_variables])

        graph = step.get_concrete_function(tf.TensorSpec(x.shape, "float32")).graph
        sizes = []
        for op in graph.get_operations():
            for tensor in op.outputs:
                shape = tensor.shape
                if not shape.is_fully_defined():
                    # Only shape bookkeeping (BroadcastGradientArgs) is unknown.
                    assert tensor.dtype.is_integer and shape.rank == 1, op.name
                    continue
                sizes.append(shape.num_elements())
        return max(sizes)
    if backend == "jax":
        import jax

        trainable = [v.value for v in layer.trainable_variables]
        non_trainable = [v.value for v in layer.non_trainable_variables]

        def loss(trainable, x):
            out, _ = layer.stateless_call(trainable, non_trainable, x, x, **kwargs)
            return out.sum()

        closed = jax.make_jaxpr(jax.grad(loss, (0, 1)))(trainable, x)

        def walk(jaxpr):
            largest = 0
            for eqn in jaxpr.eqns:
                for var in eqn.outvars:
                    largest = max(largest, int(np.prod(var.aval.shape)))
                for param in eqn.params.values():
                    for sub in param if isinstance(param, (list, tuple)) else [param]:
                        inner = getattr(sub, "jaxpr", sub)
                        if hasattr(inner, "eqns"):
                            largest = max(largest, walk(inner))
            return largest

        return walk(closed.jaxpr)
    pytest.skip(f"graph shapes are read on TF and JAX, not {backend}")


def test_no_quadratic_tensor_forward_or_backward():
    """The largest traced tensor is O(T r), not the (B, heads, T, T) scores."""
    length, radius = 512, 8
    x = _data(length=length)
    kwargs = {
        "use_causal_mask": True,
        "value_mask": np.ones((B, length), bool),
        "query_mask": np.ones((B, length), bool),
    }
    windowed, explicit = _pair(x, radius=radius)
    largest = _largest_intermediate(windowed, x, kwargs)
    # Scores of each block of r queries against its 2r (causal) keys.
    band = B * HEADS * length * 2 * radius
    assert largest <= 2 * band, largest
    assert largest < B * HEADS * length * length // 8
    # The check would see the quadratic tensor: the explicit path has it.
    full = _largest_intermediate(explicit, x, _with_band(kwargs, length, radius))
    assert full >= B * HEADS * length * length
    # Twice the length, about twice the largest tensor (linear, not 4x).
    longer = _data(length=2 * length)
    kwargs = {
        "use_causal_mask": True,
        "value_mask": np.ones((B, 2 * length), bool),
        "query_mask": np.ones((B, 2 * length), bool),
    }
    windowed_longer = MultiHeadAttention(
        num_heads=HEADS, key_dim=KEY_DIM, window=radius
    )
    windowed_longer(longer, longer)
    ratio = _largest_intermediate(windowed_longer, longer, kwargs) / largest
    assert ratio <= 2.5, ratio
