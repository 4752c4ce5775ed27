"""`ShowAttendTellBackbone`: named graph, step by step, config.

(Its forward on JAX: `tests/zoo/backends/test_backbones_on_jax.py`.)
"""

import keras
import numpy as np
import pytest

from zoo.show_attend_tell import ShowAttendTell, ShowAttendTellBackbone
from zoo.show_attend_tell.backbone import STATE_NAMES

CONFIG = dict(vocabulary_size=12, annotation_dim=8, embedding_dim=4, units=6, seed=0)


def inputs(seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, 12, size=(2, 5)).astype("int32")
    ids[1, 3:] = 0  # padding
    return {
        "images": rng.random((2, 84, 84, 1)).astype("float32"),
        "decoder_token_ids": ids,
    }


def test_named_inputs_and_outputs():
    backbone = ShowAttendTellBackbone(**CONFIG)
    assert sorted(backbone.input) == ["decoder_token_ids", "images"]
    outputs = backbone(inputs())
    shapes = {name: tuple(value.shape) for name, value in outputs.items()}
    assert shapes == {
        "word_embeddings": (2, 5, 4),
        "hidden_states": (2, 5, 6),
        "contexts": (2, 5, 8),
        "coverage": (2, 49),
        "log_prob": (2, 1),
        "entropy": (2, 1),
    }
    # Soft attention sums to one per real step: coverage = real steps.
    np.testing.assert_allclose(
        np.asarray(outputs["coverage"]).sum(-1), [5.0, 3.0], rtol=1e-5
    )


def test_step_by_step_equals_the_graph():
    backbone = ShowAttendTellBackbone(**CONFIG)
    x = inputs(1)
    outputs = backbone(x)
    state = backbone.initial_state(x["images"])
    assert set(state) == set(STATE_NAMES)
    for t in range(3):  # real steps of both rows
        _, hidden, context, state = backbone.step(x["decoder_token_ids"][:, t], state)
        np.testing.assert_allclose(
            hidden, outputs["hidden_states"][:, t], rtol=1e-5, atol=1e-6
        )
        np.testing.assert_allclose(
            context, outputs["contexts"][:, t], rtol=1e-5, atol=1e-6
        )


def test_config_round_trip_with_dtype():
    backbone = ShowAttendTellBackbone(**CONFIG, dtype="mixed_bfloat16")
    config = backbone.get_config()
    assert config["dtype"]["config"]["name"] == "mixed_bfloat16"
    restored = ShowAttendTellBackbone.from_config(config)
    assert restored.dtype_policy.name == "mixed_bfloat16"
    assert restored.get_config() == config
    restored = keras.saving.deserialize_keras_object(
        keras.saving.serialize_keras_object(backbone)
    )
    assert isinstance(restored, ShowAttendTellBackbone)
    with pytest.raises(ValueError, match="encoder weights"):
        ShowAttendTellBackbone.from_config({**config, "encoder_weights": "imagenet"})


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"units": 0}, "units"),
        ({"image_shape": (84, 84)}, "image_shape"),
        ({"encoder": "NoSuchNet"}, "NoSuchNet"),
        ({"attention": "medium"}, "attention"),
        ({"feedback": "nothing"}, "feedback"),
    ],
)
def test_invalid_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ShowAttendTellBackbone(**{**CONFIG, **kwargs})


# The forward pass on JAX (`tests/zoo/backends/test_backbones_on_jax.py`, one JAX
# process for every zoo backbone): name -> () -> (backbone with weights no
# fresh one has, inputs, output to sample with `training=True` or None,
# tolerance of `assert_allclose`).


def _jax_case(**options):
    backbone = ShowAttendTellBackbone(**CONFIG, **options)
    rng = np.random.default_rng(3)
    for variable in backbone.trainable_weights:  # weights no fresh model has
        variable.assign(rng.normal(0, 0.3, variable.shape).astype("float32"))
    sampled = "log_prob" if options.get("attention") == "hard" else None
    return backbone, inputs(2), sampled, {"rtol": 1e-4, "atol": 1e-5}


JAX_CASES = {
    "show_attend_tell_soft": lambda: _jax_case(feedback="weights"),
    "show_attend_tell_hard": lambda: _jax_case(attention="hard"),
}


# `test_task_backbone.py`: the task built from its arguments or a backbone.
TASK_IDS = np.array([[4, 5, 3, 0], [6, 3, 0, 0]], "int32")
TASK_CASES = {
    "show_attend_tell": (
        ShowAttendTell,
        dict(vocabulary_size=10, image_shape=(32, 32, 1), units=6, seed=1),
        ShowAttendTellBackbone,
        dict(vocabulary_size=10, image_shape=(32, 32, 1), units=6, seed=1),
        {
            "images": np.random.default_rng(0)
            .uniform(size=(2, 32, 32, 1))
            .astype("float32"),
            "decoder_token_ids": TASK_IDS,
        },
        {"dropout": 0.0},
    ),
}
