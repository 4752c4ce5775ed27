"""AttentionDecoderCell: Bahdanau/Luong steps, masks, RNN use, serialization."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_attention.layers import AttentionDecoder, AttentionDecoderCell

RNG = np.random.default_rng(0)
MEMORY = RNG.normal(size=(2, 5, 6)).astype("float32")
MASK = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], bool)
INPUTS = RNG.normal(size=(2, 4, 3)).astype("float32")


def np_(x):
    return ops.convert_to_numpy(x)


def softmax(x, mask):
    x = np.where(mask, x, -np.inf)
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def lstm_step(cell, x, h, c):
    kernel, recurrent, bias = (np_(w) for w in cell.weights)
    z = x @ kernel + h @ recurrent + bias
    i, f, g, o = np.split(z, 4, axis=-1)
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    c = sig(f) * c + sig(i) * np.tanh(g)
    return sig(o) * np.tanh(c), c


def general_context(score, query, memory, mask):
    logits = np.einsum("bd,de,bve->bv", query, np_(score.kernel), memory)
    weights = softmax(logits, mask)
    return np.einsum("bv,bvd->bd", weights, memory), weights


@pytest.mark.parametrize("style", ["bahdanau", "luong"])
def test_one_step_matches_numpy(style):
    cell = AttentionDecoderCell(4, memory_dim=6, style=style, score="general")
    states = cell.initial_state(MEMORY, MASK)
    cell.build((2, 3))
    output, new_states = cell(INPUTS[:, 0], states)
    h0 = np.zeros((2, 4), "float32")
    score = cell.attention.score_layer
    if style == "bahdanau":
        context, weights = general_context(score, h0, MEMORY, MASK)
        h, _ = lstm_step(
            cell.rnn_cell, np.concatenate([INPUTS[:, 0], context], -1), h0, h0
        )
        expected = np.concatenate([h, context], -1)
    else:
        x = np.concatenate([INPUTS[:, 0], np.zeros((2, 4), "float32")], -1)
        h, _ = lstm_step(cell.rnn_cell, x, h0, h0)
        context, weights = general_context(score, h, MEMORY, MASK)
        w_c = np_(cell.combine.kernel)
        expected = np.tanh(np.concatenate([context, h], -1) @ w_c)
    np.testing.assert_allclose(np_(output), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np_(new_states[-2]), weights, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(np_(new_states[-2])[~MASK], 0.0)
    named = cell.named_states(new_states)
    np.testing.assert_array_equal(np_(named["memory"]), MEMORY)  # unchanged
    np.testing.assert_array_equal(np_(named["output"]), np_(output))


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(style="bahdanau", score="additive", cell="gru"),
        dict(style="luong", score="dot"),
        dict(style="luong", score="concat", window=1),
        dict(style="luong", score="general", window=1, local="predictive"),
    ],
)
def test_rnn_over_sequence_equals_step_loop(kwargs):
    cell = AttentionDecoderCell(6, memory_dim=6, **kwargs)
    decoder = AttentionDecoder(cell, return_state=True)
    outputs, *final = decoder(INPUTS, MEMORY, memory_mask=MASK)
    states = cell.initial_state(MEMORY, MASK)
    coverage = 0.0
    for t in range(INPUTS.shape[1]):
        step_out, states = cell(INPUTS[:, t], states)
        np.testing.assert_allclose(np_(outputs[:, t]), np_(step_out), atol=1e-5)
        weights = np_(states[-2])
        if kwargs.get("local") != "predictive":  # local-p is not renormalised
            np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=1e-5)
        assert np.all(weights[~MASK] == 0.0)
        coverage = coverage + weights
    np.testing.assert_allclose(np_(final[-1]), coverage, atol=1e-5)


def test_local_monotonic_window_follows_the_step():
    cell = AttentionDecoderCell(6, memory_dim=6, style="luong", score="dot", window=1)
    states = cell.initial_state(MEMORY)
    x = np.zeros((2, 3), "float32")
    for t in range(4):
        _, states = cell(x, states)
        weights = np_(states[-2])
        outside = np.abs(np.arange(5) - t) > 1
        assert np.all(weights[:, outside] == 0.0), t


def test_saves_inside_a_model(tmp_path):
    memory = keras.Input((5, 6))
    inputs = keras.Input((4, 3))
    cell = AttentionDecoderCell(4, memory_dim=6, style="luong", score="additive")
    model = keras.Model([inputs, memory], AttentionDecoder(cell)(inputs, memory))
    expected = model.predict([INPUTS, MEMORY], verbose=0)
    # Training changes every weight, including the score's key projection,
    # and the reloaded model must use the trained values.
    model.compile("sgd", "mse")
    model.fit([INPUTS, MEMORY], np.ones_like(expected), epochs=1, verbose=0)
    trained = model.predict([INPUTS, MEMORY], verbose=0)
    assert not np.allclose(trained, expected)
    model.save(tmp_path / "m.keras")
    loaded = keras.saving.load_model(tmp_path / "m.keras")
    out = loaded.predict([INPUTS, MEMORY], verbose=0)
    np.testing.assert_allclose(out, trained, atol=1e-6)


@pytest.mark.tensorflow_only
def test_gradients_reach_every_weight_in_a_functional_model():
    import tensorflow as tf

    inputs = keras.Input((None, 3))
    memory = keras.Input((None, 6))
    cell = AttentionDecoderCell(4, memory_dim=6, score="additive")
    model = keras.Model([inputs, memory], AttentionDecoder(cell)(inputs, memory))
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(model([INPUTS, MEMORY]) ** 2)
    grads = tape.gradient(loss, model.trainable_variables)
    names = [v.path for v, g in zip(model.trainable_variables, grads) if g is None]
    assert names == []
    assert any("key_kernel" in v.path for v in model.trainable_variables)


def test_initial_state_refuses_symbolic_memory():
    cell = AttentionDecoderCell(4, memory_dim=6)
    with pytest.raises(ValueError, match="AttentionDecoder"):
        cell.initial_state(keras.Input((5, 6)))


def test_decoder_checks_memory_dim():
    decoder = AttentionDecoder(AttentionDecoderCell(4, memory_dim=6))
    with pytest.raises(ValueError, match="memory_dim=6"):
        decoder(INPUTS, np.zeros((2, 5, 7), "float32"))


def test_mixed_precision_is_finite():
    keras.config.set_dtype_policy("mixed_float16")
    cell = AttentionDecoderCell(4, memory_dim=6, score="additive")
    out = np_(AttentionDecoder(cell)(INPUTS, MEMORY, memory_mask=MASK))
    assert out.dtype == np.float16 and np.all(np.isfinite(out))


def test_bad_arguments():
    with pytest.raises(ValueError, match="units=0"):
        AttentionDecoderCell(0, memory_dim=3)
    with pytest.raises(ValueError, match="style='vaswani'"):
        AttentionDecoderCell(3, memory_dim=3, style="vaswani")
    with pytest.raises(ValueError, match="cell='rnn'"):
        AttentionDecoderCell(3, memory_dim=3, cell="rnn")
    cell = AttentionDecoderCell(3, memory_dim=6)
    with pytest.raises(ValueError, match="2 states. Received: 1"):
        cell.initial_state(MEMORY, cell_states=[np.zeros((2, 3))])


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_states_are_2d_and_the_previous_output_comes_first(kind):
    # Keras's JAX RNN skips a padded step with one (B, 1) mask over every
    # state and repeats `states[0]` as the output: the layout it needs.
    cell = AttentionDecoderCell(4, memory_dim=6, cell=kind, score="additive")
    states = cell.initial_state(MEMORY, MASK)
    assert len(states) == len(cell.state_names) == len(cell.state_size)
    assert cell.state_names[0] == "output"
    assert [tuple(s.shape) for s in states] == [
        (2, 10),
        *[(2, 4)] * cell.num_cell_states,
        (2, 5 * 6),
        (2, 5 * 6),  # the additive score's keys, units=None: the memory's 6
        (2, 5),
        (2, 1),
        (2, 5),
        (2, 5),
    ]
    np.testing.assert_array_equal(np_(states[0]), 0.0)
    output, new_states = cell(INPUTS[:, 0], states)
    assert [tuple(s.shape) for s in new_states] == [tuple(s.shape) for s in states]
    named = cell.named_states(new_states)
    np.testing.assert_array_equal(np_(new_states[0]), np_(output))
    np.testing.assert_array_equal(np_(named["memory"]), MEMORY)
    score = cell.attention.score_layer
    np.testing.assert_allclose(
        np_(named["keys"]), np_(score.project_key(MEMORY)), rtol=1e-6, atol=1e-6
    )
    np.testing.assert_array_equal(np_(named["memory_mask"]), MASK)
    np.testing.assert_array_equal(np_(named["step"]), 1.0)
    assert named["weights"] is cell.attention_weights(new_states)


@pytest.mark.parametrize("style", ["bahdanau", "luong"])
def test_padded_steps_keep_the_state_and_repeat_the_output(style):
    # Reference: a step loop that skips padded steps by hand, holding the
    # states and repeating the previous output (zeros before any step).
    steps = np.array([[1, 1, 0, 0], [0, 1, 1, 0]], bool)
    cell = AttentionDecoderCell(4, memory_dim=6, style=style, score="general")
    decoder = AttentionDecoder(cell, return_state=True)
    outputs, *final = decoder(INPUTS, MEMORY, inputs_mask=steps, memory_mask=MASK)
    states = [np_(s) for s in cell.initial_state(MEMORY, MASK)]
    previous = np.zeros((2, cell.output_size), "float32")
    for t in range(INPUTS.shape[1]):
        step_out, new_states = cell(INPUTS[:, t], states)
        keep = steps[:, t : t + 1]
        previous = np.where(keep, np_(step_out), previous)
        states = [np.where(keep, np_(n), s) for n, s in zip(new_states, states)]
        np.testing.assert_allclose(np_(outputs[:, t]), previous, atol=1e-5)
    for got, expected in zip(final, states, strict=True):
        np.testing.assert_allclose(np_(got), expected, atol=1e-5)
    np.testing.assert_array_equal(np_(final[cell.state_names.index("step")]), 2.0)
