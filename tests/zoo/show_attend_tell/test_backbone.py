"""`ShowAttendTellBackbone`: named graph, config, and the same forward on JAX."""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from zoo.show_attend_tell import ShowAttendTellBackbone
from zoo.show_attend_tell.backbone import STATE_NAMES

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
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


JAX_SCRIPT = """
import json
import sys
import numpy as np
import keras
assert keras.backend.backend() == "jax", keras.backend.backend()
from zoo.show_attend_tell import ShowAttendTellBackbone
data = np.load(sys.argv[1])
backbone = ShowAttendTellBackbone(**json.loads(sys.argv[4]))
backbone.load_weights(sys.argv[2])
x = {"images": data["images"], "decoder_token_ids": data["ids"]}
outputs = backbone(x)
np.savez(sys.argv[3], **{k: np.asarray(v) for k, v in outputs.items()})
if backbone.attention == "hard":  # sampling runs too
    sampled = backbone(x, training=True)
    assert np.isfinite(np.asarray(sampled["log_prob"])).all()
"""


@pytest.mark.parametrize(
    "options", [{"feedback": "weights"}, {"attention": "hard"}], ids=str
)
def test_forward_on_jax_equals_this_backend(tmp_path, options):
    """The backbone's math is `keras.ops` only: JAX gives the same outputs,
    padded steps included (they repeat the last real output on both)."""
    config = {**CONFIG, **options}
    backbone = ShowAttendTellBackbone(**config)
    x = inputs(2)
    rng = np.random.default_rng(3)
    for variable in backbone.trainable_weights:  # weights no fresh model has
        variable.assign(rng.normal(0, 0.3, variable.shape).astype("float32"))
    expected = {k: np.asarray(v) for k, v in backbone(x).items()}
    backbone.save_weights(str(tmp_path / "backbone.weights.h5"))
    np.savez(tmp_path / "inputs.npz", images=x["images"], ids=x["decoder_token_ids"])
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            JAX_SCRIPT,
            str(tmp_path / "inputs.npz"),
            str(tmp_path / "backbone.weights.h5"),
            str(tmp_path / "jax.npz"),
            json.dumps(config),
        ],
        env={**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu"},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    got = np.load(tmp_path / "jax.npz")
    assert set(got) == set(expected)
    for name, value in expected.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-4, atol=1e-5, err_msg=name)
    # The padded steps of row 1 repeat its last real step.
    for name in ("hidden_states", "contexts"):
        np.testing.assert_array_equal(got[name][1, 3:], got[name][1, 2:3].repeat(2, 0))
