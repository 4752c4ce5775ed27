"""`--quantize int8` says once which layers stay float, in the project's format.

Keras's `Model.quantize` warns once per layer kind it cannot convert
("Layer GRUCell does not have a `quantize` method implemented."), in
Python's format. `Task.quantize` hands Keras only the layers it can
convert, and names the others with a kernel in one warning, which the
command line prints as one `warning:` line.
"""

import os
import sys
import warnings

import keras
import pytest

from zoo import cli

pytestmark = pytest.mark.tensorflow_only

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
ITEM = os.path.join(ROOT, "examples", "images", "item.png")


@pytest.mark.parametrize(
    "argv, kinds",  # the layers with a kernel that Keras cannot quantize
    [
        (
            ["translate", "seq2seq_bahdanau_bible_en_es", "Jesus wept.", "--beam", "1"],
            "4 layers float, their kernels as trained: 1 Additive, 3 GRUCell",
        ),
        (
            ["classify", "ram_fashion_mnist_translated_seeking_annealed", ITEM],
            "1 layer float, its kernels as trained: 1 LSTMCell",
        ),
    ],
    ids=["seq2seq", "ram"],
)
def test_quantize_prints_one_warning_line_and_no_keras_line(
    argv, kinds, monkeypatch, capsys
):
    # As `python -m zoo` runs it; what is not the project's reaches `caught`.
    monkeypatch.setattr(sys, "argv", ["keras-attention", *argv, "--quantize", "int8"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert cli.main() == 0
    theirs = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
    assert not [text for text in theirs if "quantize" in text], theirs
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"warning: int8 leaves {kinds} (Keras {keras.__version__} has no int8 "
        "form for them)."
    ]
