"""`keras_attention.scores.get` and serialization of every score."""

import keras
import numpy as np
import pytest

from keras_attention import scores

ALIAS_CLASSES = {
    "dot": scores.Dot,
    "scaled_dot": scores.ScaledDot,
    "general": scores.General,
    "luong": scores.General,
    "multiplicative": scores.General,
    "additive": scores.Additive,
    "bahdanau": scores.Additive,
    "concat": scores.Concat,
    "perceptron": scores.Perceptron,
    "cosine": scores.Cosine,
    "content": scores.Cosine,
    "location": scores.Location,
}


@pytest.mark.parametrize("name,cls", sorted(ALIAS_CLASSES.items()))
def test_get_by_name(name, cls):
    layer = scores.get(name)
    assert type(layer) is cls
    assert type(scores.get(name.upper())) is cls


def test_get_returns_instances_unchanged():
    layer = scores.Additive(3)
    assert scores.get(layer) is layer


def test_get_from_short_config():
    layer = scores.get({"class_name": "location", "config": {"max_length": 9}})
    assert isinstance(layer, scores.Location) and layer.max_length == 9


def test_unknown_name_lists_valid_names():
    with pytest.raises(
        ValueError, match="Unknown score 'bilinear'.*additive, bahdanau"
    ):
        scores.get("bilinear")


def test_get_rejects_other_types():
    with pytest.raises(ValueError, match="score=3"):
        scores.get(3)


@pytest.mark.parametrize(
    "layer",
    [
        scores.Dot(),
        scores.ScaledDot(),
        scores.General(),
        scores.Additive(5, use_bias=True),
        scores.Perceptron(4),
        scores.Concat(),
        scores.Concat(units=3),
        scores.Cosine(epsilon=1e-4),
        scores.Location(max_length=7),
    ],
    ids=lambda layer: type(layer).__name__,
)
def test_serialize_round_trip_keeps_outputs(layer):
    rng = np.random.default_rng(1)
    q = rng.normal(size=(2, 3, 4)).astype("float32")
    k = rng.normal(size=(2, 5, 4)).astype("float32")
    expected = layer(q, k)
    clone = scores.get(scores.serialize(layer))
    assert type(clone) is type(layer)
    assert clone.get_config() == layer.get_config()
    clone(q, k)
    clone.set_weights(layer.get_weights())
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(clone(q, k)),
        keras.ops.convert_to_numpy(expected),
        rtol=1e-6,
    )


def test_scores_save_inside_a_model(tmp_path):
    q = keras.Input((3, 4))
    k = keras.Input((5, 6))
    out = scores.Additive(8)(q, k)
    model = keras.Model([q, k], out)
    rng = np.random.default_rng(2)
    x = [rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 5, 6))]
    path = tmp_path / "m.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    np.testing.assert_allclose(
        loaded.predict(x, verbose=0), model.predict(x, verbose=0)
    )
