"""The zoo's model code without TensorFlow, on JAX and PyTorch (#56 item 1).

One subprocess per backend (`without_tensorflow_worker.py`) makes
`tensorflow`, `tensorflow_text` and `tf_keras` unimportable, then runs
every family's tiny model through build, `fit` on arrays (2 steps),
greedy and beam decoding on ids (a classifier: `predict`), and
`save_to_preset` + `from_preset`; what needs TensorFlow (raw text) says so
in one line.
"""

import importlib.util
import json
import math
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FAMILIES = (
    "ram",
    "seq2seq",
    "show_attend_tell",
    "transformer",
    "transformer_captioner",
)


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_every_family_builds_fits_decodes_and_saves_without_tensorflow(
    backend, tmp_path
):
    if importlib.util.find_spec(backend) is None:
        pytest.skip(f"{backend} is not installed")
    out = tmp_path / "report.json"
    env = {**os.environ, "KERAS_BACKEND": backend, "PYTHONPATH": ROOT}
    done = subprocess.run(
        [sys.executable, os.path.join(HERE, "without_tensorflow_worker.py"), str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["backend"] == backend
    assert report["tensorflow_imported"] == []
    assert sorted(report["families"]) == sorted(FAMILIES)
    for name, result in report["families"].items():
        assert result["steps"] == 2, name
        assert all(math.isfinite(v) for v in result["loss"]), name
        assert result["same_after_loading"], name
        if name == "ram":
            assert result["shapes"] == {"predict": [4, 10]}
        else:  # [START] and 5 steps
            assert result["shapes"] == {"greedy": [4, 6], "beam": [4, 6]}, name
    assert report["text_error"].startswith("ImportError: Raw text needs TensorFlow")
