"""RecurrentAttentionBackbone: a functional graph that runs on any backend.

(Its forward on JAX: `tests/zoo/backends/test_backbones_on_jax.py`.)
"""

import keras
import numpy as np
import pytest

from zoo.ram import RecurrentAttentionBackbone, RecurrentAttentionModel

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


# The forward pass on JAX (`tests/zoo/backends/test_backbones_on_jax.py`, one JAX
# process for every zoo backbone): name -> () -> (backbone with weights no
# fresh one has, inputs, output to sample with `training=True` or None,
# tolerance of `assert_allclose`).


def _jax_case():
    backbone = RecurrentAttentionBackbone(**TINY)
    images = np.random.default_rng(0).integers(0, 256, (3, 21, 17, 1), dtype="uint8")
    return backbone, {"images": images}, "locations", {"atol": 1e-5}


JAX_CASES = {"ram": _jax_case}


# `test_task_backbone.py`: the task built from its arguments or a backbone.
TASK_CASES = {
    "ram": (
        RecurrentAttentionModel,
        dict(num_classes=3, num_glimpses=2, patch_size=4, units=8, seed=1),
        RecurrentAttentionBackbone,
        dict(num_classes=3, num_glimpses=2, patch_size=4, units=8, seed=1),
        np.random.default_rng(1).uniform(size=(2, 16, 16, 1)).astype("float32"),
        {},
    ),
}
