"""RecurrentAttentionBackbone: a functional graph that runs on any backend."""

import json
import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest

from zoo.ram import RecurrentAttentionBackbone

RNG = np.random.default_rng(0)
TINY = dict(
    num_classes=3,
    num_glimpses=3,
    patch_size=4,
    num_scales=2,
    glimpse_units=4,
    location_units=4,
    glimpse_output_units=8,
    units=8,
    cell="lstm",
    seed=0,
)


def test_named_input_and_dict_of_outputs():
    backbone = RecurrentAttentionBackbone(**TINY)
    assert [t.name for t in backbone.inputs] == ["images"]
    assert tuple(backbone.inputs[0].shape) == (None, None, None, 1)
    symbolic = backbone(keras.Input((None, None, 1), name="images"))
    shapes = {k: tuple(v.shape) for k, v in symbolic.items()}
    assert shapes == {
        "logits": (None, 3),
        "locations": (None, 3, 2),
        "log_probs": (None, 2),
        "baselines": (None, 2),
    }
    images = RNG.uniform(size=(2, 20, 24, 1)).astype("float32")
    by_name = backbone({"images": images})
    by_tensor = backbone(images)
    np.testing.assert_allclose(by_name["logits"], by_tensor["logits"])
    np.testing.assert_array_equal(by_tensor["locations"][:, 0], np.zeros((2, 2)))


def test_integer_images_are_read_as_0_to_255():
    backbone = RecurrentAttentionBackbone(**TINY)
    pixels = RNG.integers(0, 256, (2, 16, 16, 1), dtype="uint8")
    from_uint8 = backbone(pixels)["logits"]
    from_float = backbone(pixels.astype("float32") / 255.0)["logits"]
    np.testing.assert_allclose(from_uint8, from_float, rtol=1e-5, atol=1e-6)


def test_config_round_trip_with_dtype():
    backbone = RecurrentAttentionBackbone(dtype="mixed_bfloat16", **TINY)
    assert backbone.dtype_policy.name == "mixed_bfloat16"
    config = backbone.get_config()
    clone = RecurrentAttentionBackbone.from_config(config)
    assert clone.dtype_policy.name == "mixed_bfloat16"
    assert clone.recurrent_attention.dtype_policy.name == "mixed_bfloat16"
    assert clone.get_config() == config
    again = keras.saving.deserialize_keras_object(
        keras.saving.serialize_keras_object(backbone)
    )
    assert isinstance(again, RecurrentAttentionBackbone)


def test_bad_channels():
    with pytest.raises(ValueError, match="channels"):
        RecurrentAttentionBackbone(channels=2)


JAX_FORWARD = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import keras
    assert keras.backend.backend() == "jax", keras.backend.backend()
    from zoo.ram import RecurrentAttentionBackbone
    options, weights, images, out = json.loads(sys.argv[1])
    backbone = RecurrentAttentionBackbone(**options)
    backbone.load_weights(weights)
    images = np.load(images)
    result = backbone({"images": images})
    np.savez(out, **{k: np.asarray(v) for k, v in result.items()})
    sampled = backbone(images, training=True)["locations"]
    assert np.isfinite(np.asarray(sampled)).all()
    """
)


@pytest.mark.tensorflow_only
@pytest.mark.slow
def test_forward_on_jax_matches_tensorflow(tmp_path):
    """The same weights give the same outputs on the JAX backend."""
    backbone = RecurrentAttentionBackbone(**TINY)
    images = RNG.integers(0, 256, (3, 21, 17, 1), dtype="uint8")
    expected = backbone(images)
    weights = str(tmp_path / "backbone.weights.h5")
    backbone.save_weights(weights)
    np.save(tmp_path / "images.npy", images)
    out = str(tmp_path / "jax.npz")
    arguments = json.dumps([TINY, weights, str(tmp_path / "images.npy"), out])
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu")
    done = subprocess.run(
        [sys.executable, "-c", JAX_FORWARD, arguments],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = np.load(out)
    assert sorted(found) == sorted(expected)
    for key, value in expected.items():
        np.testing.assert_allclose(found[key], np.asarray(value), atol=1e-5)
