"""`evaluate` of a captioner and of RAM: progress as for translators.

Keras's progress bar on standard error, only when it is a terminal;
standard output keeps the scores (`zoo/progress.py`'s convention).
"""

import numpy as np
import pytest

from zoo import progress
from zoo.captioning import evaluation as captioning
from zoo.data import fashion_mnist
from zoo.ram import evaluation as ram

SCENES = 25


@pytest.fixture
def terminal(monkeypatch):
    monkeypatch.setattr(progress, "shown", lambda stream=None: True)


class Echo:
    """A captioner that says "a bag" for every scene, with flat attention."""

    attention = "echo"

    def __init__(self):
        self.calls = []

    def caption(self, images, beam_width, return_attention):
        self.calls.append(len(images))
        maps = [{"tokens": ["a", "bag"], "weights": np.ones((2, 2, 2)) / 4}]
        return ["a bag"] * len(images), maps * len(images)


def _scenes(count):
    return {
        "images": np.zeros((count, 8, 8, 1), "uint8"),
        "captions": ["a bag"] * count,
        "labels": -np.ones((count, 1), "int64"),
        "boxes": np.zeros((count, 1, 4), "int64"),
    }


def test_evaluating_a_captioner_draws_a_bar_per_search(terminal, monkeypatch, capsys):
    monkeypatch.setattr(captioning, "CAPTION_BATCH", 10)
    model = Echo()
    scores = captioning.evaluate_scenes(model, _scenes(SCENES), beam_widths=(1, 3))
    assert scores["beam1"]["bleu1"] == scores["beam3"]["bleu1"] == 100.0
    assert model.calls == [10, 10, 5] * 2
    captured = capsys.readouterr()
    assert "echo beam 1: BLEU-1 100.00" in captured.out
    assert f"{SCENES}/{SCENES}" not in captured.out
    assert "beam 3: compiling the search (first call)" in captured.err
    assert captured.err.count(f"{SCENES}/{SCENES}") >= 2


def test_evaluating_a_captioner_without_a_terminal_draws_nothing(capsys):
    model = Echo()
    scores = captioning.evaluate_scenes(model, _scenes(SCENES), beam_widths=(1,))
    assert scores["beam1"]["exact_match"] == 100.0 and model.calls == [SCENES]
    assert capsys.readouterr().err == ""


class Classifier:
    """A RAM stand-in: class 0 for every image; `predict` as Keras's."""

    def __init__(self):
        self.calls = []

    def predict(self, images, batch_size=None, verbose="auto"):
        self.calls.append((len(images), verbose))
        return np.eye(10)[np.zeros(len(images), int)]


@pytest.fixture
def items(monkeypatch):
    def load(split, variant, canvas_size, seed, path=None):
        return np.zeros((SCENES, 28, 28), "uint8"), np.zeros(SCENES, "int64")

    monkeypatch.setattr(fashion_mnist, "load", load)


def test_evaluating_ram_draws_a_bar_on_stderr_only(
    terminal, items, monkeypatch, capsys
):
    monkeypatch.setattr(ram, "PREDICT_BATCH", 10)
    model = Classifier()
    assert ram.evaluate_classifier(model) == 0.0
    assert model.calls == [(10, 0), (10, 0), (5, 0)]  # Keras's own bar: off
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [
        f"translated 28x28 Fashion-MNIST test: error 0.00% ({SCENES} images)"
    ]
    assert "compiling the model (first call)" in captured.err
    assert f"{SCENES}/{SCENES}" in captured.err


def test_evaluating_ram_without_a_terminal_prints_only_the_error(items, capsys):
    model = Classifier()
    assert ram.evaluate_classifier(model) == 0.0
    assert model.calls == [(SCENES, 0)]
    captured = capsys.readouterr()
    assert captured.err == "" and len(captured.out.splitlines()) == 1
