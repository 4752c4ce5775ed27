"""`Transformer` decoding: the cache changes nothing, `translate`."""

import numpy as np
import pytest
import tensorflow as tf

from keras_attention.decoding import BeamSearch, GreedySearch

pytestmark = pytest.mark.tensorflow_only


# === Cached decoding ===


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"normalize_first": True}, {"score": "general"}],
)
def test_cached_next_matches_teacher_forcing(kwargs, h):
    model = h.tiny(**kwargs)
    h.randomize(model)
    x, _, _ = h.prepared(model)
    reference = h.logits(model, x)
    prompt = x["decoder_token_ids"]
    cache = model.encode(x["encoder_token_ids"], prompt.shape[1])
    memory = model.encode_uncached(x["encoder_token_ids"])
    for t in range(prompt.shape[1]):
        step, _, cache = model.next(prompt, cache, t + 1)
        np.testing.assert_allclose(np.array(step), reference[:, t], atol=1e-5)
        uncached, _, _ = model.next_uncached(prompt, memory, t + 1)
        np.testing.assert_allclose(np.array(uncached), reference[:, t], atol=1e-5)


@pytest.mark.parametrize("search", [GreedySearch(), BeamSearch(beam_width=3)])
def test_cached_decoding_gives_the_uncached_tokens_and_logits(search, h):
    model = h.tiny()
    h.randomize(model, scale=0.2)
    x, _, _ = h.prepared(model)
    ids = x["encoder_token_ids"]
    prompt = np.zeros((len(ids), 13), "int32")
    prompt[:, 0] = model.preprocessor.target_start_id
    args = dict(index=1, stop_token_ids=[model.preprocessor.target_end_id])
    cached, cached_scores = search(
        model.next, prompt, cache=model.encode(ids, 13), return_scores=True, **args
    )
    uncached, uncached_scores = search(
        model.next_uncached,
        prompt,
        cache=model.encode_uncached(ids),
        return_scores=True,
        **args,
    )
    np.testing.assert_array_equal(np.array(cached), np.array(uncached))
    np.testing.assert_allclose(
        np.array(cached_scores), np.array(uncached_scores), atol=1e-4
    )
    # The compiled `generate` used by `translate` gives the same tokens.
    np.testing.assert_array_equal(
        model.generate(tf.constant(ids), search, 12), np.array(cached)
    )


def test_translate_returns_per_head_cross_attention(h):
    model = h.tiny()
    h.randomize(model, scale=0.2)
    texts, alignments = model.translate(
        h.SOURCES[:2], beam_width=2, max_length=6, return_attention=True
    )
    assert len(texts) == len(alignments) == 2 and all(isinstance(t, str) for t in texts)
    for alignment in alignments:
        weights = alignment["head_weights"]
        heads, target_length, source_length = weights.shape
        assert heads == 2
        np.testing.assert_allclose(alignment["weights"], weights.mean(0), atol=1e-6)
        assert target_length == len(alignment["target_tokens"]) >= 1
        assert source_length == len(alignment["source_tokens"])
        assert alignment["source_tokens"][-1] == "[END]"
        np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)
    single = model.translate(h.SOURCES[0], beam_width=1, max_length=6)
    assert isinstance(single, str)
    # Sorting by length inside `translate` keeps the input order.
    batch = model.translate(h.SOURCES, beam_width=1, max_length=6, batch_size=2)
    assert [model.translate(s, beam_width=1, max_length=6) for s in h.SOURCES] == batch
