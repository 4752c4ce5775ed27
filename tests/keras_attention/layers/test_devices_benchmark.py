"""`benchmarks/attention_devices.py` runs without TensorFlow and keras-hub.

The GPU machine it is written for has JAX and PyTorch but neither of them:
a worker row runs here in a subprocess whose imports of `tensorflow` and
`keras_hub` fail, and its output must equal Keras's layer's.
"""

import json
import os
import subprocess
import sys

import keras
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
BLOCKED = """
import runpy, sys

# As if not installed: `import` raises ModuleNotFoundError and
# `importlib.util.find_spec` returns None.
sys.modules["tensorflow"] = None
sys.modules["keras_hub"] = None
sys.argv = sys.argv[1:]  # drop "-c": the script and its arguments
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def _worker_rows(backend, *arguments):
    """The rows a worker of the script prints on `backend`, TensorFlow and
    keras-hub blocked."""
    script = os.path.join(ROOT, "benchmarks", "attention_devices.py")
    env = {**os.environ, "KERAS_BACKEND": backend, "PYTHONPATH": ROOT}
    command = [sys.executable, "-c", BLOCKED, script, "--worker", *arguments]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return [json.loads(x) for x in done.stdout.splitlines() if x.startswith("{")]


def test_a_row_without_tensorflow_or_keras_hub():
    """A row on this pass's backend: JAX's and PyTorch's passes run it (the
    script cannot run on TensorFlow, which it blocks; the TensorFlow pass's
    run would be the JAX pass's again)."""
    backend = keras.config.backend()
    if backend not in ("jax", "torch"):
        pytest.skip("the JAX pass runs this row")
    rows = _worker_rows(
        backend, "--dtypes=float32", "--lengths=16", "--mask-lengths=16", "--repeats=1"
    )
    assert [(r["T"], r["mask"]) for r in rows] == [
        (16, "none"),
        (16, "causal"),
        (16, "padding"),
    ]
    for row in rows:
        assert row["backend"] == backend and row["path"] == "fused"
        assert row["ours"]["ms"] > 0 and row["keras"]["ms"] > 0
        assert row["max_abs_diff"] < 1e-4


def test_the_triton_rows_in_pallas_interpreter():
    """Session 26's rows (`gpu_run_s26.sh`) on a stubbed GPU: a shared
    padding mask and the one-head layers take JAX's Triton kernel, beside
    Keras's layers, with the same outputs on the kept rows."""
    if keras.config.backend() != "jax":
        pytest.skip("JAX's Triton kernel")
    rows = _worker_rows(
        "jax",
        "--interpret",
        "--dtypes=float32",
        "--layers=mha,attention,image",
        "--lengths=",
        "--mask-lengths=128",
        "--masks=padding,shared-padding",
        "--image-sides=9",
        "--chunk-threshold=32",
        "--repeats=1",
    )
    assert [(r["layer"], r["T"], r["mask"], r["path"]) for r in rows] == [
        ("mha", 128, "padding", "chunked"),
        ("mha", 128, "shared-padding", "triton flash"),
        ("attention", 128, "padding", "chunked"),
        ("attention", 128, "shared-padding", "triton flash"),
        ("image", 81, "none", "triton flash"),
    ]
    for row in rows:
        assert row["max_abs_diff"] < 1e-4
