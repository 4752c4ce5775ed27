"""examples/image_attention_fashion_mnist.py trains on the shipped sample."""

import importlib.util
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _example():
    path = os.path.join(ROOT, "examples", "image_attention_fashion_mnist.py")
    spec = importlib.util.spec_from_file_location("image_attention_example", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_learns_on_the_sample_with_the_chunked_path(capsys):
    # Two epochs, and the chunked path (196 positions > 64): 10 classes, so
    # chance is 0.1; the gate has moved away from its initial 0.
    accuracy, gamma = _example().main(["--epochs=2", "--chunk-threshold=64"])
    assert accuracy > 0.4
    assert gamma != 0.0
    assert "test accuracy:" in capsys.readouterr().out
