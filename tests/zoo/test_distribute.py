"""Zoo models train the same under MirroredStrategy as on one device.

Each zoo model (one entry of `tiny_models.CASES`) takes one `fit` step with
SGD on the same global batch of real samples, on one device and mirrored
over 2 logical CPUs (`distribute_worker.py`, in a fresh process because
logical devices must be set before TensorFlow starts). The loss and every
gradient must agree to float32 summation-order error.

Tolerance: |loss_mirrored - loss_one| <= 1e-5 * |loss_one| and, for every
gradient entry, |g_mirrored - g_one| <= 1e-6 (the largest gradient entry of
the tiny Seq2Seq is ~0.09, so ~1e-5 of it). Measured with a global token
normalisation: 2.6e-8. A loss averaged per replica instead of over the
global batch is off by ~5e-4 on the Seq2Seq batch (191 vs 180 target tokens
on the two replicas), 20,000 times the tolerance.
"""

import functools
import importlib.util
import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.tensorflow_only

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
_spec = importlib.util.spec_from_file_location(
    "tiny_models", os.path.join(HERE, "tiny_models.py")
)
tiny_models = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tiny_models)

LOSS_RTOL = 1e-5
GRADIENT_ATOL = 1e-6

# Models whose loss is still averaged per replica (Keras's default
# `sum_over_batch_size` divides by each replica's own token count), so
# mirrored gradients differ from one device's. `zoo.Task.compute_loss`
# rescales sample weights to the global count, so this is empty; strict
# xfail makes a listed model's test fail as soon as it is fixed.
PER_REPLICA_LOSS = set()


@functools.cache
def run_worker(case):
    env = dict(os.environ, KERAS_BACKEND="tensorflow", CUDA_VISIBLE_DEVICES="")
    env.pop("TF_CONFIG", None)
    result = subprocess.run(
        [sys.executable, os.path.join(HERE, "distribute_worker.py"), case],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("case", sorted(tiny_models.CASES))
def test_mirrored_set_up(case):
    report = run_worker(case)
    assert report["replicas"] == 2
    assert [d[-5:] for d in report["devices"]] == ["CPU:0", "CPU:1"]
    assert report["same_initial_weights"]
    # The step trained something, and the batch is a real test of the loss
    # scaling: its replicas hold different numbers of weighted positions.
    assert report["gradient_max_abs"] > 1e-3
    first, second = report["tokens_per_replica"]
    assert first > 0 and second > 0 and first != second


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            case,
            marks=pytest.mark.xfail(
                strict=True,
                reason="loss averaged per replica, not over the global batch",
            ),
        )
        if case in PER_REPLICA_LOSS
        else case
        for case in sorted(tiny_models.CASES)
    ],
)
def test_mirrored_step_matches_one_device(case):
    report = run_worker(case)
    assert report["loss_mirrored"] == pytest.approx(
        report["loss_one_device"], rel=LOSS_RTOL
    )
    assert report["gradient_max_abs_difference"] <= GRADIENT_ATOL, report[
        "worst_variables"
    ]
