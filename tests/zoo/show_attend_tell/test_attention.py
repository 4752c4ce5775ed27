"""The attentive LSTM cell, the doubly stochastic term and REINFORCE."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from zoo.show_attend_tell import CaptionPreprocessor, ShowAttendTell
from zoo.show_attend_tell.decoder import ShowAttendTellCell, ShowAttendTellDecoder
from zoo.show_attend_tell.losses import (
    caption_labels,
    caption_log_likelihood,
    doubly_stochastic_penalty,
)

pytestmark = pytest.mark.tensorflow_only

VOCAB = ["[PAD]", "[UNK]", "[START]", "[END]", "a", "bag", "coat", "above", "below"]
CAPTIONS = ["a bag above a coat", "a coat", "a bag below a coat", "a bag"]


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def cell_and_states(attention="soft", seed=0, batch=3, locations=9):
    keras.utils.set_random_seed(seed)
    cell = ShowAttendTellCell(6, annotation_dim=5, attention=attention, seed=seed)
    annotations = np.random.default_rng(seed).normal(size=(batch, locations, 5))
    states = cell.initial_state(annotations.astype("float32"))
    return cell, annotations, states


def test_soft_weights_sum_to_one_and_follow_the_additive_formula():
    cell, annotations, states = cell_and_states()
    inputs = np.random.default_rng(1).normal(size=(3, 4)).astype("float32")
    for _ in range(3):
        h = np.asarray(states[0])
        output, states = cell(inputs, states)
        weights = np.asarray(cell.attention_weights(states))
        np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=1e-5)
        score = cell.attention.score_layer
        w, u, v = (
            np.asarray(x) for x in (score.query_kernel, score.key_kernel, score.scale)
        )
        e = np.tanh((h @ w)[:, None, :] + annotations @ u) @ v
        alpha = np.exp(e - e.max(-1, keepdims=True))
        alpha /= alpha.sum(-1, keepdims=True)
        np.testing.assert_allclose(weights, alpha, rtol=1e-4, atol=1e-6)
        # Gated context z = sigmoid(f_beta(h_{t-1})) * sum_i alpha_i a_i.
        beta = sigmoid(h @ np.asarray(cell.gate.kernel) + np.asarray(cell.gate.bias))
        context = np.einsum("bl,bld->bd", alpha, annotations)
        np.testing.assert_allclose(
            np.asarray(output)[:, 6:], beta * context, rtol=1e-4, atol=1e-5
        )


def test_initial_state_is_an_mlp_of_the_mean_annotation():
    cell, annotations, states = cell_and_states()
    mean = annotations.mean(axis=1)
    for state, layer in ((states[0], cell.init_h), (states[1], cell.init_c)):
        expected = np.tanh(mean @ np.asarray(layer.kernel) + np.asarray(layer.bias))
        np.testing.assert_allclose(np.asarray(state), expected, rtol=1e-4, atol=1e-6)


def test_hard_attention_picks_one_location_and_sums_log_probs():
    cell, annotations, states = cell_and_states("hard", seed=2)
    inputs = np.zeros((3, 4), "float32")
    total = np.zeros(3)
    for _ in range(4):
        h = np.asarray(states[0])
        score = cell.attention.score_layer
        w, u, v = (
            np.asarray(x) for x in (score.query_kernel, score.key_kernel, score.scale)
        )
        e = np.tanh((h @ w)[:, None, :] + annotations @ u) @ v
        log_alpha = e - e.max(-1, keepdims=True)
        log_alpha -= np.log(np.exp(log_alpha).sum(-1, keepdims=True))
        output, states = cell(inputs, states, training=True)
        weights = np.asarray(cell.attention_weights(states))
        assert set(np.unique(weights)) <= {0.0, 1.0}
        np.testing.assert_array_equal(weights.sum(-1), 1.0)
        chosen = weights.argmax(-1)
        total += log_alpha[np.arange(3), chosen]
        beta = sigmoid(h @ np.asarray(cell.gate.kernel) + np.asarray(cell.gate.bias))
        np.testing.assert_allclose(
            np.asarray(output)[:, 6:],
            beta * annotations[np.arange(3), chosen],
            rtol=1e-4,
            atol=1e-5,
        )
    np.testing.assert_allclose(np.asarray(states[6])[:, 0], total, rtol=1e-4)
    assert (np.asarray(states[7]) > 0).all()  # summed entropies


def test_decoder_skips_padded_steps_in_the_coverage():
    keras.utils.set_random_seed(0)
    decoder = ShowAttendTellDecoder(ShowAttendTellCell(6, annotation_dim=5))
    annotations = np.random.default_rng(0).normal(size=(2, 9, 5)).astype("float32")
    inputs = np.random.default_rng(1).normal(size=(2, 4, 3)).astype("float32")
    mask = np.array([[1, 1, 1, 1], [1, 1, 0, 0]], bool)
    _, coverage, _, _ = decoder(inputs, annotations, inputs_mask=mask)
    np.testing.assert_allclose(np.asarray(coverage).sum(-1), [4.0, 2.0], rtol=1e-5)


def test_doubly_stochastic_penalty_formula():
    coverage = np.array([[0.2, 1.5, 1.0], [0.0, 0.0, 3.0]], "float32")
    expected = 0.5 * np.mean([(0.8**2 + 0.5**2 + 0), (1 + 1 + 4)])
    np.testing.assert_allclose(
        float(doubly_stochastic_penalty(coverage, 0.5)), expected, rtol=1e-6
    )


def model(**kwargs):
    keras.utils.set_random_seed(0)
    pre = CaptionPreprocessor(VOCAB, 8)
    config = dict(annotation_dim=8, embedding_dim=8, units=12, dropout=0.0, seed=0)
    config.update(kwargs)
    return ShowAttendTell(
        len(VOCAB), image_shape=(28, 28, 1), preprocessor=pre, **config
    )


def inputs():
    images = np.random.default_rng(0).integers(0, 255, (4, 28, 28, 1), dtype="uint8")
    return images, CAPTIONS


def compiled(m, optimizer="sgd"):
    m.compile(
        optimizer=optimizer,
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    return m


def test_model_adds_the_doubly_stochastic_term_to_the_loss():
    m = compiled(model(attention_regularization=0.7))
    images, captions = inputs()
    x, y, w = m.preprocessor(images, tf.constant(captions))
    # Inference mode, so batch norm uses the same statistics as `encode`.
    y_pred = m(x, training=False)
    total = float(m.compute_loss(x, y, y_pred, w, training=False))
    caption_loss = float(
        keras.losses.SparseCategoricalCrossentropy(from_logits=True)(
            y, y_pred["logits"], sample_weight=w
        )
    )
    # Independent coverage: step the cell one word at a time.
    ids = np.asarray(x["decoder_token_ids"])
    cache = m.encode(x["images"])
    coverage = np.zeros((4, m.grid_shape[0] * m.grid_shape[1]))
    for t in range(ids.shape[1]):
        _, weights, cache = m.next(ids, cache, t + 1)
        coverage += np.asarray(weights) * (ids[:, t] != 0)[:, None]
    expected = 0.7 * np.mean(np.sum((1 - coverage) ** 2, axis=-1))
    np.testing.assert_allclose(total - caption_loss, expected, rtol=1e-4)
    m0 = compiled(model(attention_regularization=0.0))
    y_pred = m0(x, training=False)
    np.testing.assert_allclose(
        float(m0.compute_loss(x, y, y_pred, w, training=False)),
        float(
            keras.losses.SparseCategoricalCrossentropy(from_logits=True)(
                y, y_pred["logits"], sample_weight=w
            )
        ),
        rtol=1e-6,
    )


def test_caption_labels_match_the_preprocessor():
    pre = CaptionPreprocessor(VOCAB, 8)
    x, labels, weights = pre(np.zeros((4, 28, 28), "uint8"), tf.constant(CAPTIONS))
    ours, our_weights = caption_labels(x["decoder_token_ids"], pre.end_id)
    np.testing.assert_array_equal(np.asarray(ours) * np.asarray(weights), labels)
    np.testing.assert_array_equal(np.asarray(our_weights), weights)


def test_reinforce_trains_the_attention_score_and_updates_the_baseline():
    m = compiled(model(attention="hard", entropy_weight=0.1), keras.optimizers.SGD(0.1))
    images, captions = inputs()
    x, y, w = m.preprocessor(images, tf.constant(captions))
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    with tf.GradientTape(persistent=True) as tape:
        y_pred = m(x, training=True)
        total = m.compute_loss(x, y, y_pred, w, training=True)
        caption_loss = loss_fn(y, y_pred["logits"], sample_weight=w)
        surrogate = total - caption_loss
    score = m.decoder_cell.attention.score_layer
    # The surrogate has value 0 but the REINFORCE gradient: the caption
    # loss does not reach the score through a sampled one-hot choice.
    assert abs(float(surrogate)) < 1e-6
    grads = tape.gradient(surrogate, [score.scale, score.query_kernel])
    assert all(g is not None and np.abs(np.asarray(g)).sum() > 0 for g in grads)
    reward = np.asarray(
        caption_log_likelihood(y_pred["logits"], x["decoder_token_ids"], 3)
    )
    # The reward is the log-likelihood of the labels.
    per_token = -np.asarray(
        keras.losses.sparse_categorical_crossentropy(
            y, y_pred["logits"], from_logits=True
        )
    )
    np.testing.assert_allclose(reward, (per_token * np.asarray(w)).sum(-1), rtol=1e-5)
    # First batch: the baseline becomes the mean reward.
    np.testing.assert_allclose(float(m.reinforce.baseline), reward.mean(), rtol=1e-5)
    assert reward.max() < 0 and float(m.reinforce.initialized) == 1.0
    history = m.fit(images, captions, batch_size=4, epochs=2, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    assert float(m.reinforce.baseline) != pytest.approx(reward.mean())
    # Inference is deterministic (argmax location).
    np.testing.assert_array_equal(
        np.asarray(m(x)["logits"]), np.asarray(m(x)["logits"])
    )
