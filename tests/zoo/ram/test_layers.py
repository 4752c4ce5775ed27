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
