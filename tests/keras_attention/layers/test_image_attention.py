"""ImageSelfAttention: the SAGAN formula, chunked = explicit, serialization."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_attention.layers.image_attention import ImageSelfAttention

SHAPE = (2, 5, 6, 8)  # 30 positions


def _images(seed=0, shape=SHAPE):
    return np.random.default_rng(seed).normal(size=shape).astype("float32")


def _gamma_one(layer, shape=SHAPE):
    layer.build(shape)
    layer.gamma.assign(1.0)
    return layer


def test_starts_as_the_identity():
    x = _images()
    layer = ImageSelfAttention()
    np.testing.assert_allclose(ops.convert_to_numpy(layer(x)), x)
    assert float(ops.convert_to_numpy(layer.gamma)) == 0.0
    assert len(layer.trainable_weights) == 4 * 2 + 1  # four 1x1 convs, gamma


def test_matches_the_sagan_formula():
    x = _images()
    layer = _gamma_one(ImageSelfAttention(key_dim=3, value_dim=5))
    out = ops.convert_to_numpy(layer(x))

    def conv(sub, inputs):
        kernel, bias = (ops.convert_to_numpy(w) for w in sub.weights)
        return inputs @ kernel[0, 0] + bias

    flat = x.reshape(2, 30, 8)
    f, g, h = (
        conv(c, flat) for c in (layer.query_conv, layer.key_conv, layer.value_conv)
    )
    scores = np.einsum("bid,bjd->bij", f, g)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    expected = flat + conv(layer.output_conv, weights @ h)
    np.testing.assert_allclose(out, expected.reshape(SHAPE), atol=1e-5)


@pytest.mark.parametrize("score", ["dot", "scaled_dot", "general", "additive"])
def test_chunked_path_equals_explicit_path(score):
    x = _images()
    explicit = _gamma_one(ImageSelfAttention(score=score, chunk_threshold=None))
    chunked = _gamma_one(
        ImageSelfAttention(
            score=score, chunk_threshold=16, query_chunk_size=8, key_chunk_size=7
        )
    )
    rng = np.random.default_rng(1)
    weights = [w + rng.normal(size=w.shape) * 0.1 for w in explicit.get_weights()]
    explicit.set_weights(weights)
    chunked.set_weights(weights)
    np.testing.assert_allclose(
        ops.convert_to_numpy(chunked(x)), ops.convert_to_numpy(explicit(x)), atol=1e-5
    )


@pytest.mark.tensorflow_only
def test_chunked_path_trains_like_the_explicit_path():
    import tensorflow as tf

    x = tf.constant(_images())
    layers = [
        _gamma_one(ImageSelfAttention(score="general", chunk_threshold=None)),
        _gamma_one(ImageSelfAttention(score="general", chunk_threshold=16)),
    ]
    layers[1].set_weights(layers[0].get_weights())
    grads = []
    for layer in layers:
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(layer(x) ** 2)
        grads.append(tape.gradient(loss, [x, *layer.trainable_variables]))
    for a, b in zip(*grads, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-4, rtol=1e-4)


def test_in_a_model_saved_and_loaded(tmp_path):
    inputs = keras.Input((6, 6, 4))
    x = ImageSelfAttention(key_dim=2, score="general", dropout=0.1, seed=3)(inputs)
    outputs = keras.layers.Dense(3)(keras.layers.GlobalAveragePooling2D()(x))
    model = keras.Model(inputs, outputs)
    model.layers[1].gamma.assign(0.5)
    path = str(tmp_path / "model.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)  # no custom_objects: registered
    images = _images(shape=(2, 6, 6, 4))
    np.testing.assert_allclose(
        loaded.predict(images, verbose=0), model.predict(images, verbose=0), atol=1e-6
    )
    layer = loaded.layers[1]
    config = layer.get_config()
    assert config["key_dim"] == 2 and config["dropout"] == 0.1
    assert config["score"] == "general" and config["chunk_threshold"] == "auto"
    assert ImageSelfAttention.from_config(config).get_config() == config
    assert layer.compute_output_shape((None, 6, 6, 4)) == (None, 6, 6, 4)


def test_dropout_only_in_training():
    x = _images()
    layer = _gamma_one(ImageSelfAttention(dropout=0.5, seed=1, chunk_threshold=16))
    inference = ops.convert_to_numpy(layer(x, training=False))
    np.testing.assert_allclose(inference, ops.convert_to_numpy(layer(x)))
    trained = ops.convert_to_numpy(layer(x, training=True))
    assert np.all(np.isfinite(trained)) and not np.allclose(trained, inference)


def test_mixed_precision_is_finite_and_close():
    x = _images()
    full = _gamma_one(ImageSelfAttention(chunk_threshold=16))
    keras.config.set_dtype_policy("mixed_float16")
    half = _gamma_one(ImageSelfAttention(chunk_threshold=16))
    half.set_weights(full.get_weights())
    out = half(x)
    assert keras.backend.standardize_dtype(out.dtype) == "float16"
    out = ops.convert_to_numpy(out).astype("float32")
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(out, ops.convert_to_numpy(full(x)), atol=5e-2)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"key_dim": 0}, "key_dim"),
        ({"chunk_threshold": -1}, "chunk_threshold"),
        ({"dropout": 1.0}, "dropout"),
        ({"query_chunk_size": 0}, "query_chunk_size"),
        ({"score": "nope"}, "Unknown score"),
    ],
)
def test_bad_arguments_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ImageSelfAttention(**kwargs)


def test_needs_a_feature_map():
    with pytest.raises(ValueError, match="height, width, channels"):
        ImageSelfAttention()(np.zeros((2, 5, 8), "float32"))
