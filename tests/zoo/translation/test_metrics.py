"""Corpus BLEU / chrF through sacreBLEU, checked against hand-computed values."""

import math

import pytest

from zoo.translation.metrics import corpus_scores

pytestmark = pytest.mark.tensorflow_only  # zoo is TensorFlow-side.

REFERENCES = ["Y lloró Jesús.", "En el principio creó Dios los cielos y la tierra."]


def test_perfect_hypotheses_score_100():
    scores = corpus_scores(list(REFERENCES), REFERENCES)
    assert scores["bleu"] == 100.0
    assert scores["chrf"] == 100.0
    assert scores["sentences"] == 2


def test_signatures():
    scores = corpus_scores(["a b c d"], ["a b c d"])
    assert scores["bleu_signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a")
    assert "version:" in scores["bleu_signature"]
    assert scores["chrf_signature"].startswith("nrefs:1|case:mixed|eff:yes|nc:6")


def test_bleu_against_hand_computation():
    # BLEU = BP * exp(mean(log p_n)), p_n the clipped n-gram precisions,
    # BP = exp(1 - |ref| / |hyp|) for a short hypothesis. sacreBLEU's 13a
    # tokenizer leaves these lowercase words as they are.
    hypothesis, reference = "the cat sat on mat", "the cat sat on the mat"
    hyp, ref = hypothesis.split(), reference.split()
    precisions = []
    for n in range(1, 5):
        grams = [tuple(hyp[i : i + n]) for i in range(len(hyp) - n + 1)]
        ref_grams = [tuple(ref[i : i + n]) for i in range(len(ref) - n + 1)]
        matches = sum(min(grams.count(g), ref_grams.count(g)) for g in set(grams))
        precisions.append(matches / len(grams))
    assert precisions == [1.0, 3 / 4, 2 / 3, 1 / 2]  # No smoothing involved.
    brevity = math.exp(1 - len(ref) / len(hyp))
    expected = 100 * brevity * math.exp(sum(map(math.log, precisions)) / 4)
    scores = corpus_scores([hypothesis], [reference])
    assert scores["bleu"] == pytest.approx(expected, abs=0.006)  # Rounded to 2.
    assert 0 < scores["chrf"] < 100


def test_wrong_hypothesis_scores_low():
    scores = corpus_scores(["xyz"], ["Y lloró Jesús."])
    assert scores["bleu"] == 0.0
    assert scores["chrf"] < 10


def test_mismatched_lengths_raise():
    with pytest.raises(ValueError, match="2 hypotheses, 1 references"):
        corpus_scores(["a", "b"], ["a"])
