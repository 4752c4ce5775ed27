"""`BackupAndRestore`: a SIGKILLed training resumes to the same weights.

`fault_tolerance_worker.py` trains the tiny Transformer (`CASE`) for 3
epochs of 3 steps with `keras.callbacks.BackupAndRestore(save_freq="epoch",
double_checkpoint=True)`:

1. straight through (the reference), in parallel with
2. a run that SIGKILLs its own process at the start of step 1 of epoch 2
   (mid-epoch, after the backups of epochs 0 and 1). Then the backup folder
   is checked: exactly Keras's four files (latest and previous weights and
   metadata), each metadata file readable and saying how many epochs were
   done, each weights file complete (every HDF5 dataset reads) and loadable,
   optimizer state included, into a fresh model;
3. the same command again, which resumes at epoch 2, in parallel with
4. the same command on a copy of the backup whose latest weights file was
   cut in half (a write torn by a crash): it falls back to the previous
   backup and resumes at epoch 1.

Both resumed runs must end with weights and optimizer state bit-identical to
(1), and delete their backup when done.

Keras 3 restores at epoch granularity: the interrupted epoch is redone from
its first batch. With `save_freq=<steps>` a resumed run would replay that
epoch's first batches on weights that already saw them (measured: it ends
one optimizer step ahead with other weights), so exact resumption needs
`save_freq="epoch"`, which is what this test checks. Keras writes the
weights file in place: a crash during a save leaves it torn, which is why
`double_checkpoint=True` matters (case 4).
"""

import json
import os
import shutil
import signal
import sys

import numpy as np
import pytest

pytestmark = pytest.mark.tensorflow_only

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "fault_tolerance_worker.py")
sys.path.insert(0, HERE)
from interrupts import finish, start_worker  # noqa: E402

KILL_EPOCH, KILL_STEP = 2, 1
EPOCHS, STEPS = 3, 3
WEIGHTS, METADATA = "latest.weights.h5", "training_metadata.json"
# The model of `tiny_models.CASES` each process trains. Any deterministic one
# tests the callback; a worker process training the Transformer takes 18 s of
# CPU time against the Seq2Seq's 24 (whose RNN step traces twice as slowly),
# and the test starts four of them.
CASE = "transformer"


def start(backup, out, *extra):
    arguments = [
        "--backup", str(backup),
        "--out", str(out),
        "--epochs", str(EPOCHS),
        "--samples", str(STEPS * 4),
        "--batch-size", "4",
        "--double-checkpoint",
        "--case", CASE,
        *extra,
    ]  # fmt: skip
    return start_worker(WORKER, arguments, "tensorflow")


def report(returncode, stdout, stderr):
    assert returncode == 0, stderr[-3000:]
    return json.loads(stdout.strip().splitlines()[-1])


def read_whole(path):
    """Reads every dataset of an HDF5 file; returns how many there are."""
    import h5py

    datasets = []
    with h5py.File(path, "r") as f:
        assert "optimizer" in f
        f.visititems(
            lambda name, item: (
                datasets.append(item[()]) if isinstance(item, h5py.Dataset) else None
            )
        )
    return len(datasets)


def load_backup(weights_path):
    """A backup's model and optimizer state, loaded into a fresh model."""
    import keras

    sys.path.insert(0, os.path.dirname(HERE))
    try:
        import tiny_models
    finally:
        sys.path.remove(os.path.dirname(HERE))
    build, _, loss = tiny_models.CASES[CASE]
    model = build(seed=1)  # Other initial weights: the load must replace them.
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss=loss())
    model.optimizer.build(model.trainable_variables)
    model.load_weights(str(weights_path))
    return model


def check_backup(backup, tmp):
    """The backup after the kill: whole files, the last two epochs' states."""
    assert sorted(os.listdir(backup)) == [
        WEIGHTS,
        WEIGHTS + ".bkp",
        METADATA,
        METADATA + ".bkp",
    ]
    for suffix, epochs_done in (("", KILL_EPOCH), (".bkp", KILL_EPOCH - 1)):
        with open(backup / (METADATA + suffix)) as f:
            assert json.load(f)["epoch"] == epochs_done
        assert read_whole(backup / (WEIGHTS + suffix)) > 20
        # Keras loads only `*.weights.h5` names, as it does on restore: the
        # `.bkp` is copied to `latest.weights.h5` first.
        copy = tmp / f"epoch_{epochs_done}.weights.h5"
        shutil.copyfile(backup / (WEIGHTS + suffix), copy)
        restored = load_backup(copy)
        assert int(restored.optimizer.iterations.numpy()) == epochs_done * STEPS


def test_sigkill_mid_epoch_resumes_to_the_same_weights(tmp_path):
    reference = start(tmp_path / "backup_reference", tmp_path / "reference.npz")
    backup = tmp_path / "backup"
    killed = start(
        backup,
        tmp_path / "killed.npz",
        "--kill-epoch",
        str(KILL_EPOCH),
        "--kill-step",
        str(KILL_STEP),
    )
    returncode, stdout, stderr = finish(killed)
    assert returncode == -signal.SIGKILL, stderr[-3000:]
    assert stdout.split("\n")[-2] == f"epoch {KILL_EPOCH} step {KILL_STEP}"
    assert not (tmp_path / "killed.npz").exists()
    check_backup(backup, tmp_path)

    torn = tmp_path / "backup_torn"
    shutil.copytree(backup, torn)
    data = (torn / WEIGHTS).read_bytes()
    (torn / WEIGHTS).write_bytes(data[: len(data) // 2])
    resumed = start(backup, tmp_path / "resumed.npz")
    fallback = start(torn, tmp_path / "fallback.npz")
    resumed = report(*finish(resumed))
    fallback = report(*finish(fallback))
    expected = report(*finish(reference))

    assert expected["epochs_run"] == list(range(EPOCHS))
    assert resumed["epochs_run"] == list(range(KILL_EPOCH, EPOCHS))
    assert fallback["epochs_run"] == list(range(KILL_EPOCH - 1, EPOCHS))
    for run in (resumed, fallback):
        assert run["iterations"] == expected["iterations"] == EPOCHS * STEPS
        assert run["loss"] == expected["loss"][-len(run["loss"]) :]
    want = np.load(tmp_path / "reference.npz")
    assert sum(name.startswith("optimizer:") for name in want.files) > 10
    for name in ("resumed.npz", "fallback.npz"):
        got = np.load(tmp_path / name)
        assert sorted(got.files) == sorted(want.files)
        for key in want.files:
            np.testing.assert_array_equal(got[key], want[key], f"{name}: {key}")
    # The backup of a run that finished is deleted (Keras's default).
    assert not backup.exists() and not torn.exists()
