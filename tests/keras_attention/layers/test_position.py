"""Tests for `SinusoidalPositionEncoding` and `PositionEmbedding`."""

import keras
import keras_hub
import numpy as np
import pytest
from keras import ops

from keras_attention.layers.position import (
    PositionEmbedding,
    SinusoidalPositionEncoding,
)


def numpy_sinusoid(length, depth, start=0, max_wavelength=10000.0):
    """Vaswani et al. section 3.5, written out with explicit loops."""
    table = np.zeros((length, depth), "float64")
    for pos in range(length):
        for i in range(depth):
            angle = (pos + start) / max_wavelength ** (2 * (i // 2) / depth)
            table[pos, i] = np.sin(angle) if i % 2 == 0 else np.cos(angle)
    return table


@pytest.mark.parametrize("depth", [8, 7])
def test_sinusoid_matches_numpy_formula(depth):
    x = np.random.default_rng(0).normal(size=(2, 6, depth)).astype("float32")
    out = ops.convert_to_numpy(SinusoidalPositionEncoding()(x))
    assert out.shape == (2, 6, depth)
    np.testing.assert_allclose(out[0], numpy_sinusoid(6, depth), atol=1e-6)
    np.testing.assert_array_equal(out[0], out[1])


def test_sinusoid_start_index_and_wavelength():
    x = np.zeros((1, 3, 6), "float32")
    layer = SinusoidalPositionEncoding(max_wavelength=100)
    out = ops.convert_to_numpy(layer(x, start_index=ops.convert_to_tensor(4)))
    expected = numpy_sinusoid(3, 6, start=4, max_wavelength=100.0)
    np.testing.assert_allclose(out[0], expected, atol=1e-6)


def test_sinusoid_matches_keras_hub():
    x = np.zeros((2, 9, 10), "float32")
    ours = SinusoidalPositionEncoding(max_wavelength=500)
    hub = keras_hub.layers.SinePositionEncoding(max_wavelength=500)
    np.testing.assert_allclose(
        ops.convert_to_numpy(ours(x, start_index=3)),
        ops.convert_to_numpy(hub(x, start_index=3)),
        atol=1e-5,
    )


def test_positions_argument_matches_numpy_formula_and_table_rows():
    positions = np.array([[2, 0, 5], [7, 7, 1]])
    x = np.zeros((2, 3, 6), "float32")
    sine = ops.convert_to_numpy(SinusoidalPositionEncoding()(x, positions=positions))
    table = numpy_sinusoid(8, 6)
    np.testing.assert_allclose(sine, table[positions], atol=1e-6)
    learned = PositionEmbedding(sequence_length=8)
    rows = ops.convert_to_numpy(learned(x, positions=positions[0]))
    expected = ops.convert_to_numpy(learned.embeddings)[positions[0]]
    np.testing.assert_array_equal(rows, np.broadcast_to(expected, (2, 3, 6)))


def test_sinusoid_half_precision_keeps_position_accuracy():
    # Position 3000 is not representable in float16; angles stay float32.
    x = np.zeros((1, 2, 4), "float16")
    layer = SinusoidalPositionEncoding(dtype="mixed_float16")
    out = ops.convert_to_numpy(layer(x, start_index=3001))
    assert out.dtype == np.float16
    np.testing.assert_allclose(out[0], numpy_sinusoid(2, 4, start=3001), atol=2e-3)


def test_position_embedding_slices_table():
    layer = PositionEmbedding(sequence_length=7, initializer="uniform")
    x = np.zeros((3, 4, 5), "float32")
    out = ops.convert_to_numpy(layer(x))
    table = ops.convert_to_numpy(layer.embeddings)
    assert table.shape == (7, 5)
    np.testing.assert_array_equal(out, np.broadcast_to(table[:4], (3, 4, 5)))
    step = ops.convert_to_numpy(layer(x[:, :1], start_index=5))
    np.testing.assert_array_equal(step[:, 0], np.broadcast_to(table[5], (3, 5)))


def test_position_embedding_matches_keras_hub_with_same_weights():
    keras.utils.set_random_seed(1)
    x = np.zeros((2, 5, 6), "float32")
    ours = PositionEmbedding(sequence_length=8)
    hub = keras_hub.layers.PositionEmbedding(sequence_length=8)
    ours.build(x.shape)
    hub.build(x.shape)
    hub.set_weights(ours.get_weights())
    for start in (0, 2):
        np.testing.assert_allclose(
            ops.convert_to_numpy(ours(x[:, :3], start_index=start)),
            ops.convert_to_numpy(hub(x[:, :3], start_index=start)),
            atol=1e-6,
        )
    np.testing.assert_allclose(
        ops.convert_to_numpy(ours(x)), ops.convert_to_numpy(hub(x)), atol=1e-6
    )


def test_position_embedding_is_trained():
    keras.utils.set_random_seed(0)
    inputs = keras.Input((4, 3))
    outputs = inputs + PositionEmbedding(sequence_length=4)(inputs)
    model = keras.Model(inputs, outputs)
    model.compile(optimizer=keras.optimizers.SGD(0.5), loss="mse")
    target = np.arange(12, dtype="float32").reshape(1, 4, 3) / 12.0
    x = np.zeros((1, 4, 3), "float32")
    before = model.evaluate(x, target, verbose=0)
    model.fit(x, target, epochs=20, verbose=0)
    assert model.evaluate(x, target, verbose=0) < 0.1 * before


def test_position_embedding_rejects_bad_lengths():
    with pytest.raises(ValueError, match="sequence_length=0"):
        PositionEmbedding(sequence_length=0)
    with pytest.raises(ValueError, match="sequence_length=3"):
        PositionEmbedding(sequence_length=3)(np.zeros((1, 4, 2), "float32"))
    with pytest.raises(ValueError, match="max_wavelength=1"):
        SinusoidalPositionEncoding(max_wavelength=1)


def test_serialization_round_trip(tmp_path):
    inputs = keras.Input((5, 4))
    x = inputs + SinusoidalPositionEncoding(max_wavelength=77, name="sin")(inputs)
    x = x + PositionEmbedding(6, initializer="he_normal", name="learned")(x)
    model = keras.Model(inputs, x)
    config = model.get_layer("learned").get_config()
    assert config["sequence_length"] == 6
    assert config["initializer"]["class_name"] == "HeNormal"
    assert model.get_layer("sin").get_config()["max_wavelength"] == 77
    path = tmp_path / "position.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    data = np.random.default_rng(3).normal(size=(2, 5, 4)).astype("float32")
    assert isinstance(loaded.get_layer("learned"), PositionEmbedding)
    np.testing.assert_allclose(
        ops.convert_to_numpy(loaded(data)), ops.convert_to_numpy(model(data))
    )
