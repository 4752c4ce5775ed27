"""experiments/gpu: the GPU run's `--smoke` on the CPU, TensorFlow hidden.

The arrays are written here (with TensorFlow, the shipped preset's
preprocessor, 64 sample pairs); the script runs in a subprocess under JAX,
where it hides TensorFlow itself; its weights then load into the shipped
preprocessor's Transformer, as `evaluate_gpu_weights.py` does on the CPU.
"""

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from zoo.data import bible, parallel_text
from zoo.translation.arrays import write_arrays

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GPU = os.path.join(ROOT, "experiments", "gpu")
PRESET = "transformer_bible_en_es"


def _evaluation_module():
    path = os.path.join(GPU, "evaluate_gpu_weights.py")
    spec = importlib.util.spec_from_file_location("evaluate_gpu_weights", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_smoke_run_trains_without_tensorflow_and_its_weights_load(tmp_path):
    if importlib.util.find_spec("jax") is None:
        pytest.skip("jax is not installed")
    import zoo

    pairs = parallel_text.read_tsv(bible.sample_path("train"))[:64]
    preprocessor = zoo.from_preset(PRESET, load_weights=False).preprocessor
    arrays = tmp_path / "arrays.npz"
    write_arrays(arrays, preprocessor, {"train": pairs[:48], "validation": pairs[48:]})
    out = tmp_path / "run"
    env = {**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": ROOT}
    done = subprocess.run(
        [
            sys.executable,
            os.path.join(GPU, "train_transformer_gpu.py"),
            "--smoke",
            "--arrays",
            str(arrays),
            "--out",
            str(out),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "MFU" in done.stdout and "target subwords/s" in done.stdout
    run = json.loads((out / "run.json").read_text())
    assert run["measures"]["steps"] == 20
    assert run["measures"]["peak_flops"] == 989.4e12
    losses = [p["loss"] for p in run["loss_curve"] if "loss" in p]
    assert len(losses) == 4 and losses[-1] < losses[0]
    assert any("val_loss" in p for p in run["loss_curve"])

    model, _ = _evaluation_module().load(out, PRESET)
    with np.load(out / "weights.npz") as stored:
        first = stored["arr_0"]
    np.testing.assert_array_equal(model.get_weights()[0], first)
    assert len(model.translate(["In the beginning."], beam_width=2)) == 1
