"""The samplers against NumPy: candidate sets, softmax draws, seeds, configs."""

import keras
import numpy as np
import pytest
from keras import ops
from scipy import stats

from keras_attention.decoding import (
    GreedySearch,
    RandomSampler,
    TopKSampler,
    TopPSampler,
)

VOCAB = 8
LENGTH = 6


def np_(x):
    return ops.convert_to_numpy(x)


def compiled(search, next, **kwargs):
    """`run(prompt, seed)`: the search in this backend's compiled form.

    `jax.jit` on JAX and `tf.function` on TensorFlow, with the seed an
    input of the compiled function (as the zoo passes it); eager on PyTorch.
    """

    def run(prompt, seed):
        return search(next, prompt, index=1, seed=seed, **kwargs)

    backend = keras.config.backend()
    if backend == "jax":
        import jax

        run = jax.jit(run)
    elif backend == "tensorflow":
        import tensorflow as tf

        run = tf.function(run)
    return lambda prompt, seed: np_(run(ops.convert_to_tensor(prompt), seed))


def log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def markov_table(seed, scale=1.5):
    """Log-probabilities `[t, previous, next]`, distinct values per row."""
    logits = scale * np.random.default_rng(seed).normal(size=(LENGTH, VOCAB, VOCAB))
    return log_softmax(logits).astype("float32")


def markov_next(table):
    def next(prompt, cache, index):
        last = ops.take(prompt, index - 1, axis=1)
        return ops.take(ops.take(table, index, axis=0), last, axis=0), None, cache

    return next


def prompts(rows):
    """`rows` prompts whose first tokens cycle through the vocabulary."""
    prompt = np.zeros((rows, LENGTH), "int32")
    prompt[:, 0] = np.arange(rows) % VOCAB
    return prompt


def step_distributions(table, sequences, temperature=1.0):
    """The tempered probabilities `(rows, LENGTH - 1, VOCAB)` of each step."""
    steps = np.arange(1, LENGTH)[None, :]
    logits = table[steps, sequences[:, :-1]] / temperature
    return np.exp(log_softmax(logits))


def nucleus(probs, p):
    """Boolean mask of the top-p nucleus of each row of `probs`."""
    order = np.argsort(-probs, axis=-1, kind="stable")
    ranked = np.take_along_axis(probs, order, axis=-1)
    keep = np.cumsum(ranked, axis=-1) - ranked < p
    mask = np.zeros_like(keep)
    np.put_along_axis(mask, order, keep, axis=-1)
    return mask


@pytest.mark.parametrize("k", [1, 2, 3])
def test_top_k_never_draws_outside_the_k_best(k):
    table = markov_table(0)
    sampler = TopKSampler(k=k, temperature=1.5)
    sequences = compiled(sampler, markov_next(table))(prompts(256), 11)
    probs = step_distributions(table, sequences)
    chosen = np.take_along_axis(probs, sequences[:, 1:, None], axis=-1)
    better = (probs > chosen).sum(-1)
    assert better.max() == k - 1  # Never outside; the k-th is drawn.


@pytest.mark.parametrize("p", [0.4, 0.7, 0.9])
def test_top_p_never_draws_outside_the_nucleus(p):
    table = markov_table(1, scale=0.8)
    sampler = TopPSampler(p=p, temperature=0.8)
    sequences = compiled(sampler, markov_next(table))(prompts(256), 5)
    probs = step_distributions(table, sequences, temperature=0.8)
    inside = np.take_along_axis(nucleus(probs, p), sequences[:, 1:, None], axis=-1)
    assert inside.all()
    sizes = nucleus(probs, p).sum(-1)
    assert (sizes > 1).any()  # Some nuclei leave a choice.


def test_top_p_with_k_ranks_only_the_k_best():
    table = markov_table(2, scale=0.3)  # Flat rows: the nucleus is wide.
    sequences = compiled(TopPSampler(p=1.0, k=2), markov_next(table))(prompts(128), 3)
    probs = step_distributions(table, sequences)
    chosen = np.take_along_axis(probs, sequences[:, 1:, None], axis=-1)
    assert (probs > chosen).sum(-1).max() == 1


@pytest.mark.parametrize(
    "sampler",
    [RandomSampler(temperature=1e-4), TopKSampler(k=4, temperature=1e-4)],
    ids=["random", "top_k"],
)
def test_temperature_towards_zero_is_greedy(sampler):
    table = markov_table(3)
    next = markov_next(table)
    prompt = prompts(64)
    expected = np_(GreedySearch()(next, prompt, index=1, stop_token_ids=[VOCAB - 1]))
    sampled = compiled(sampler, next, stop_token_ids=[VOCAB - 1])(prompt, 17)
    np.testing.assert_array_equal(sampled, expected)


@pytest.mark.parametrize(
    "sampler",
    [RandomSampler(), TopKSampler(k=3), TopPSampler(p=0.7)],
    ids=["random", "top_k", "top_p"],
)
def test_a_seed_reproduces_its_draws(sampler):
    next = markov_next(markov_table(4, scale=0.5))
    run = compiled(sampler, next)
    prompt = prompts(64)
    first = run(prompt, 7)
    np.testing.assert_array_equal(run(prompt, 7), first)
    assert (run(prompt, 8) != first).any()
    # The constructor's seed, eagerly, draws as the compiled call does.
    config = {**sampler.get_config(), "seed": 7}
    eager = type(sampler)(**config)(next, ops.convert_to_tensor(prompt), index=1)
    np.testing.assert_array_equal(np_(eager), first)


def test_each_step_draws_fresh_noise():
    uniform = np.zeros((LENGTH, VOCAB, VOCAB), "float32")
    sequences = compiled(RandomSampler(), markov_next(uniform))(prompts(64), 0)
    assert len({tuple(column) for column in sequences[:, 1:].T}) == LENGTH - 1


@pytest.mark.parametrize("temperature", [1.0, 2.0])
def test_draws_follow_the_softmax(temperature):
    """A chi-square test of 4,000 one-step draws, with a fixed seed."""
    logits = np.log(np.array([0.3, 0.2, 0.15, 0.12, 0.1, 0.07, 0.04, 0.02]))
    table = np.broadcast_to(logits, (LENGTH, VOCAB, VOCAB)).astype("float32")
    sampler = RandomSampler(temperature=temperature)
    sequences = compiled(sampler, markov_next(table))(prompts(4000), 2024)
    for step in (1, 2):
        counts = np.bincount(sequences[:, step], minlength=VOCAB)
        expected = np.exp(log_softmax(logits / temperature)) * len(sequences)
        assert stats.chisquare(counts, expected).pvalue > 1e-3, counts


def test_scores_are_the_models_log_probabilities():
    table = markov_table(5)
    prompt = prompts(16)
    sequences, scores = TopKSampler(k=2, seed=1)(
        markov_next(table), prompt, index=1, return_scores=True
    )
    sequences = np_(sequences)
    expected = np.log(step_distributions(table, sequences))
    expected = np.take_along_axis(expected, sequences[:, 1:, None], axis=-1)
    np.testing.assert_allclose(np_(scores), expected.sum((1, 2)), rtol=1e-5)


@pytest.mark.parametrize(
    "sampler",
    [
        RandomSampler(seed=3, temperature=0.5),
        TopKSampler(k=7, seed=None, temperature=2.0),
        TopPSampler(p=0.25, k=10, seed=1),
    ],
    ids=["random", "top_k", "top_p"],
)
def test_serializes_with_its_config(sampler):
    restored = keras.saving.deserialize_keras_object(
        keras.saving.serialize_keras_object(sampler)
    )
    assert type(restored) is type(sampler)
    assert restored.get_config() == sampler.get_config()


@pytest.mark.parametrize(
    "make, error",
    [
        (lambda: TopKSampler(k=0), ValueError),
        (lambda: TopKSampler(k=2.0), TypeError),
        (lambda: TopPSampler(p=0.0), ValueError),
        (lambda: TopPSampler(p=1.5), ValueError),
        (lambda: TopPSampler(p="0.5"), TypeError),
        (lambda: TopPSampler(p=0.5, k=0), ValueError),
        (lambda: RandomSampler(temperature=0.0), ValueError),
        (lambda: RandomSampler(temperature=-1.0), ValueError),
        (lambda: RandomSampler(temperature=float("nan")), ValueError),
        (lambda: RandomSampler(seed=-1), ValueError),
        (lambda: RandomSampler(seed=1.5), TypeError),
    ],
)
def test_bad_arguments_are_refused(make, error):
    with pytest.raises(error):
        make()
