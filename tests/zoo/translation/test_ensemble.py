"""`zoo.translation.ensemble`: translators decoding on their mean step log-probabilities."""

import os
import sys

import keras
import numpy as np
import pytest

from zoo.base.generation import make_search
from zoo.translation import ensemble

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import tiny_models  # noqa: E402

# Random tiny models seldom write [END] within the few steps run here.
pytestmark = pytest.mark.filterwarnings("ignore:.*stop mid-sentence")

TEXTS = [
    "In the beginning God created the heavens.",
    "And the earth was void.",
    "Jesus wept.",
]


def _translator(seed):
    # Random weights (std 0.3): a fresh tiny model's answers are nearly uniform.
    return tiny_models.randomized(tiny_models.transformer(seed), 0.3, seed=seed + 1)


def _log_softmax(logits):
    logits = np.asarray(logits, "float64")
    shifted = logits - logits.max(-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


@pytest.mark.parametrize("beam_width", [1, 3])
def test_an_ensemble_of_a_model_with_itself_translates_as_the_model(beam_width):
    model = _translator(0)
    options = dict(beam_width=beam_width, max_length=12)
    expected = model.translate(TEXTS, **options)
    assert ensemble([model]).translate(TEXTS, **options) == expected
    assert ensemble([model, model]).translate(TEXTS, **options) == expected


def test_two_models_decode_on_their_mean_log_probabilities():
    first, second = _translator(0), _translator(1)
    pair = ensemble([first, second])
    ids = [first.preprocessor(keras.ops.convert_to_tensor(TEXTS))["encoder_token_ids"]]
    ids = [np.asarray(ids[0])] * 2  # one joint vocabulary: the same source ids
    prompt = np.zeros((len(TEXTS), 5), "int32")
    prompt[:, 0] = first.preprocessor.start_id
    cache = pair.encode(ids, 4)
    log_probs, attention, _ = pair.next(prompt, cache, 1)
    members = [
        _log_softmax(model.next(prompt, model.encode(ids[0], 4), 1)[0])
        for model in (first, second)
    ]
    assert not np.allclose(members[0], members[1], atol=1e-3)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(log_probs), np.mean(members, axis=0), atol=1e-5
    )
    assert keras.ops.shape(attention) == (len(TEXTS), ids[0].shape[1])
    # Greedy decoding follows the mean: its first subwords are its argmax.
    tokens = pair.generate(ids, beam_width=1, max_length=4)
    np.testing.assert_array_equal(tokens[:, 1], np.mean(members, axis=0).argmax(-1))
    # The compiled search (one per configuration) gives the eager search's ids.
    pre = first.preprocessor
    for beam_width in (1, 3):
        search = make_search(beam_width, length_penalty=0.0)
        eager = search(
            pair.next,
            keras.ops.convert_to_tensor(prompt),
            cache=pair.encode(ids, 4),
            index=1,
            stop_token_ids=[int(pre.end_id)],
            pad_token_id=int(pre.pad_id),
        )
        np.testing.assert_array_equal(
            pair.generate(ids, beam_width=beam_width, max_length=4),
            keras.ops.convert_to_numpy(eager),
        )
    assert len(pair._search_functions) == 2
    translations = pair.translate(TEXTS, beam_width=2, max_length=12)
    assert len(translations) == len(TEXTS) and all(
        isinstance(t, str) for t in translations
    )


def test_models_of_different_target_vocabularies_are_refused_naming_both():
    transformer, seq2seq = _translator(0), tiny_models.seq2seq(0)
    with pytest.raises(
        ValueError,
        match=r"model 0 \(transformer\w*\) has \d+ target subwords, model 1 \(seq2_seq",
    ):
        ensemble([transformer, seq2seq])
    with pytest.raises(ValueError, match="at least one"):
        ensemble([])
