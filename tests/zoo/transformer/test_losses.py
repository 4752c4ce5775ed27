"""`MaskedLabelSmoothingCrossEntropy` against the formula and Keras."""

import keras
import numpy as np
import pytest

from zoo.transformer.losses import MaskedLabelSmoothingCrossEntropy


def log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def reference(labels, logits, eps, pad=0, weights=None):
    """Mean over real tokens of -sum_k q_k log p_k, q = (1-eps) onehot + eps/K."""
    k = logits.shape[-1]
    q = (1 - eps) * np.eye(k)[labels] + eps / k
    per_token = -(q * log_softmax(logits)).sum(-1)
    mask = (labels != pad).astype("float64")
    if weights is not None:
        mask = mask * weights
    return (per_token * mask).sum() / (labels != pad).sum()


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    logits = rng.normal(0, 2, (3, 5, 7)).astype("float32")
    labels = rng.integers(1, 7, (3, 5))
    labels[0, 3:] = 0
    labels[2, 1:] = 0
    return labels, logits


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.3])
def test_matches_the_formula_on_real_tokens_only(data, eps):
    labels, logits = data
    loss = MaskedLabelSmoothingCrossEntropy(eps)
    np.testing.assert_allclose(
        float(loss(labels, logits)), reference(labels, logits, eps), rtol=1e-5
    )
    # Padding logits can be anything.
    changed = logits.copy()
    changed[labels == 0] = 100.0
    np.testing.assert_allclose(
        float(loss(labels, changed)), float(loss(labels, logits)), rtol=1e-6
    )


def test_matches_keras_label_smoothing_without_padding(data):
    _, logits = data
    labels = np.random.default_rng(1).integers(0, 7, (3, 5))
    keras_loss = keras.losses.CategoricalCrossentropy(
        from_logits=True, label_smoothing=0.1
    )
    ours = MaskedLabelSmoothingCrossEntropy(0.1, pad_token_id=None)
    np.testing.assert_allclose(
        float(ours(labels, logits)),
        float(keras_loss(np.eye(7)[labels], logits)),
        rtol=1e-5,
    )


def test_sample_weight_and_probabilities(data):
    labels, logits = data
    weights = np.random.default_rng(2).uniform(0, 1, labels.shape)
    loss = MaskedLabelSmoothingCrossEntropy(0.1)
    np.testing.assert_allclose(
        float(loss(labels, logits, sample_weight=weights)),
        reference(labels, logits, 0.1, weights=weights),
        rtol=1e-5,
    )
    probs = np.exp(log_softmax(logits.astype("float64"))).astype("float32")
    from_probs = MaskedLabelSmoothingCrossEntropy(0.1, from_logits=False)
    np.testing.assert_allclose(
        float(from_probs(labels, probs)), reference(labels, logits, 0.1), rtol=1e-4
    )


def test_serialization_and_bad_arguments():
    loss = MaskedLabelSmoothingCrossEntropy(0.2, pad_token_id=3)
    restored = keras.saving.deserialize_keras_object(
        keras.saving.serialize_keras_object(loss)
    )
    assert (restored.label_smoothing, restored.pad_token_id) == (0.2, 3)
    with pytest.raises(ValueError, match="label_smoothing"):
        MaskedLabelSmoothingCrossEntropy(1.0)


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_gradient_matches_the_formula(data, eps):
    # The loss writes its gradient by hand: d/dz of the mean over real
    # tokens is (softmax(z) - q) / n on real tokens and 0 on padding.
    import tensorflow as tf

    labels, logits = data
    weights = np.random.default_rng(3).uniform(0, 1, labels.shape)
    z = tf.constant(logits)
    loss = MaskedLabelSmoothingCrossEntropy(eps)
    with tf.GradientTape() as tape:
        tape.watch(z)
        value = loss(labels, z, sample_weight=weights)
    k = logits.shape[-1]
    q = (1 - eps) * np.eye(k)[labels] + eps / k
    softmax = np.exp(log_softmax(logits.astype("float64")))
    real = (labels != 0) * weights / (labels != 0).sum()
    np.testing.assert_allclose(
        tape.gradient(value, z).numpy(), (softmax - q) * real[..., None], atol=1e-6
    )


def test_half_precision_logits():
    import tensorflow as tf

    logits = tf.constant(
        np.random.default_rng(4).normal(0, 4, (2, 3, 50)).astype("float16")
    )
    labels = np.array([[5, 7, 0], [1, 0, 0]])
    with tf.GradientTape() as tape:
        tape.watch(logits)
        value = MaskedLabelSmoothingCrossEntropy(0.1)(labels, logits)
    gradient = tape.gradient(value, logits)
    assert gradient.dtype == tf.float16
    np.testing.assert_allclose(
        float(value),
        reference(labels, logits.numpy().astype("float64"), 0.1),
        rtol=1e-4,
    )
    assert np.isfinite(gradient.numpy()).all()
