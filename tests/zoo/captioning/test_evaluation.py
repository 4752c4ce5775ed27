"""BLEU-1..4 and attention correctness against hand computations."""

import math
import os

import numpy as np
import pytest

from zoo.captioning.evaluation import (
    attention_correctness,
    attention_in_box,
    bleu_scores,
    caption_errors,
)
from zoo.captioning.plotting import plot_caption_attention


def test_bleu_orders_against_hand_computation():
    hyp = ["a bag above a coat"]
    ref = ["a bag below a coat"]
    scores = bleu_scores(hyp, ref)
    # Same length (no brevity penalty); matches: 4/5 unigrams, 2/4 bigrams,
    # 0/3 trigrams (sacreBLEU's exp smoothing: 1/2 for the first zero),
    # 0/2 four-grams (1/4).
    p = [4 / 5, 2 / 4, 0.5 / 3, 0.25 / 2]
    for n in range(1, 5):
        expected = 100 * math.exp(sum(math.log(x) for x in p[:n]) / n)
        assert scores[f"bleu{n}"] == pytest.approx(expected, abs=0.01)
    assert bleu_scores(hyp, [["x", "a bag above a coat"]])["bleu4"] == 100.0
    with pytest.raises(ValueError):
        bleu_scores(hyp, [])


def test_attention_in_box_peak_and_mass():
    weights = np.zeros((3, 3))
    weights[1, 2] = 0.6
    weights[0, 0] = 0.4
    # 30x30 image: cell (1, 2) covers rows 10-20, columns 20-30.
    assert attention_in_box(weights, (10, 20, 20, 30), (30, 30)) == (True, 0.6)
    assert attention_in_box(weights, (0, 0, 10, 10), (30, 30)) == (False, 0.4)
    # Half a cell inside the box brings half its weight; the peak cell's
    # centre (15, 25) lies on the box's (inclusive) left edge.
    peak, mass = attention_in_box(weights, (10, 25, 20, 30), (30, 30))
    assert peak and mass == pytest.approx(0.3)
    peak, mass = attention_in_box(weights, (10, 26, 20, 30), (30, 30))
    assert not peak and mass == pytest.approx(0.24)


def test_attention_correctness_counts_only_nouns_of_the_scene():
    w_right = np.zeros((2, 2))
    w_right[0, 1] = 1.0
    w_left = np.zeros((2, 2))
    w_left[1, 0] = 1.0
    maps = [
        {
            "tokens": ["a", "bag", "and", "coat", "shirt", "[END]"],
            "weights": np.stack([w_left, w_right, w_left, w_left, w_left, w_left]),
        }
    ]
    labels = np.array([[8, 4]])  # bag, coat; "shirt" is not in the scene
    boxes = np.array([[(0, 10, 10, 20), (0, 0, 10, 10)]])
    result = attention_correctness(maps, labels, boxes, (20, 20))
    # bag: peak at the top-right cell, inside its box; coat: bottom-left, not.
    assert result == {
        "nouns": 2,
        "peak": 50.0,
        "mass": 50.0,
        "either": 50.0,
        "mean_mass": 50.0,
    }


def test_plot_caption_attention_writes_one_panel_per_word(tmp_path):
    image = np.random.default_rng(0).integers(0, 255, (84, 84, 1), dtype="uint8")
    weights = np.random.default_rng(1).random((3, 7, 7))
    path = plot_caption_attention(
        image, ["a", "bag", "[END]"], weights, str(tmp_path / "f" / "c.png"), "a bag"
    )
    assert os.path.getsize(path) > 1000
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="tokens"):
        plot_caption_attention(image, ["a"], weights, str(tmp_path / "x.png"))


def test_attention_correctness_offset_checks_the_step_before_the_noun():
    right = np.zeros((2, 2))
    right[0, 1] = 1.0
    left = np.zeros((2, 2))
    left[1, 0] = 1.0
    maps = [{"tokens": ["a", "bag", "[END]"], "weights": np.stack([right, left, left])}]
    labels, boxes = np.array([[8]]), np.array([[(0, 10, 10, 20)]])
    assert attention_correctness(maps, labels, boxes, (20, 20))["peak"] == 0.0
    early = attention_correctness(maps, labels, boxes, (20, 20), offset=-1)
    assert early["peak"] == 100.0 and early["nouns"] == 1


def test_caption_errors_sorts_mistakes_by_kind():
    hyps = ["a top", "a bag below a coat", "a bag", "a top above a bag", "a coat"]
    refs = [
        "a shirt",
        "a bag above a coat",
        "a bag above a coat",
        "a shirt below a bag",
        "a coat",
    ]
    errors = caption_errors(hyps, refs)
    assert {
        k: errors[k] for k in ("exact", "noun", "relation", "noun+relation", "count")
    } == {
        "exact": 1,
        "noun": 1,
        "relation": 1,
        "noun+relation": 1,
        "count": 1,
    }
    assert errors["substitutions"] == {"shirt->top": 2}
