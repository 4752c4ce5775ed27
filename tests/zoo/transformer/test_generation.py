"""`Transformer.encode` / `next` under the zoo's one generation front end."""

import numpy as np
import pytest
from keras import ops

pytestmark = pytest.mark.tensorflow_only


@pytest.mark.parametrize(
    "kwargs", [{}, {"normalize_first": True}, {"score": "general"}]
)
def test_cached_steps_equal_teacher_forcing(kwargs, h):
    model = h.tiny(**kwargs)
    h.randomize(model)
    x, _, _ = h.prepared(model)
    reference = h.logits(model, x)
    prompt = x["decoder_token_ids"]
    heads = model.head_attention(
        x["encoder_token_ids"], np.pad(prompt, ((0, 0), (0, 1)))
    )
    cache = model.encode(x["encoder_token_ids"], prompt.shape[1])
    for t in range(prompt.shape[1]):
        logits, attention, cache = model.next(prompt, cache, t + 1)
        np.testing.assert_allclose(np.asarray(logits), reference[:, t], atol=1e-5)
        assert attention.dtype == "float32"
        np.testing.assert_allclose(
            np.asarray(attention), heads[:, :, t].mean(1), atol=1e-5
        )


def reference_greedy(model, ids, steps):
    """Greedy decoding by re-running the whole model on the prefix each step."""
    pre = model.preprocessor
    tokens = np.full((len(ids), steps + 1), pre.pad_id, "int32")
    tokens[:, 0] = pre.start_id
    done = np.zeros(len(ids), bool)
    for t in range(steps):
        x = {"encoder_token_ids": ids, "decoder_token_ids": tokens[:, : t + 1]}
        best = np.asarray(model(x))[:, -1].argmax(-1)
        tokens[:, t + 1] = np.where(done, pre.pad_id, best)
        done |= best == pre.end_id
    return tokens


def test_generate_equals_decoding_without_a_cache(h):
    model = h.tiny()
    h.randomize(model, scale=0.2)
    ids = h.prepared(model)[0]["encoder_token_ids"]
    tokens = model.generate(ids, max_length=12)
    np.testing.assert_array_equal(tokens, reference_greedy(model, ids, 12))
    # Beam search with one beam is greedy search.
    np.testing.assert_array_equal(
        model.generate(ids, beam_width=1), model.generate(ids)
    )


def test_coverage_penalty_reads_the_attention_of_next(h):
    model = h.tiny()
    h.randomize(model, scale=0.2)
    ids = h.prepared(model)[0]["encoder_token_ids"]
    plain = model.generate(ids, beam_width=3, max_length=8)
    covered = model.generate(ids, beam_width=3, max_length=8, coverage_penalty=5.0)
    assert covered.shape == plain.shape == (len(ids), 9)
    assert np.all(covered[:, 0] == model.preprocessor.start_id)


def test_translate_returns_mean_and_per_head_cross_attention(h):
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
        np.testing.assert_allclose(alignment["weights"], weights.mean(0), atol=1e-5)
        assert target_length == len(alignment["target_tokens"]) >= 1
        assert source_length == len(alignment["source_tokens"])
        assert alignment["source_tokens"][-1] == "[END]"
        np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)


def test_encode_accepts_the_preprocessor_dict(h):
    model = h.tiny()
    x = h.prepared(model)[0]
    a = model.encode(x["encoder_token_ids"], 4)
    b = model.encode({"encoder_token_ids": x["encoder_token_ids"]}, 4)
    for u, v in zip(
        ops.convert_to_numpy(a["cross_attention_cache"][0]),
        ops.convert_to_numpy(b["cross_attention_cache"][0]),
    ):
        np.testing.assert_array_equal(u, v)
