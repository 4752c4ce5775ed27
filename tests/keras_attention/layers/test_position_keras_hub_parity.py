"""Position layers beside keras-hub's, in one process, on TF and JAX.

`SinusoidalPositionEncoding` is compared with the deterministic
`keras_hub.layers.SinePositionEncoding`, `PositionEmbedding` with
`keras_hub.layers.PositionEmbedding` holding the same table, for every way
of giving the positions: none, `start_index`, and `positions`.
"""

import keras
import keras_hub
import numpy as np
import pytest
from keras import ops

from keras_attention.layers import PositionEmbedding, SinusoidalPositionEncoding

B, T, D, LENGTH = 2, 4, 6, 9
POSITIONS = np.array([[0, 1, 2, 3], [5, 3, 8, 0]])  # per batch row, any order


def np_(x):
    return np.asarray(ops.convert_to_numpy(x), dtype="float32")


def sines(max_wavelength=10000, dtype=None):
    return (
        SinusoidalPositionEncoding(max_wavelength, dtype=dtype),
        keras_hub.layers.SinePositionEncoding(max_wavelength, dtype=dtype),
    )


def embeddings(dtype=None, seed=0):
    """Our layer and keras-hub's, holding the same random table."""
    ours = PositionEmbedding(LENGTH, dtype=dtype)
    hub = keras_hub.layers.PositionEmbedding(LENGTH, dtype=dtype)
    ours.build((B, T, D))
    hub.build((B, T, D))
    table = np.random.default_rng(seed).normal(size=(LENGTH, D)).astype("float32")
    hub.set_weights([table])
    ours.set_weights(hub.get_weights())
    return ours, hub


def calls():
    """Keyword arguments of the call forms both layers accept."""
    return {
        "default": {},
        "start_index": {"start_index": 3},
        "tensor start_index": {"start_index": ops.convert_to_tensor(5, "int32")},
        "positions (T,)": {"positions": np.array([4, 0, 7, 2])},
        "positions (B, T)": {"positions": POSITIONS},
        "tensor positions": {"positions": ops.convert_to_tensor(POSITIONS, "int32")},
    }


@pytest.mark.parametrize("call", list(calls()))
@pytest.mark.parametrize("layers", ["sine", "embedding"])
def test_values_match_keras_hub(layers, call):
    kwargs = calls()[call]
    x = np.random.default_rng(1).normal(size=(B, T, D)).astype("float32")
    ours, hub = sines(max_wavelength=300) if layers == "sine" else embeddings()
    out = np_(ours(x, **kwargs))
    assert out.shape == (B, T, D)
    np.testing.assert_allclose(out, np_(hub(x, **kwargs)), atol=1e-5)


def test_positions_equal_start_index_rows():
    """A row of `positions` equal to `start + arange(T)` is `start_index`."""
    x = np.zeros((B, T, D), "float32")
    positions = np.stack([np.arange(T), np.arange(T) + 5])
    for ours, hub in (sines(), embeddings()):
        for layer in (ours, hub):
            out = np_(layer(x, positions=positions))
            np.testing.assert_allclose(out[0], np_(layer(x))[0], atol=1e-6)
            np.testing.assert_allclose(
                out[1], np_(layer(x, start_index=5))[0], atol=1e-6
            )


def test_position_embedding_rows_are_table_rows():
    ours, hub = embeddings(seed=2)
    assert ours.position_embeddings is ours.embeddings  # keras-hub's name
    table = np_(hub.position_embeddings)
    np.testing.assert_array_equal(np_(ours.position_embeddings), table)
    x = np.zeros((B, T, D), "float32")
    np.testing.assert_array_equal(np_(ours(x, positions=POSITIONS)), table[POSITIONS])


@pytest.mark.parametrize("layers", ["sine", "embedding"])
def test_four_dimensional_inputs_match_keras_hub(layers):
    x = np.random.default_rng(3).normal(size=(1, B, T, D)).astype("float32")
    ours, hub = sines() if layers == "sine" else embeddings()
    for kwargs in ({}, {"start_index": 2}, {"positions": POSITIONS}):
        out = np_(ours(x, **kwargs))
        assert out.shape == (1, B, T, D)
        np.testing.assert_allclose(out, np_(hub(x, **kwargs)), atol=1e-5)


@pytest.mark.parametrize("layers", ["sine", "embedding"])
def test_mixed_float16_specs_match_keras_hub(layers):
    x = ops.convert_to_tensor(np.ones((B, T, D), "float32"))
    ours, hub = (
        sines(dtype="mixed_float16")
        if layers == "sine"
        else embeddings(dtype="mixed_float16")
    )
    for kwargs in ({}, {"positions": POSITIONS}):
        spec, hub_spec = (
            ours.compute_output_spec(x, **kwargs),
            hub.compute_output_spec(x, **kwargs),
        )
        assert (tuple(spec.shape), spec.dtype) == (tuple(hub_spec.shape), "float16")
        assert hub_spec.dtype == "float16"
        out, hub_out = ours(x, **kwargs), hub(x, **kwargs)
        assert keras.backend.standardize_dtype(out.dtype) == "float16"
        assert keras.backend.standardize_dtype(hub_out.dtype) == "float16"
        # keras-hub computes the sinusoid angles in float16, ours in float32.
        np.testing.assert_allclose(np_(out), np_(hub_out), atol=5e-3)
    assert ours.compute_output_shape((None, None, D)) == hub.compute_output_shape(
        (None, None, D)
    )


@pytest.mark.parametrize("layers", ["sine", "embedding"])
def test_positions_as_a_model_input_match_keras_hub(layers):
    """`positions` as a symbolic input of a functional model, then predict."""
    ours, hub = sines() if layers == "sine" else embeddings(seed=4)
    tokens = keras.Input((T, D))
    positions = keras.Input((T,), dtype="int32")
    outputs = [tokens + layer(tokens, positions=positions) for layer in (ours, hub)]
    assert [tuple(o.shape) for o in outputs] == [(None, T, D)] * 2
    model = keras.Model([tokens, positions], outputs)
    x = np.random.default_rng(5).normal(size=(B, T, D)).astype("float32")
    ours_out, hub_out = model.predict([x, POSITIONS], verbose=0)
    np.testing.assert_allclose(ours_out, hub_out, atol=1e-5)


@pytest.mark.parametrize("layers", ["sine", "embedding"])
def test_config_matches_keras_hub_and_round_trips(layers):
    ours, hub = sines(max_wavelength=77) if layers == "sine" else embeddings()
    config, hub_config = ours.get_config(), hub.get_config()
    config.pop("name"), hub_config.pop("name")
    assert config == hub_config
    revived = keras.saving.deserialize_keras_object(
        keras.saving.serialize_keras_object(ours)
    )
    assert type(revived) is type(ours)
    assert revived.get_config() == ours.get_config()
    # keras-hub's config builds our layer: a drop-in for from_config.
    assert type(ours).from_config(hub.get_config()).get_config() == hub.get_config()
