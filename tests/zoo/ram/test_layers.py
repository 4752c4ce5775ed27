"""The RAM's layers: the Gaussian location policy and the unrolled agent."""

import math

import numpy as np
import pytest

from zoo.ram import LocationPolicy, RecurrentAttention

pytestmark = pytest.mark.tensorflow_only

RNG = np.random.default_rng(0)


def test_location_policy_log_prob_is_the_gaussian_density():
    policy = LocationPolicy(std=0.3, seed=1)
    hidden = RNG.normal(size=(6, 5)).astype("float32")
    location, log_prob = policy(hidden, training=True)
    kernel, bias = (w.numpy() for w in policy.mean_dense.weights)
    mean = np.tanh(hidden @ kernel + bias)
    # Recover the unclipped sample from the log-prob is impossible, so check
    # inside the clip range: where |location| < 1 it is the sample itself.
    z = (location.numpy() - mean) / 0.3
    ref = (-0.5 * z**2 - math.log(0.3) - 0.5 * math.log(2 * math.pi)).sum(-1)
    inside = np.all(np.abs(location.numpy()) < 1, axis=-1)
    assert inside.any()
    np.testing.assert_allclose(log_prob.numpy()[inside], ref[inside], rtol=1e-5)
    assert np.all(np.abs(location.numpy()) <= 1.0)
    greedy, greedy_log_prob = policy(hidden, training=False)
    np.testing.assert_allclose(greedy.numpy(), mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        greedy_log_prob.numpy(), 2 * (-math.log(0.3) - 0.5 * math.log(2 * math.pi))
    )
    with pytest.raises(ValueError, match="std"):
        LocationPolicy(std=0.0)


def test_layer_config_round_trip():
    agent = RecurrentAttention(3, num_glimpses=2, patch_size=4, cell="lstm", seed=3)
    clone = RecurrentAttention.from_config(agent.get_config())
    assert clone.get_config() == agent.get_config()


def _policy_step(scale, hidden):
    """The policy's mean at initialisation and after one Adam step."""
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(4)
    policy = LocationPolicy(std=0.2, seed=1, learning_rate_scale=scale)
    policy(hidden)
    before = policy(hidden)[0].numpy()
    optimizer = keras.optimizers.Adam(1e-2)
    with tf.GradientTape() as tape:
        _, log_prob = policy(hidden, training=True)
        loss = -tf.reduce_mean(log_prob)
    variables = policy.trainable_variables
    optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
    kernel, bias = (scale * w.numpy() for w in policy.mean_dense.weights)
    return before, kernel, bias


def test_learning_rate_scale_keeps_the_initial_policy_and_scales_adam_steps():
    hidden = RNG.normal(size=(8, 5)).astype("float32")
    mean_1, kernel_1, bias_1 = _policy_step(1.0, hidden)
    mean_s, kernel_s, bias_s = _policy_step(0.1, hidden)
    # The same function at initialisation ...
    np.testing.assert_allclose(mean_s, mean_1, atol=1e-5)
    # ... but Adam's first step moves the effective weights `s V` a tenth
    # as far: its step is lr * sign(gradient) whatever the gradient's scale.
    np.testing.assert_allclose(np.abs(bias_s), 0.1 * np.abs(bias_1), rtol=1e-3)
    assert np.all(np.abs(bias_1) > 5e-3)
    with pytest.raises(ValueError, match="learning_rate_scale"):
        LocationPolicy(learning_rate_scale=0)
    with pytest.raises(ValueError, match="learning_rate_scale"):
        LocationPolicy(learning_rate_scale=True)
    config = LocationPolicy(learning_rate_scale=0.25).get_config()
    assert LocationPolicy.from_config(config).learning_rate_scale == 0.25


def test_random_first_glimpse_in_training_only():
    images = np.zeros((256, 20, 20, 1), "float32")
    agent = RecurrentAttention(
        3, num_glimpses=2, patch_size=4, seed=5, random_first_glimpse=True
    )
    first = agent(images, training=True)["locations"].numpy()[:, 0]
    assert np.all(np.abs(first) < 1.0)
    # Uniform on (-1, 1)^2: mean 0, variance 1/3, every quadrant visited.
    np.testing.assert_allclose(first.mean(0), 0.0, atol=0.15)
    np.testing.assert_allclose(first.var(0), 1.0 / 3.0, atol=0.08)
    assert len({tuple(q) for q in (first > 0).astype(int)}) == 4
    assert np.all(agent(images, training=False)["locations"].numpy()[:, 0] == 0.0)
    centred = RecurrentAttention(3, num_glimpses=2, patch_size=4, seed=5)
    assert np.all(centred(images, training=True)["locations"].numpy()[:, 0] == 0.0)
    clone = RecurrentAttention.from_config(agent.get_config())
    assert clone.random_first_glimpse is True


def test_first_locations_replace_the_first_glimpse():
    images = RNG.uniform(size=(3, 20, 20, 1)).astype("float32")
    agent = RecurrentAttention(3, num_glimpses=3, patch_size=4, seed=5, test_samples=2)
    first = np.array([[0.5, -0.5], [-1.0, 1.0], [2.0, 0.0]], "float32")
    out = agent(images, first_locations=first)
    # Clipped to the canvas; the policy chooses the later glimpses.
    np.testing.assert_allclose(out["locations"].numpy()[:, 0], np.clip(first, -1, 1))
    assert not np.allclose(out["locations"].numpy()[:, 1], 0.0)
    with pytest.raises(ValueError, match=r"first_locations.shape=\(3, 3\)"):
        agent(images, first_locations=np.zeros((3, 3), "float32"))
