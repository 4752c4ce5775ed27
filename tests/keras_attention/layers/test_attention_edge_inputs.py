"""`Attention` on empty inputs: no value position (`Tv = 0`), no query.

A row with nothing to attend to gives a zero context in soft attention; hard
attention gives the same (it used to fail inside `argmax` / sampling).
"""

import importlib.util
import os

import keras
import numpy as np
import pytest
from keras import ops

from keras_attention.layers import Attention

_spec = importlib.util.spec_from_file_location(
    "gradients", os.path.join(os.path.dirname(__file__), "..", "gradients.py")
)
gradients = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gradients)

MODES = [
    {"mode": "soft"},
    {"mode": "hard"},
    {"mode": "hard", "hard_estimator": "gumbel"},
    {"mode": "hard", "window": 1},
    {"mode": "hard", "window": 1, "local": "predictive"},
    {"mode": "soft", "window": 1, "local": "predictive"},
]


def empty_value(batch=2, dim=4):
    return np.zeros((batch, 0, dim), "float32")


@pytest.mark.parametrize("training", [False, True])
@pytest.mark.parametrize("kwargs", MODES)
def test_no_value_position_gives_zero_context(kwargs, training):
    rng = np.random.default_rng(0)
    query = rng.normal(size=(2, 3, 4)).astype("float32")
    layer = Attention(score="general", seed=1, **kwargs)
    outputs = layer(
        query,
        empty_value(dim=5),
        return_attention_scores=True,
        return_distribution=True,
        training=training,
    )
    context, weights, distribution = map(ops.convert_to_numpy, outputs)
    np.testing.assert_array_equal(context, np.zeros((2, 3, 5)))
    assert weights.shape == (2, 3, 0) and distribution.shape == (2, 3, 0)


@pytest.mark.parametrize("training", [False, True])
@pytest.mark.parametrize("estimator", ["reinforce", "gumbel"])
def test_hard_mode_with_no_value_position_has_log_prob_zero(estimator, training):
    query = np.ones((2, 3, 4), "float32")
    value_mask = np.zeros((2, 0), bool)
    layer = Attention(score="dot", mode="hard", hard_estimator=estimator, seed=2)
    context, log_prob = layer(
        query,
        empty_value(),
        value_mask=value_mask,
        return_log_prob=True,
        training=training,
    )
    np.testing.assert_array_equal(ops.convert_to_numpy(context), 0.0)
    np.testing.assert_array_equal(ops.convert_to_numpy(log_prob), np.zeros((2, 3)))


@pytest.mark.parametrize("mode", ["soft", "hard"])
def test_keras_list_call_with_no_value_position(mode):
    query = np.ones((1, 2, 4), "float32")
    mask = [np.array([[True, False]]), np.zeros((1, 0), bool)]
    context = Attention(score_mode="dot", mode=mode)([query, empty_value(1)], mask=mask)
    np.testing.assert_array_equal(ops.convert_to_numpy(context), np.zeros((1, 2, 4)))


def test_hard_gradients_with_no_value_position_are_zero():
    """REINFORCE trains the score through `log_prob`: its gradient exists and
    is zero when there was nothing to select."""
    query = np.ones((2, 3, 4), "float32")
    layer = Attention(score="general", mode="hard", seed=3)
    layer(query, empty_value())
    _, grads = gradients.value_and_gradients(
        layer,
        [query, empty_value()],
        lambda outputs: ops.sum(outputs[1]),  # the log-probabilities
        {"return_log_prob": True, "training": True},
        unconnected_as_zeros=False,
    )
    grads = grads[:1] + grads[2:]  # the empty value has an empty gradient
    assert len(grads) == 2  # the query and the `general` kernel
    for grad in grads:
        assert grad is not None
        np.testing.assert_array_equal(grad, 0.0)


@pytest.mark.tensorflow_only
@pytest.mark.parametrize("estimator", ["reinforce", "gumbel"])
@pytest.mark.parametrize("training", [False, True])
def test_hard_mode_with_value_length_known_only_at_run_time(estimator, training):
    """In a `tf.function` traced for any length (as Keras retraces `fit` and
    `predict`), `Tv = 0` is known only when the graph runs."""
    import tensorflow as tf

    layer = Attention(score="dot", mode="hard", hard_estimator=estimator, seed=4)
    spec = tf.TensorSpec((None, None, 4), "float32")

    @tf.function(input_signature=[spec, spec])
    def attend(query, value):
        return layer(query, value, return_log_prob=True, training=training)

    query = np.ones((2, 3, 4), "float32")
    context, log_prob = attend(query, empty_value())
    np.testing.assert_array_equal(context.numpy(), 0.0)
    np.testing.assert_array_equal(log_prob.numpy(), 0.0)
    # The same graph still selects one position when there are some.
    value = np.arange(2 * 5 * 4, dtype="float32").reshape(2, 5, 4)
    context, _ = attend(query, value)
    rows = context.numpy().reshape(-1, 4)
    assert all(
        any(np.array_equal(row, v) for v in value.reshape(-1, 4)) for row in rows
    )


@pytest.mark.parametrize("kwargs", MODES[:3])
def test_no_query_gives_an_empty_context(kwargs):
    value = np.ones((2, 5, 4), "float32")
    context, weights = Attention(score="dot", seed=5, **kwargs)(
        np.zeros((2, 0, 4), "float32"), value, return_attention_scores=True
    )
    assert tuple(context.shape) == (2, 0, 4) and tuple(weights.shape) == (2, 0, 5)


@pytest.mark.parametrize("dtype", ["int32", "bool"])
@pytest.mark.parametrize("call", ["tensor", "list", "value_only"])
def test_non_float_inputs_raise_naming_the_argument(dtype, call):
    floats = np.ones((2, 3, 4), "float32")
    other = floats.astype(dtype)
    layer = Attention()
    with pytest.raises(
        TypeError, match=f"{'value' if call == 'value_only' else 'query'}.dtype={dtype}"
    ):
        if call == "tensor":
            layer(other, other)
        elif call == "list":
            layer([other, other])
        else:
            layer(floats, other)


def test_int_inputs_keras_attention_never_gives_an_int_result_either():
    """Keras's layer on the same int32 inputs: it fails (TensorFlow's
    softmax) or computes in float (JAX, PyTorch); ours raises instead of
    returning an int32 context of truncated weights."""
    x = np.ones((2, 3, 4), "int32")
    try:
        theirs = keras.layers.Attention()([x, x])
    except Exception:
        theirs = None
    if theirs is not None:
        assert keras.backend.is_float_dtype(
            keras.backend.standardize_dtype(theirs.dtype)
        )
    with pytest.raises(TypeError, match="query.dtype=int32"):
        Attention()([x, x])
    symbolic = keras.Input((3, 4), dtype="int32")
    with pytest.raises(TypeError, match="query.dtype=int32"):
        Attention()(symbolic, symbolic)
