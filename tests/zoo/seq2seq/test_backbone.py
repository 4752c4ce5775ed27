"""`Seq2SeqBackbone`: named inputs and outputs, config, masks, `Maxout`.

(Its forward on JAX: `tests/zoo/backends/test_backbones_on_jax.py`.)
"""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from zoo.seq2seq import Maxout, Seq2Seq, Seq2SeqBackbone

ENCODER_IDS = np.array([[4, 5, 6, 3, 0], [7, 3, 0, 0, 0]], "int32")
DECODER_IDS = np.array([[2, 8, 9, 10], [2, 11, 0, 0]], "int32")
CONFIG = dict(
    source_vocabulary_size=12,
    target_vocabulary_size=14,
    embedding_dim=6,
    units=5,
    cell="gru",
    dropout=0.0,
)


def backbone(seed=0, **kwargs):
    keras.utils.set_random_seed(seed)
    return Seq2SeqBackbone(**{**CONFIG, **kwargs})


def outputs(model):
    result = model({"encoder_token_ids": ENCODER_IDS, "decoder_token_ids": DECODER_IDS})
    return {k: keras.ops.convert_to_numpy(v) for k, v in result.items()}


def test_named_inputs_and_outputs():
    model = backbone()
    assert sorted(model.input) == ["decoder_token_ids", "encoder_token_ids"]
    result = outputs(model)
    assert sorted(result) == ["decoder_sequence_output", "encoder_sequence_output"]
    assert result["encoder_sequence_output"].shape == (2, 5, 10)  # 2 directions
    assert result["decoder_sequence_output"].shape == (2, 4, 6)
    assert np.isfinite(result["decoder_sequence_output"]).all()


def test_encoder_output_ignores_source_padding():
    model = backbone(bidirectional=False)
    short = model(
        {
            "encoder_token_ids": ENCODER_IDS[1:, :2],
            "decoder_token_ids": DECODER_IDS[1:, :2],
        }
    )
    long = outputs(model)
    # More padding columns on the source change nothing on the target side.
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(short["decoder_sequence_output"]),
        long["decoder_sequence_output"][1:, :2],
        rtol=1e-5,
        atol=1e-6,
    )


@pytest.mark.parametrize("dtype", [None, "mixed_bfloat16"])
def test_config_round_trip_keeps_every_argument_and_the_dtype(dtype):
    model = backbone(style="luong", score="general", encoder_layers=2, dtype=dtype)
    config = model.get_config()
    for name, value in CONFIG.items():
        assert config[name] == value
    rebuilt = Seq2SeqBackbone.from_config(config)
    assert rebuilt.get_config() == config
    assert rebuilt.count_params() == model.count_params()
    assert rebuilt.dtype_policy.name == (dtype or "float32")
    json.dumps(config)  # serializable as it is


def test_runs_forward_on_the_current_backend():
    # Under `KERAS_BACKEND=jax pytest ...` this is the JAX forward pass.
    model = backbone()
    model.set_weights([np.full(w.shape, 0.1, "float32") for w in model.get_weights()])
    result = outputs(model)
    assert np.isfinite(result["decoder_sequence_output"]).all()


@pytest.mark.parametrize(
    "kwargs, name, error",
    [
        ({"source_vocabulary_size": 0}, "source_vocabulary_size", ValueError),
        ({"units": True}, "units", TypeError),
        ({"cell": "rnn"}, "cell", ValueError),
        ({"dropout": 1.0}, "dropout", ValueError),
    ],
)
def test_bad_arguments_name_the_argument(kwargs, name, error):
    with pytest.raises(error, match=f"{name}=") as info:
        Seq2SeqBackbone(**{**CONFIG, **kwargs})
    assert repr(kwargs[name]) in str(info.value)


@pytest.mark.tensorflow_only
def test_maxout_deep_output_matches_numpy_and_passes_gradients():

    layer = Maxout(3, pool_size=2)
    x = np.random.default_rng(0).normal(size=(2, 4, 5)).astype("float32")
    out = keras.ops.convert_to_numpy(layer(x))
    kernel, bias = (keras.ops.convert_to_numpy(w) for w in layer.dense.weights)
    expected = (x @ kernel + bias).reshape(2, 4, 3, 2).max(-1)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)
    # Large inputs do not saturate it (a tanh readout did): gradients stay.
    big = tf.constant(x * 100.0)
    with tf.GradientTape() as tape:
        tape.watch(big)
        y = tf.reduce_sum(layer(big))
    assert float(tf.reduce_sum(tf.abs(tape.gradient(y, big)))) > 0.0
    clone = Maxout.from_config(layer.get_config())
    assert clone.units == 3 and clone.pool_size == 2


# The forward pass on JAX (`tests/zoo/backends/test_backbones_on_jax.py`, one JAX
# process for every zoo backbone): name -> () -> (backbone with weights no
# fresh one has, inputs, output to sample with `training=True` or None,
# tolerance of `assert_allclose`).


def _jax_case():
    model = backbone()
    rng = np.random.default_rng(0)
    model.set_weights([rng.normal(0, 0.5, w.shape) for w in model.weights])
    x = {"encoder_token_ids": ENCODER_IDS, "decoder_token_ids": DECODER_IDS}
    return model, x, None, {"rtol": 1e-4, "atol": 1e-5}


JAX_CASES = {"seq2seq": _jax_case}


# `test_task_backbone.py`: the task built from its arguments or a backbone.
TASK_IDS = np.array([[4, 5, 3, 0], [6, 3, 0, 0]], "int32")
TASK_CASES = {
    "seq2seq": (
        Seq2Seq,
        dict(source_vocabulary_size=10, target_vocabulary_size=12, units=3),
        Seq2SeqBackbone,
        dict(source_vocabulary_size=10, target_vocabulary_size=12, units=3),
        {"encoder_token_ids": TASK_IDS, "decoder_token_ids": TASK_IDS},
        {},
    ),
}
