"""Every zoo backbone gives the same outputs on JAX as on TensorFlow.

A backbone's math is `keras.ops` only. Each case (the `JAX_CASES` of the
zoo's `test_backbone.py` files) is built here on TensorFlow with weights no
fresh model has, run on fixed inputs and saved (config, weights, inputs).
One JAX process (`KERAS_BACKEND=jax`, started once for all of them: most of
its time is the imports and XLA compiling each operation once, at the LLVM
-O0 of the XLA_FLAGS it inherits from the root `conftest.py`) rebuilds each
from its config, loads its weights, runs the same inputs, and for the
stochastic ones also runs a sampled (`training=True`) pass, which must be
finite.
"""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import families  # noqa: E402

pytestmark = pytest.mark.tensorflow_only

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))

JAX_SCRIPT = textwrap.dedent(
    """
    import importlib, json, sys
    import numpy as np
    import keras
    assert keras.backend.backend() == "jax", keras.backend.backend()
    for job in json.load(open(sys.argv[1])):
        module = importlib.import_module(job["module"])
        backbone = getattr(module, job["class"]).from_config(job["config"])
        backbone.load_weights(job["weights"])
        x = dict(np.load(job["inputs"]))
        outputs = {k: np.asarray(v) for k, v in backbone(x).items()}
        if job["sampled"]:
            sampled = np.asarray(backbone(x, training=True)[job["sampled"]])
            outputs["sampled"] = np.isfinite(sampled).all()
        np.savez(job["out"], **outputs)
    """
)


CASES = families.cases("JAX_CASES")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """TF outputs, JAX outputs (None where missing) and the JAX stderr."""
    folder = tmp_path_factory.mktemp("backbones_on_jax")
    jobs, expected = [], {}
    for name, build in CASES.items():
        backbone, x, sampled, tolerance = build()
        outputs = {k: np.asarray(v) for k, v in backbone(x).items()}
        expected[name] = outputs, sampled, tolerance
        backbone.save_weights(str(folder / f"{name}.weights.h5"))
        np.savez(folder / f"{name}_inputs.npz", **x)
        jobs.append(
            {
                "module": type(backbone).__module__,
                "class": type(backbone).__name__,
                "config": backbone.get_config(),
                "weights": str(folder / f"{name}.weights.h5"),
                "inputs": str(folder / f"{name}_inputs.npz"),
                "sampled": sampled,
                "out": str(folder / f"{name}_jax.npz"),
            }
        )
    (folder / "jobs.json").write_text(json.dumps(jobs))
    done = subprocess.run(
        [sys.executable, "-c", JAX_SCRIPT, str(folder / "jobs.json")],
        env=dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu"),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    found = {}
    for name in CASES:
        path = folder / f"{name}_jax.npz"
        found[name] = dict(np.load(path)) if path.exists() else None
    return expected, found, done.stderr[-3000:]


@pytest.mark.parametrize("name", list(CASES))
def test_forward_on_jax_equals_tensorflow(runs, name):
    expected, found, stderr = runs
    got = found[name]
    assert got is not None, stderr
    outputs, sampled, tolerance = expected[name]
    if sampled:
        assert got.pop("sampled"), f"{sampled} of a sampled pass is not finite"
    assert sorted(got) == sorted(outputs)
    for key, value in outputs.items():
        np.testing.assert_allclose(got[key], value, err_msg=key, **tolerance)
    if name.startswith("show_attend_tell"):
        # The padded steps of row 1 repeat its last real step, on JAX too.
        for key in ("hidden_states", "contexts"):
            np.testing.assert_array_equal(
                got[key][1, 3:], got[key][1, 2:3].repeat(2, 0)
            )
