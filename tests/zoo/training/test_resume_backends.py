"""A killed training resumes from its run directory on JAX and PyTorch too (#43).

Run by `make test` under `KERAS_BACKEND=jax` and `KERAS_BACKEND=torch`
(skipped under TensorFlow, where `test_training_resume.py` kills the real
`zoo train ram` command and `test_fault_tolerance.py` the tiny Transformer
under `BackupAndRestore`). The tiny Transformer (`tiny_models.py`) trains 3
epochs of 3 steps through `zoo.training.run_directory.Stage` on data in a
new seeded order each epoch:

1. in a process of this backend (`fault_tolerance_worker.py --run-dir`)
   that SIGKILLs itself at step 1 of epoch 2, after the states of epochs 1
   and 2 were saved, while this process trains straight through (the
   reference); then
2. this process opens the killed run's stage again, as a rerun of the
   command would, and resumes at epoch 2: the weights, the optimizer state
   and the loss history of the reference, within float tolerance.
`test_training_resume.py` (in the same `make test` lines) resumes fits in
this process: data of known and unknown length (Keras draws the epochs'
shuffled orders differently), dropout, the stateful callbacks.
"""

import os
import signal
import sys

import keras
import numpy as np
import pytest

from zoo.training import run_directory

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]  # this folder's helpers, tests/zoo's

import tiny_models  # noqa: E402
from interrupts import StopAt, finish, start_worker  # noqa: E402

BACKEND = keras.backend.backend()

pytestmark = pytest.mark.skipif(
    BACKEND == "tensorflow",
    reason="test_training_resume.py and test_fault_tolerance.py resume on TensorFlow",
)

CASE = "transformer"
KILL_EPOCH, KILL_STEP = 2, 1
EPOCHS, STEPS, BATCH = 3, 3, 4


def start(run_dir, out, *extra):
    arguments = [
        "--run-dir", str(run_dir),
        "--out", str(out),
        "--case", CASE,
        "--epochs", str(EPOCHS),
        "--samples", str(STEPS * BATCH),
        "--batch-size", str(BATCH),
        "--shuffle",
        *extra,
    ]  # fmt: skip
    return start_worker(
        os.path.join(HERE, "fault_tolerance_worker.py"), arguments, BACKEND
    )


def _fit(stage, interrupt_at=None):
    """The tiny Transformer, 3 epochs on reshuffled data, through `stage`."""
    build, batch, loss = tiny_models.CASES[CASE]
    x, y = batch(STEPS * BATCH)
    model = build(seed=0)
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss=loss())
    data = tiny_models.dataset(x, y, BATCH, shuffle_seed=0)
    callbacks = [] if interrupt_at is None else [StopAt(interrupt_at)]
    history = stage.fit(model, data, EPOCHS, callbacks, verbose=0)
    return history.history, model.variables + model.optimizer.variables


def assert_same_state(got, want):
    assert len(got) == len(want) > 10
    for a, b in zip(got, want):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, atol=1e-7)


def test_sigkilled_fit_resumes_to_the_uninterrupted_weights(tmp_path):
    run_dir = tmp_path / "run"
    killed = start(
        run_dir,
        tmp_path / "killed.npz",
        "--kill-epoch", str(KILL_EPOCH),
        "--kill-step", str(KILL_STEP),
    )  # fmt: skip
    want_history, want = _fit(run_directory.Stage(None))  # Meanwhile.
    returncode, stdout, stderr = finish(killed)
    assert returncode == -signal.SIGKILL, stderr[-3000:]
    assert stdout.split("\n")[-2] == f"epoch {KILL_EPOCH} step {KILL_STEP}"
    assert sorted(os.listdir(run_dir)) == ["epoch_1", "epoch_2"]
    assert not (tmp_path / "killed.npz").exists()

    stage = run_directory.Stage(str(run_dir))  # The same command again.
    assert stage.initial_epoch == KILL_EPOCH and not stage.finished
    history, got = _fit(stage)
    assert len(history["loss"]) == EPOCHS
    np.testing.assert_allclose(history["loss"], want_history["loss"], rtol=1e-6)
    assert_same_state(got, want)
