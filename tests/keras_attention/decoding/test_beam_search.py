"""`BeamSearch` against keras-hub's `BeamSampler`, brute force and NumPy."""

import itertools

import keras
import keras_hub
import numpy as np
import pytest
from keras import ops

from keras_attention.decoding import BeamSearch, GreedySearch

VOCAB = 5
END = 4
SOURCE_LENGTH = 3


def np_(x):
    return ops.convert_to_numpy(x)


def decode(search, next, prompt, cache=None, index=1, **kwargs):
    """Runs `search` (or a keras-hub sampler); under JAX inside `jax.jit`.

    One compilation per call instead of one per eager op keeps the JAX run
    fast; `test_runs_under_jax_jit` checks that eager and compiled agree.
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


def markov_table(seed, max_length, vocab=VOCAB, scale=1.5):
    """Position-dependent log-transition table `[t, previous, next]`.

    Position dependence avoids exact ties between sequences that use the same
    transitions in another order.
    """
    rng = np.random.default_rng(seed)
    logits = scale * rng.normal(size=(max_length, vocab, vocab))
    return log_softmax(logits).astype("float32")


def attention_table(seed, max_length, vocab=VOCAB):
    """Attention row `[t, previous] -> (SOURCE_LENGTH,)`; source 2 is unused."""
    rng = np.random.default_rng(seed)
    rows = np.exp(rng.normal(size=(max_length, vocab, SOURCE_LENGTH)))
    rows[..., 2] = 0.0
    return (rows / rows.sum(-1, keepdims=True)).astype("float32")


def markov_next(table, attention=None, as_dict=False):
    """`next(prompt, cache, index)` of a Markov model over `table`."""

    def next(prompt, cache, index):
        last = ops.take(prompt, index - 1, axis=1)
        logits = ops.take(ops.take(table, index, axis=0), last, axis=0)
        hidden = None
        if attention is not None:
            hidden = ops.take(ops.take(attention, index, axis=0), last, axis=0)
            hidden = {"attention": hidden} if as_dict else hidden
        return logits, hidden, cache

    return next


def np_score(seq, index, table, alpha, attention=None, beta=0.0, end=END):
    """GNMT score of `seq`'s generated part, written from the formulas."""
    log_prob, coverage, length = 0.0, np.zeros(SOURCE_LENGTH), 0
    for t in range(index, len(seq)):
        log_prob += table[t, seq[t - 1], seq[t]]
        if attention is not None:
            coverage += attention[t, seq[t - 1]]
        length += 1
        if seq[t] == end:
            break
    score = log_prob / ((5.0 + length) / 6.0) ** alpha
    if beta:
        score += beta * np.log(np.clip(coverage, 1e-7, 1.0)).sum()
    return score


def brute_force(prefix, max_length, table, alpha, attention=None, beta=0.0):
    """Every finished sequence (padded with 0) and its score, best first."""
    found = []
    index = len(prefix)
    for length in range(1, max_length - index + 1):
        for body in itertools.product(range(END), repeat=length - 1):
            seq = list(prefix) + list(body) + [END]
            score = np_score(seq, index, table, alpha, attention, beta)
            found.append((score, seq + [0] * (max_length - len(seq))))
    found.sort(key=lambda item: -item[0])
    return found


@pytest.mark.parametrize("width", [2, 5])
def test_matches_keras_hub_beam_sampler_without_stop_tokens(width):
    table = markov_table(0, 6, vocab=6)
    next = markov_next(table)
    prompt = np.zeros((3, 6), "int32")
    prompt[:, 0] = [1, 2, 3]
    hub = keras_hub.samplers.BeamSampler(num_beams=width, return_all_beams=True)
    hub_seqs, hub_scores = decode(hub, next, prompt)
    ours = BeamSearch(width, length_penalty=0.0, return_all_beams=True)
    seqs, scores = decode(ours, next, prompt)
    np.testing.assert_array_equal(np_(seqs), np_(hub_seqs))
    np.testing.assert_allclose(np_(scores), np_(hub_scores), rtol=1e-5, atol=1e-5)
    if width == 2:
        best = decode(BeamSearch(width, length_penalty=0.0), next, prompt)
        hub_best = keras_hub.samplers.BeamSampler(num_beams=width)
        np.testing.assert_array_equal(np_(best), np_(decode(hub_best, next, prompt)))


@pytest.mark.parametrize("width", [1, 128])
def test_matches_keras_hub_beam_sampler_with_stop_tokens(width):
    # keras-hub keeps a finished beam in the beam, extending it; with an
    # absorbing end token (END -> END with probability 1) that adds 0 to its
    # log-probability, and forcing END at the last position makes every full
    # sequence finished: both then rank the same finished sequences. (For
    # widths between greedy and exhaustive the two differ by design: ours
    # keeps `width` live hypotheses besides the finished ones.)
    max_length = 5
    table = markov_table(1, max_length)
    table[:, END, :] = -1e9
    table[:, END, END] = 0.0
    table[max_length - 1, :, :] = -1e9
    table[max_length - 1, :, END] = 0.0
    next = markov_next(table)
    prompt = np.zeros((4, max_length), "int32")
    prompt[:, 0] = [0, 1, 2, 3]
    hub = keras_hub.samplers.BeamSampler(num_beams=width)
    hub_seqs = np_(decode(hub, next, prompt, stop_token_ids=[END]))
    # keras-hub writes the end token again after the first one; we pad.
    after_end = np.cumsum(hub_seqs == END, axis=1) - (hub_seqs == END) > 0
    hub_seqs = np.where(after_end, 0, hub_seqs)
    search = BeamSearch(width, length_penalty=0.0)
    seqs = decode(search, next, prompt, stop_token_ids=[END])
    np.testing.assert_array_equal(np_(seqs), hub_seqs)


@pytest.mark.parametrize("alpha,beta", [(0.0, 0.0), (0.6, 0.0), (0.6, 0.5)])
def test_wide_beam_finds_the_brute_force_optimum(alpha, beta):
    max_length = 6
    table = markov_table(10, max_length)
    attention = attention_table(3, max_length) if beta else None
    next = markov_next(table, attention)
    prefixes = [[0, 1], [2, 3]]
    prompt = np.array([p + [0] * (max_length - 2) for p in prefixes], "int32")
    # 4 generated positions: at most 4**3 * 5 = 320 candidates per step and 85
    # finished sequences, so a beam of 320 is exhaustive.
    search = BeamSearch(320, alpha, beta, return_all_beams=True)
    seqs, scores = decode(search, next, prompt, index=2, stop_token_ids=[END])
    seqs, scores = np_(seqs), np_(scores)
    for row, prefix in enumerate(prefixes):
        found = brute_force(prefix, max_length, table, alpha, attention, beta)
        assert found[0][0] - found[1][0] > 1e-4  # A unique optimum.
        for rank in range(5):
            np.testing.assert_array_equal(seqs[row, rank], found[rank][1])
            np.testing.assert_allclose(scores[row, rank], found[rank][0], rtol=1e-5)
    # The penalties matter here: they change the optimum of the first example.
    unpenalised = brute_force(prefixes[0], max_length, table, 0.0)[0][1]
    assert (unpenalised == seqs[0, 0].tolist()) == (alpha == beta == 0.0)


@pytest.mark.parametrize("as_dict", [False, True])
def test_coverage_penalty_matches_numpy_formula(as_dict):
    max_length = 6
    table = markov_table(4, max_length)
    attention = attention_table(5, max_length)
    next = markov_next(table, attention, as_dict=as_dict)
    prompt = np.zeros((2, max_length), "int32")
    prompt[:, 0] = [1, 3]
    search = BeamSearch(
        3, length_penalty=0.6, coverage_penalty=0.7, return_all_beams=True
    )
    seqs, scores = decode(search, next, prompt, stop_token_ids=[END])
    seqs, scores = np_(seqs), np_(scores)
    for row in range(2):
        ref = [np_score(s, 1, table, 0.6, attention, 0.7) for s in seqs[row]]
        np.testing.assert_allclose(scores[row], ref, rtol=1e-5)
        assert np.all(np.diff(scores[row]) <= 0)  # Best first.
    if not as_dict:  # The penalty changes the scores.
        without = BeamSearch(3, 0.6, 0.0, return_all_beams=True)
        _, plain = decode(without, next, prompt, stop_token_ids=[END])
        assert not np.allclose(np_(plain), scores)


class RunningSumModel:
    """A `next` whose logits depend on a cache carrying per-row tensors.

    The cache is `{"offset": (batch,), "sum": (batch,), "tokens": (batch, 2,
    max_length)}`: a per-example offset, the running sum of the tokens read so
    far, and a copy of them (a multi-dimensional leaf). The logits come from
    `table[index, (sum + offset) % 7]`, so a beam that got another beam's or
    another example's cache scores differently from `np_log_prob`.
    """

    def __init__(self, seed, max_length):
        rng = np.random.default_rng(seed)
        self.table = (2.0 * rng.normal(size=(max_length, 7, VOCAB))).astype("float32")
        self.max_length = max_length

    def initial_cache(self, offsets):
        batch = len(offsets)
        return {
            "offset": np.array(offsets, "int32"),
            "sum": np.zeros((batch,), "int32"),
            "tokens": np.zeros((batch, 2, self.max_length), "int32"),
        }

    def __call__(self, prompt, cache, index):
        last = ops.take(prompt, index - 1, axis=1)
        positions = ops.arange(self.max_length, dtype="int32")
        onehot = ops.cast(positions == index - 1, "int32")[None, None, :]
        cache = {
            "offset": cache["offset"],
            "sum": cache["sum"] + last,
            "tokens": cache["tokens"] + onehot * last[:, None, None],
        }
        # The copy must agree with the prompt; a mismatch shifts the logits.
        given = ops.where(positions[None, :] < index, prompt, 0)
        mismatch = ops.any(cache["tokens"][:, 1] != given, axis=-1)
        shift = ops.cast(mismatch, "int32") * 3
        row = (cache["sum"] + cache["offset"] + shift) % 7
        logits = ops.take(ops.take(self.table, index, axis=0), row, axis=0)
        return logits, None, cache

    def np_log_prob(self, seq, offset, index, end=END):
        log_prob, total = 0.0, 0
        for t in range(index, len(seq)):
            total += seq[t - 1]
            log_prob += log_softmax(self.table[t, (total + offset) % 7])[seq[t]]
            if seq[t] == end:
                break
        return log_prob


@pytest.mark.parametrize("stop_token_ids", [None, [END]])
def test_cache_is_tiled_per_beam_and_reordered_by_parent(stop_token_ids):
    model = RunningSumModel(6, max_length=7)
    offsets = [0, 3, 5]
    prompt = np.zeros((3, 7), "int32")
    prompt[:, 0] = [1, 2, 1]
    # With 3 examples and 3 beams, `tile` in place of `repeat` would give
    # every example the cache of the first one.
    search = BeamSearch(3, length_penalty=0.0, return_all_beams=True)
    cache = model.initial_cache(offsets)
    seqs, scores = decode(search, model, prompt, cache, stop_token_ids=stop_token_ids)
    seqs, scores = np_(seqs), np_(scores)
    for row, offset in enumerate(offsets):
        end = None if stop_token_ids is None else END
        ref = [model.np_log_prob(s, offset, 1, end) for s in seqs[row]]
        np.testing.assert_allclose(scores[row], ref, rtol=1e-5, atol=1e-5)
    for row in seqs:  # Three distinct hypotheses per example.
        assert len({tuple(s) for s in row}) == 3


def test_best_beam_equals_greedy_width_one_with_cache():
    model = RunningSumModel(7, max_length=6)
    prompt = np.zeros((3, 6), "int32")
    prompt[:, 0] = [1, 2, 3]
    cache = model.initial_cache([1, 2, 6])
    beam = BeamSearch(1, length_penalty=0.0)
    kwargs = dict(stop_token_ids=[END], return_scores=True)
    seqs, scores = decode(beam, model, prompt, cache, **kwargs)
    greedy_seqs, greedy_scores = decode(GreedySearch(), model, prompt, cache, **kwargs)
    np.testing.assert_array_equal(np_(seqs), np_(greedy_seqs))
    np.testing.assert_allclose(np_(scores), np_(greedy_scores), rtol=1e-6)


def test_falls_back_to_live_hypotheses_after_the_finished_ones():
    # END is only reachable at position 2 from token 1, so exactly one
    # sequence can finish; the other slots hold the best live hypotheses.
    max_length = 4
    table = markov_table(8, max_length, vocab=4)
    table[:, :, 3] = -np.inf
    table[2, 1, 3] = 0.0
    table = log_softmax(table)
    next = markov_next(table)
    prompt = np.zeros((1, max_length), "int32")
    search = BeamSearch(32, length_penalty=0.6, return_all_beams=True)
    seqs, scores = decode(search, next, prompt, stop_token_ids=[3])
    seqs, scores = np_(seqs)[0], np_(scores)[0]
    np.testing.assert_array_equal(seqs[0], [0, 1, 3, 0])
    np.testing.assert_allclose(scores[0], np_score([0, 1, 3], 1, table, 0.6, end=3))
    live = []
    for body in itertools.product(range(3), repeat=3):
        seq = [0, *body]
        live.append((np_score(seq, 1, table, 0.6, end=3), seq))
    live.sort(key=lambda item: -item[0])
    for rank in range(1, 28):
        np.testing.assert_array_equal(seqs[rank], live[rank - 1][1])
        np.testing.assert_allclose(scores[rank], live[rank - 1][0], rtol=1e-5)
    # Beyond the 28 possible hypotheses, slots are empty.
    assert np.all(scores[28:] == -np.inf)


def test_return_values_and_padding():
    table = markov_table(9, 6)
    next = markov_next(table)
    prompt = np.full((2, 6), 3, "int32")
    search = BeamSearch(3, return_all_beams=True)
    seqs, scores = search(next, prompt, index=1, stop_token_ids=[END], pad_token_id=9)
    assert tuple(seqs.shape) == (2, 3, 6) and tuple(scores.shape) == (2, 3)
    seqs = np_(seqs)
    for seq in seqs.reshape(-1, 6):
        assert seq[0] == 3  # The given prefix is kept.
        if END in seq.tolist():
            stop = seq.tolist().index(END)
            assert np.all(seq[stop + 1 :] == 9)
    best, best_scores = BeamSearch(3)(
        next, prompt, index=1, stop_token_ids=[END], pad_token_id=9, return_scores=True
    )
    assert tuple(best.shape) == (2, 6) and tuple(best_scores.shape) == (2,)
    np.testing.assert_array_equal(np_(best), seqs[:, 0])
    np.testing.assert_allclose(np_(best_scores), np_(scores)[:, 0])


def test_clear_errors():
    with pytest.raises(ValueError, match="beam_width"):
        BeamSearch(beam_width=0)
    with pytest.raises(TypeError, match="beam_width"):
        BeamSearch(beam_width=2.5)
    with pytest.raises(ValueError, match="length_penalty"):
        BeamSearch(length_penalty=-0.1)
    with pytest.raises(ValueError, match="coverage_penalty"):
        BeamSearch(coverage_penalty=-1.0)
    table = markov_table(0, 4)
    prompt = np.zeros((1, 4), "int32")
    search = BeamSearch(2, coverage_penalty=0.2)
    with pytest.raises(ValueError, match="attention weights"):
        search(markov_next(table), prompt, index=1)

    def next_without_attention(prompt, cache, index):
        logits, _, cache = markov_next(table)(prompt, cache, index)
        return logits, {"state": logits}, cache

    with pytest.raises(ValueError, match="attention weights"):
        search(next_without_attention, prompt, index=1)
    with pytest.raises(ValueError, match="index"):
        BeamSearch(2)(markov_next(table), prompt, index=4)


def test_config_round_trip():
    search = BeamSearch(
        3, length_penalty=0.2, coverage_penalty=0.1, return_all_beams=True
    )
    config = keras.saving.serialize_keras_object(search)
    restored = keras.saving.deserialize_keras_object(config)
    assert isinstance(restored, BeamSearch)
    assert restored.get_config() == search.get_config()


def compile_and_compare(search, **kwargs):
    """Runs `search` eagerly and compiled (XLA on TF, `jax.jit` on JAX)."""
    max_length = 6
    table = markov_table(10, max_length)
    attention = attention_table(11, max_length)
    next = markov_next(table, attention)
    prompt = np.zeros((2, max_length), "int32")
    prompt[:, 0] = [1, 2]

    def run(prompt):
        return search(next, prompt, index=1, stop_token_ids=[END], **kwargs)

    if keras.config.backend() == "tensorflow":
        import tensorflow as tf

        compiled = tf.function(run, jit_compile=True)
    else:
        import jax

        compiled = jax.jit(run)
    eager, fast = run(prompt), compiled(prompt)
    for a, b in zip(eager, fast):
        np.testing.assert_allclose(np_(a), np_(b), rtol=1e-5)
    return eager


@pytest.mark.tensorflow_only
def test_runs_under_tf_function_with_xla():
    seqs, scores = compile_and_compare(
        BeamSearch(3, coverage_penalty=0.3, return_all_beams=True)
    )
    assert np.all(np.isfinite(np_(scores)))


@pytest.mark.skipif(keras.config.backend() != "jax", reason="needs the JAX backend")
def test_runs_under_jax_jit():
    seqs, scores = compile_and_compare(
        BeamSearch(3, coverage_penalty=0.3, return_all_beams=True)
    )
    assert np.all(np.isfinite(np_(scores)))


# === `static_cache`: tiled once, never reordered, same results as `cache` ===


def split_model(model):
    """`model` with its per-example offset passed as the static cache."""

    def next(prompt, cache, index, static):
        logits, hidden, cache = model(prompt, {**cache, **static}, index)
        return logits, hidden, {k: v for k, v in cache.items() if k != "offset"}

    return next


@pytest.mark.parametrize("search", [BeamSearch(3, length_penalty=0.6), GreedySearch()])
@pytest.mark.parametrize("stop_token_ids", [None, [END]])
def test_static_cache_gives_the_results_of_cache(search, stop_token_ids):
    model = RunningSumModel(6, max_length=7)
    prompt = np.zeros((3, 7), "int32")
    prompt[:, 0] = [1, 2, 1]
    cache = model.initial_cache([0, 3, 5])
    kwargs = dict(stop_token_ids=stop_token_ids, return_scores=True)
    seqs, scores = decode(search, model, prompt, cache, **kwargs)
    static = {"offset": cache.pop("offset")}
    split_seqs, split_scores = decode(
        search, split_model(model), prompt, cache, static_cache=static, **kwargs
    )
    np.testing.assert_array_equal(np_(split_seqs), np_(seqs))
    np.testing.assert_allclose(np_(split_scores), np_(scores), rtol=1e-6)


def test_static_cache_is_tiled_per_beam_and_never_reordered():
    seen = []

    def next(prompt, cache, index, static):
        seen.append(static)
        logits = ops.one_hot(ops.full((ops.shape(prompt)[0],), END), 5) * 5.0
        return logits, None, cache

    prompt = np.zeros((2, 3), "int32")
    static = {"source": np.array([[1.0, 2.0], [3.0, 4.0]], "float32")}
    search = BeamSearch(2, length_penalty=0.0)
    search(next, prompt, index=1, stop_token_ids=[END], static_cache=static)
    tiled = np_(seen[0]["source"])
    np.testing.assert_array_equal(tiled, [[1, 2], [1, 2], [3, 4], [3, 4]])


def test_two_stop_tokens_match_the_separate_rankings():
    # With two stop ids, the candidates that do not stop lie among the best
    # `width * 3`; every kept hypothesis must beat any dropped one.
    rng = np.random.default_rng(3)
    table = rng.normal(size=(6, 6, 6)).astype("float32") * 2.0

    def next(prompt, cache, index):
        last = ops.take(prompt, index - 1, axis=1)
        return ops.take(ops.take(table, index, axis=0), last, axis=0), None, cache

    prompt = np.zeros((1, 6), "int32")
    search = BeamSearch(6 * 6, length_penalty=0.0, return_all_beams=True)
    seqs, scores = decode(search, next, prompt, stop_token_ids=[4, 5])
    seqs, scores = np_(seqs)[0], np_(scores)[0]
    log_probs = table - np.log(np.exp(table).sum(-1, keepdims=True))
    for seq, score in zip(seqs, scores):
        if not np.isfinite(score):
            continue
        total, t = 0.0, 1
        while t < 6:
            total += log_probs[t, seq[t - 1], seq[t]]
            if seq[t] in (4, 5):
                break
            t += 1
        np.testing.assert_allclose(score, total, rtol=1e-5, atol=1e-5)
    assert np.all(np.diff(scores[np.isfinite(scores)]) <= 1e-6)


# === `top_k_by_blocks`: exactly `ops.top_k`, ties and -inf included ===


@pytest.mark.parametrize("k", [1, 4, 9])
def test_top_k_by_blocks_equals_top_k(k):
    from keras_attention.decoding.beam_search import top_k_by_blocks

    rng = np.random.default_rng(k)
    x = rng.integers(0, 40, size=(5, 3001)).astype("float32")  # many ties
    x[1] = -np.inf  # a dead row
    x[2, :2000] = -np.inf
    values, indices = top_k_by_blocks(x, k, block=32)
    expected_values, expected_indices = ops.top_k(x, k)
    np.testing.assert_array_equal(np_(values), np_(expected_values))
    # Each index holds its value, once per row.
    indices = np_(indices)
    np.testing.assert_array_equal(np.take_along_axis(x, indices, -1), np_(values))
    assert all(len(set(row)) == k for row in indices)
    if keras.config.backend() != "torch":
        # Ties by the lower index, as the backend's top_k (PyTorch's
        # `topk` does not order tied entries).
        np.testing.assert_array_equal(indices, np_(expected_indices))


def test_beam_search_over_a_large_vocabulary_equals_plain_top_k(monkeypatch):
    from keras_attention.decoding import beam_search

    rng = np.random.default_rng(11)
    vocab = 2 * 4 * beam_search.TOP_K_BLOCK + 7  # takes the blocks
    table = rng.normal(size=(vocab, vocab)).astype("float32") * 3.0

    def next(prompt, cache, index):
        last = ops.take(prompt, index - 1, axis=1)
        return ops.take(table, last, axis=0), None, cache

    prompt = np.zeros((2, 6), "int32")
    prompt[:, 0] = [3, 5]
    search = BeamSearch(3, length_penalty=0.6, return_all_beams=True)
    seqs, scores = decode(search, next, prompt, stop_token_ids=[7])
    monkeypatch.setattr(beam_search, "top_k_by_blocks", ops.top_k)
    plain_seqs, plain_scores = decode(search, next, prompt, stop_token_ids=[7])
    np.testing.assert_array_equal(np_(seqs), np_(plain_seqs))
    # Two graphs (under JAX, two jit compilations): the same values picked,
    # but the arithmetic around them may be fused differently (issue 38).
    np.testing.assert_allclose(np_(scores), np_(plain_scores), rtol=1e-6)


# === `drop_finished`: the loop that drops finished rows (TensorFlow) ===


@pytest.mark.tensorflow_only
@pytest.mark.parametrize(
    "search",
    [
        BeamSearch(3, length_penalty=0.6, return_all_beams=True),
        GreedySearch(),
    ],
)
def test_dropping_finished_rows_changes_no_result(search):
    import tensorflow as tf

    model = RunningSumModel(11, max_length=9)
    offsets = [0, 3, 5, 1, 6, 2]
    prompt = np.zeros((len(offsets), 9), "int32")
    prompt[:, 0] = [1, 2, 1, 3, 0, 2]
    cache = model.initial_cache(offsets)
    static = {"offset": cache.pop("offset")}

    @tf.function
    def run(**options):
        return search(
            split_model(model),
            prompt,
            cache,
            1,
            stop_token_ids=[END],
            return_scores=True,
            static_cache=static,
            **options,
        )

    (want_ids, want_scores), (ids, scores) = run(), run(drop_finished=2)
    np.testing.assert_array_equal(np_(ids), np_(want_ids))
    # Other batch shapes in the dropping graph: the same tokens, their
    # log-probabilities summed by other kernels (a tolerance, not equality).
    np.testing.assert_allclose(np_(scores), np_(want_scores), rtol=1e-6)
