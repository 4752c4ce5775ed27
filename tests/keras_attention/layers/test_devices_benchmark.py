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


def _script():
    import runpy

    path = os.path.join(ROOT, "benchmarks", "attention_devices.py")
    return runpy.run_path(path, run_name="attention_devices")


def test_keras_and_ours_are_timed_in_the_same_rounds():
    """Each round times both, the first one of a round alternating, so a
    drift of the load falls on both alike (session 27's leftover: Keras's
    layer was timed before ours on every row)."""
    calls = []
    runs = {name: (lambda name=name: calls.append(name)) for name in ("keras", "ours")}
    medians = _script()["_interleaved_medians"](runs, 3)
    assert calls == ["keras", "ours", "ours", "keras", "keras", "ours"]
    assert sorted(medians) == ["keras", "ours"]
    assert all(seconds >= 0 for seconds in medians.values())


@pytest.mark.skipif(sys.platform != "linux", reason="the resident set of Linux")
@pytest.mark.skipif(
    keras.config.backend() != "tensorflow",
    reason="its workers run PyTorch whatever this pass's backend: once is enough",
)
def test_cpu_memory_comes_from_a_second_process():
    """On a CPU the times come from a process with glibc's default
    allocator and the resident-set growth from one that maps each large
    buffer afresh (`MALLOC_MMAP_THRESHOLD_`): both cells are filled."""
    main = _script()["main"]
    rows = main(
        [
            "--backends=torch",
            "--dtypes=float32",
            "--lengths=16",
            "--mask-lengths=",
            "--repeats=1",
        ]
    )
    assert len(rows) == 1 and rows[0]["device"] == "cpu"
    for name in ("keras", "ours"):
        assert rows[0][name]["ms"] > 0
        assert rows[0][name]["mib"] is not None and rows[0][name]["mib"] >= 0


def test_the_grouped_query_rows():
    """The GQA rows beside Keras's `GroupQueryAttention`: equal outputs
    without a hook; a hook's row runs (its difference is the hook's)."""
    backend = keras.config.backend()
    if backend not in ("jax", "torch"):
        pytest.skip("the JAX and PyTorch passes run these rows")
    rows = _worker_rows(
        backend,
        "--dtypes=float32",
        "--layers=gqa,gqa-softcap",
        "--lengths=16",
        "--mask-lengths=",
        "--repeats=1",
    )
    assert [(r["layer"], r["T"]) for r in rows] == [("gqa", 16), ("gqa-softcap", 16)]
    assert rows[0]["max_abs_diff"] < 1e-4
    assert rows[1]["ours"]["ms"] > 0
