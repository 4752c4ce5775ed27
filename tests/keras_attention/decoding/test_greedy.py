"""`GreedySearch` against arg-max by hand, keras-hub and `BeamSearch(1)`."""

import keras
import keras_hub
import numpy as np
import pytest
from keras import ops

from keras_attention.decoding import BeamSearch, GreedySearch

VOCAB = 5
END = 4
MAX_LENGTH = 7


def np_(x):
    return ops.convert_to_numpy(x)


def decode(search, next, prompt, cache=None, index=1, **kwargs):
    """Runs `search` (or a keras-hub sampler); under JAX inside `jax.jit`.

    One compilation per call instead of one per eager op keeps the JAX run
    fast; `test_runs_under_jax_jit` checks the compiled search.
    """
    if keras.config.backend() != "jax":
        return search(next, prompt, cache, index, **kwargs)
    import jax

    def run(prompt, cache):
        return search(next, prompt, cache, index, **kwargs)

    return jax.jit(run)(prompt, cache)


def log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def transition_matrix(seed):
    """Log-probabilities `[previous, next]` of a random Markov chain."""
    logits = 1.5 * np.random.default_rng(seed).normal(size=(VOCAB, VOCAB))
    return log_softmax(logits).astype("float32")


def markov_next(matrix, attention=None):
    def next(prompt, cache, index):
        last = ops.take(prompt, index - 1, axis=1)
        hidden = None if attention is None else ops.take(attention, last, axis=0)
        return ops.take(matrix, last, axis=0), hidden, cache

    return next


def greedy_by_hand(matrix, starts, stop=True):
    """Arg-max decoding written as a plain loop; pads with 0 after END."""
    sequences = np.zeros((len(starts), MAX_LENGTH), "int32")
    scores = np.zeros(len(starts))
    for row, start in enumerate(starts):
        sequences[row, 0] = start
        for t in range(1, MAX_LENGTH):
            token = int(np.argmax(matrix[sequences[row, t - 1]]))
            sequences[row, t] = token
            scores[row] += matrix[sequences[row, t - 1], token]
            if stop and token == END:
                break
    return sequences, scores


def start_prompt(starts):
    prompt = np.zeros((len(starts), MAX_LENGTH), "int32")
    prompt[:, 0] = starts
    return prompt


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_arg_max_by_hand(seed):
    matrix = transition_matrix(seed)
    starts = [0, 1, 2, 3]
    seqs, scores = decode(
        GreedySearch(),
        markov_next(matrix),
        start_prompt(starts),
        stop_token_ids=[END],
        return_scores=True,
    )
    ref_seqs, ref_scores = greedy_by_hand(matrix, starts)
    np.testing.assert_array_equal(np_(seqs), ref_seqs)
    np.testing.assert_allclose(np_(scores), ref_scores, rtol=1e-5)


def test_fills_every_position_without_stop_tokens():
    matrix = transition_matrix(0)
    starts = [0, 1, 2, 3]
    seqs = GreedySearch()(markov_next(matrix), start_prompt(starts), index=1)
    ref, _ = greedy_by_hand(matrix, starts, stop=False)
    np.testing.assert_array_equal(np_(seqs), ref)


def test_ends_early_with_padding_when_every_sequence_stops():
    # END is the most likely token everywhere: one step, then padding.
    matrix = transition_matrix(3)
    matrix[:, END] = 0.0
    matrix = log_softmax(matrix)
    seqs = GreedySearch()(
        markov_next(matrix),
        start_prompt([1, 2]),
        index=1,
        stop_token_ids=[END],
        pad_token_id=7,
    )
    np.testing.assert_array_equal(np_(seqs)[:, 1], [END, END])
    np.testing.assert_array_equal(np_(seqs)[:, 2:], 7)


@pytest.mark.parametrize("alpha,beta", [(0.0, 0.0), (0.6, 0.0), (0.6, 0.5)])
def test_equals_beam_search_of_width_one(alpha, beta):
    matrix = transition_matrix(4)
    attention = np.random.default_rng(5).dirichlet(np.ones(3), size=VOCAB)
    next = markov_next(matrix, attention.astype("float32"))
    prompt = start_prompt([0, 1, 2, 3])
    kwargs = dict(stop_token_ids=[END], return_scores=True)
    seqs, scores = decode(GreedySearch(), next, prompt, **kwargs)
    beam = BeamSearch(beam_width=1, length_penalty=alpha, coverage_penalty=beta)
    beam_seqs, beam_scores = decode(beam, next, prompt, **kwargs)
    np.testing.assert_array_equal(np_(seqs), np_(beam_seqs))
    if alpha == beta == 0.0:
        np.testing.assert_allclose(np_(scores), np_(beam_scores), rtol=1e-6)


@pytest.mark.parametrize("stop_token_ids", [None, [END]])
def test_matches_keras_hub_greedy_sampler(stop_token_ids):
    matrix = transition_matrix(6)
    next = markov_next(matrix)
    prompt = start_prompt([0, 1, 2, 3])
    hub = keras_hub.samplers.GreedySampler()
    hub = np_(decode(hub, next, prompt, stop_token_ids=stop_token_ids))
    seqs = np_(decode(GreedySearch(), next, prompt, stop_token_ids=stop_token_ids))
    if stop_token_ids is not None:
        # keras-hub keeps sampling after a row's end token until every row
        # ended; both agree up to the first end token, then we pad.
        after_end = np.cumsum(hub == END, axis=1) - (hub == END) > 0
        hub = np.where(after_end, 0, hub)
    np.testing.assert_array_equal(seqs, hub)


def test_uses_and_updates_the_cache():
    # The cache holds a per-row offset and the running sum of the tokens;
    # the logits come from row `(sum + offset) % 7` of a table.
    table = 2.0 * np.random.default_rng(7).normal(size=(7, VOCAB)).astype("float32")

    def next(prompt, cache, index):
        total = cache["sum"] + ops.take(prompt, index - 1, axis=1)
        logits = ops.take(table, (total + cache["offset"]) % 7, axis=0)
        return logits, None, {"offset": cache["offset"], "sum": total}

    offsets = np.array([0, 3, 5], "int32")
    cache = {"offset": offsets, "sum": np.zeros(3, "int32")}
    prompt = start_prompt([1, 1, 1])
    seqs = np_(decode(GreedySearch(), next, prompt, cache, stop_token_ids=[END]))
    for row, offset in enumerate(offsets):
        total, expected = 0, [1]
        while len(expected) < MAX_LENGTH and expected[-1] != END:
            total += expected[-1]
            expected.append(int(np.argmax(table[(total + offset) % 7])))
        expected += [0] * (MAX_LENGTH - len(expected))
        np.testing.assert_array_equal(seqs[row], expected)
    assert len({tuple(s) for s in seqs}) > 1  # The offsets matter.


def test_clear_errors():
    next = markov_next(transition_matrix(0))
    with pytest.raises(ValueError, match="index"):
        GreedySearch()(next, start_prompt([1]), index=MAX_LENGTH)
    with pytest.raises(ValueError, match="prompt"):
        GreedySearch()(next, np.zeros((MAX_LENGTH,), "int32"), index=1)


def test_config_round_trip():
    config = keras.saving.serialize_keras_object(GreedySearch())
    assert isinstance(keras.saving.deserialize_keras_object(config), GreedySearch)


def compiled_matches_by_hand():
    matrix = transition_matrix(8)
    prompt = start_prompt([0, 1, 2, 3])

    def run(prompt):
        return GreedySearch()(
            markov_next(matrix), prompt, None, 1, [END], return_scores=True
        )

    if keras.config.backend() == "tensorflow":
        import tensorflow as tf

        compiled = tf.function(run, jit_compile=True)
    else:
        import jax

        compiled = jax.jit(run)
    ref_seqs, ref_scores = greedy_by_hand(matrix, [0, 1, 2, 3])
    seqs, scores = compiled(prompt)
    np.testing.assert_array_equal(np_(seqs), ref_seqs)
    np.testing.assert_allclose(np_(scores), ref_scores, rtol=1e-5)


@pytest.mark.tensorflow_only
def test_runs_under_tf_function_with_xla():
    compiled_matches_by_hand()


@pytest.mark.skipif(keras.config.backend() != "jax", reason="needs the JAX backend")
def test_runs_under_jax_jit():
    compiled_matches_by_hand()
