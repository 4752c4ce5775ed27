"""Training scripts resume from their run directory after a kill (`zoo.training.run_directory`).

The first test SIGKILLs the real command line, `python -m zoo train ram`,
after its run directory holds the state of epoch 1, runs the same command
again, and checks that it resumes and writes the preset an uninterrupted run
of the same command writes (same process type, same machine: the weights
must be equal). RAM is the cheapest model with a preset; its glimpse
locations are sampled (a random seed state that must be restored too).

The other tests run `zoo.training.run_directory.Stage` in this process on a tiny model
with dropout, shuffled data and the stateful callbacks (EarlyStopping,
ReduceLROnPlateau, the budgets): a `fit` broken off by an exception at an
epoch's start, then resumed by a new `Stage` on a new model, ends with the
weights, optimizer state and history of an unbroken `fit`. `make test` runs
them under JAX and PyTorch too (the command-line test stays on TensorFlow;
`test_resume_backends.py` SIGKILLs a fit on the other backends).
"""

import json
import os
import signal
import subprocess
import sys
import time

import h5py
import keras
import numpy as np
import pytest

from zoo.training import run_directory as training
from zoo.training.callbacks import StepBudget, TimeBudget
from zoo.transformer.averaging import Checkpoints

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from interrupts import Interrupt, StopAt  # noqa: E402 (tests/zoo/training/interrupts.py)

ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
)
EPOCHS = 3
RAM = [
    "--data", "sample",
    "--rows", "ram_translated_6",
    "--units", "8",
    "--epochs", str(EPOCHS),
    "--batch-size", "128",
    "--verbose", "2",
]  # fmt: skip


def start_cli(out, log):
    env = dict(
        os.environ,
        KERAS_BACKEND="tensorflow",
        CUDA_VISIBLE_DEVICES="",
        TF_CPP_MIN_LOG_LEVEL="3",
    )
    command = [sys.executable, "-m", "zoo", "train", "ram", *RAM, "--out", str(out)]
    with open(log, "w") as f:
        return subprocess.Popen(command, cwd=ROOT, env=env, stdout=f, stderr=f)


def wait(process, log, timeout=300):
    try:
        process.wait(timeout=timeout)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return process.returncode, open(log).read()


def weights(preset):
    arrays = {}
    with h5py.File(os.path.join(preset, "model.weights.h5"), "r") as f:
        f.visititems(
            lambda name, item: (
                arrays.__setitem__(name, item[()])
                if isinstance(item, h5py.Dataset)
                else None
            )
        )
    return arrays


@pytest.mark.slow
@pytest.mark.tensorflow_only
def test_sigkilled_cli_run_resumes_to_the_uninterrupted_result(tmp_path):
    reference_out, out = tmp_path / "reference", tmp_path / "resumed"
    reference = start_cli(reference_out, tmp_path / "reference.log")
    killed = start_cli(out, tmp_path / "killed.log")
    stage = tmp_path / "resumed.run" / "ram_translated_6"
    deadline = time.time() + 240
    while not (stage / "epoch_1").is_dir() and killed.poll() is None:
        assert time.time() < deadline, "no epoch state written"
        time.sleep(0.02)
    killed.send_signal(signal.SIGKILL)
    returncode, log = wait(killed, tmp_path / "killed.log")
    assert returncode == -signal.SIGKILL, log[-3000:]
    assert not out.exists()
    done = max(int(p.name.split("_")[1]) for p in stage.glob("epoch_*"))
    with open(stage / f"epoch_{done}" / "state.json") as f:
        state = json.load(f)
    assert state["epoch"] == done < EPOCHS and not state["finished"], log[-3000:]

    resumed = start_cli(out, tmp_path / "resumed.log")
    returncode, log = wait(resumed, tmp_path / "resumed.log")
    assert returncode == 0, log[-3000:]
    assert f"resuming ram_translated_6: {done} epochs done" in log
    assert f"Epoch {done + 1}/{EPOCHS}" in log and "Epoch 1/" not in log
    returncode, reference_log = wait(reference, tmp_path / "reference.log")
    assert returncode == 0, reference_log[-3000:]

    assert not (tmp_path / "resumed.run").exists()  # Deleted once written.
    want, got = weights(reference_out), weights(out)
    assert sorted(got) == sorted(want) and len(want) > 5
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-6, atol=1e-7)
    metrics = [
        json.loads((path / "metadata.json").read_text())["metrics"]
        for path in (reference_out, out)
    ]
    histories = [json.loads(open(m["history_file"]).read())["history"] for m in metrics]
    # Computed with those weights: held to the same tolerance (issue 38).
    assert_same_history(histories[1], histories[0])
    assert len(histories[1]["loss"]) == EPOCHS
    assert metrics[1]["test_error_percent"] == metrics[0]["test_error_percent"]


# In this process ---------------------------------------------------------


def tiny_fit(stage, epochs, interrupt_at=None, stop_early=False, sized=True):
    """A dropout model on shuffled data, with every stateful callback.

    EarlyStopping keeps the best weights (with `stop_early`, it stops after
    the second epoch); ReduceLROnPlateau halves the learning rate after every
    epoch from the second on (no change of the loss counts as a gain). With
    `sized=False` the dataset's number of batches is unknown (as after
    bucketing), and Keras makes fewer iterators, so draws fewer shuffled
    orders, an epoch.
    """
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((4,)),
            keras.layers.Dense(8, activation="relu"),
            keras.layers.Dropout(0.5),
            keras.layers.Dense(1),
        ]
    )
    model.compile(keras.optimizers.Adam(0.05), "mse")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 4)).astype("float32")
    y = (x.sum(-1, keepdims=True) > 0).astype("float32")
    train = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(32, seed=1)
    if not sized:
        train = train.filter(lambda x, y: True)
    train = train.batch(8)
    validation = tf.data.Dataset.from_tensor_slices((x[:8], y[:8])).batch(8)
    callbacks = [
        keras.callbacks.EarlyStopping(
            patience=1 if stop_early else 10,
            min_delta=10.0 if stop_early else 0.0,
            restore_best_weights=True,
        ),
        keras.callbacks.ReduceLROnPlateau(
            monitor="loss", patience=1, factor=0.5, min_delta=10.0
        ),
        TimeBudget(60.0),
        StepBudget(1000),
    ]
    if interrupt_at is not None:
        callbacks.append(StopAt(interrupt_at))
    history = stage.fit(
        model,
        train,
        epochs=epochs,
        validation_data=validation,
        callbacks=callbacks,
        verbose=0,
    )
    state = [v.numpy() for v in model.variables + model.optimizer.variables]
    return history.history, state, model


def assert_same_history(got, want):
    assert sorted(got) == sorted(want)
    for key in want:
        np.testing.assert_allclose(got[key], want[key], rtol=1e-6, err_msg=key)


def assert_same_state(got, want):
    assert len(got) == len(want)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("sized", [True, False])
def test_interrupted_fit_resumes_to_the_same_state(tmp_path, sized):
    want_history, want, _ = tiny_fit(training.Stage(None), epochs=5, sized=sized)
    path = str(tmp_path / "train")
    with pytest.raises(Interrupt):
        tiny_fit(training.Stage(path), epochs=5, interrupt_at=3, sized=sized)
    assert sorted(os.listdir(path)) == ["epoch_2", "epoch_3"]  # The last two.
    stage = training.Stage(path)
    assert stage.initial_epoch == 3 and not stage.finished
    history, got, model = tiny_fit(stage, epochs=5, sized=sized)
    assert_same_history(history, want_history)
    assert len(history["loss"]) == 5
    assert float(model.optimizer.learning_rate.numpy()) == pytest.approx(0.05 / 16)
    assert_same_state(got, want)
    assert stage.seconds > 0


def test_budgets_count_what_was_done_before_a_restart(tmp_path):
    path = str(tmp_path / "train")
    with pytest.raises(Interrupt):
        tiny_fit(training.Stage(path), epochs=5, interrupt_at=2)
    saved = training.Stage(path).state["callbacks"]
    assert [c["class"] for c in saved[2:]] == ["TimeBudget", "StepBudget"]
    assert saved[3]["state"] == {"seen": 2 * 4}
    budget = TimeBudget(1.0)
    budget.set_state({"seconds": 59.5})
    assert 59.5 <= budget.elapsed() < 60.0
    steps = StepBudget(10)
    steps.set_state(saved[3]["state"])
    assert steps.seen == 8


def test_a_run_stopped_early_restores_its_end_without_training(tmp_path):
    want_history, want, _ = tiny_fit(training.Stage(None), epochs=6, stop_early=True)
    assert len(want_history["loss"]) == 2  # Stopped early.
    path = str(tmp_path / "train")
    history, got, _ = tiny_fit(training.Stage(path), epochs=6, stop_early=True)
    assert_same_state(got, want)
    # Killed after training (during evaluation, say): the rerun trains no
    # more, and EarlyStopping puts the best weights back again.
    stage = training.Stage(path)
    assert stage.finished and stage.initial_epoch == 2
    history, got, _ = tiny_fit(stage, epochs=6, stop_early=True)
    assert_same_history(history, want_history)
    assert_same_state(got, want)


def test_the_latest_unreadable_state_falls_back_to_the_one_before(tmp_path):
    path = tmp_path / "train"
    with pytest.raises(Interrupt):
        tiny_fit(training.Stage(str(path)), epochs=4, interrupt_at=3)
    torn = path / "epoch_3" / "variables.npz"
    torn.write_bytes(torn.read_bytes()[:100])
    (path / ".saving-abandoned").mkdir()  # A save cut by a kill.
    stage = training.Stage(str(path))
    assert stage.initial_epoch == 2
    assert not (path / ".saving-abandoned").exists()


def test_a_rerun_with_other_options_is_refused(tmp_path, capsys):
    folder = str(tmp_path / "run")
    run = training.RunDirectory(folder, {"epochs": 3, "verbose": 1}, "cmd")
    with pytest.raises(SystemExit) as raised:  # Another process holds it.
        training.RunDirectory(folder, {"epochs": 3, "verbose": 1})
    assert raised.value.code == 2
    assert "in use by another process" in capsys.readouterr().err
    run.finish()
    run = training.RunDirectory(folder, {"epochs": 3, "verbose": 1}, "cmd")
    run.write("x.json", {"a": 1})
    run._lock and os.close(run._lock)
    run._lock = None
    # --verbose may change; --epochs may not.
    training.RunDirectory(folder, {"epochs": 3, "verbose": 2}).finish()
    run = training.RunDirectory(folder, {"epochs": 3}, "cmd")
    run.write("results.json", {"rows_done": 1})  # work another run would lose
    os.close(run._lock)
    with pytest.raises(SystemExit) as raised:
        training.RunDirectory(folder, {"epochs": 4})
    assert raised.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "epochs=3 (now 4)" in err[0]


def test_a_run_of_another_backend_is_refused_and_an_old_one_is_tensorflows(
    tmp_path, capsys
):
    folder = tmp_path / "run"
    run = training.RunDirectory(str(folder), {"epochs": 3}, "cmd")
    run.write("results.json", {"rows_done": 1})
    os.close(run._lock)
    recorded = json.loads((folder / "run.json").read_text())
    assert recorded["backend"] == keras.backend.backend()
    other = "jax" if keras.backend.backend() != "jax" else "torch"
    (folder / "run.json").write_text(json.dumps({**recorded, "backend": other}))
    with pytest.raises(SystemExit) as raised:
        training.RunDirectory(str(folder), {"epochs": 3})
    assert raised.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"error: --run-dir {folder} holds a run trained on the {other!r} backend; "
        f"this process runs {keras.backend.backend()!r}: resume it with "
        f"KERAS_BACKEND={other}, or delete the folder"
    ]
    # run.json files written before the backend was recorded: TensorFlow's.
    del recorded["backend"]
    (folder / "run.json").write_text(json.dumps(recorded))
    if keras.backend.backend() == "tensorflow":
        training.RunDirectory(str(folder), {"epochs": 3}).finish()
    else:
        with pytest.raises(SystemExit):
            training.RunDirectory(str(folder), {"epochs": 3})


def test_checkpoints_of_the_killed_part_and_torn_ones_are_dropped(tmp_path):
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    folder = tmp_path / "checkpoints"
    callback = Checkpoints(str(folder), minutes=1e-9, keep=5)
    model.fit(np.ones((4, 2)), np.ones((4, 1)), batch_size=2, verbose=0,
              callbacks=[callback])  # fmt: skip
    state = callback.get_state()
    assert [os.path.basename(p) for p in state["paths"]] == [
        "checkpoint_1.weights.h5",
        "checkpoint_2.weights.h5",
    ]
    # After the state was saved: a torn checkpoint and a later one (written
    # by the part of the run a kill threw away).
    torn = folder / "checkpoint_1.weights.h5"
    torn.write_bytes(torn.read_bytes()[:200])
    (folder / "checkpoint_9.weights.h5").write_bytes(b"later")
    resumed = Checkpoints(str(folder), minutes=10.0, keep=5)
    resumed.set_state(state)
    assert [os.path.basename(p) for p in resumed.paths] == ["checkpoint_2.weights.h5"]
    assert sorted(os.listdir(folder)) == ["checkpoint_2.weights.h5"]


def _interrupted_run(tmp_path, at=2):
    """A stage's folder holding the states of `at - 1` and `at` epochs of 4."""
    path = tmp_path / "train"
    with pytest.raises(Interrupt):
        tiny_fit(training.Stage(str(path)), epochs=4, interrupt_at=at)
    return path


def _edit_state(path, change):
    state = json.loads(path.read_text())
    change(state)
    path.write_text(json.dumps(state))


def test_a_state_beyond_the_fits_epochs_is_refused(tmp_path):
    # The old loader trained 0 epochs from epoch 99 and the script wrote a
    # half-trained preset with exit status 0.
    path = _interrupted_run(tmp_path)
    _edit_state(path / "epoch_2" / "state.json", lambda s: s.update(epoch=99))
    os.rename(path / "epoch_2", path / "epoch_99")
    stage = training.Stage(str(path))
    with pytest.raises(training.StateError) as raised:
        tiny_fit(stage, epochs=4)
    message = str(raised.value)
    assert f"{path}/epoch_99/state.json: epoch=99 is beyond" in message
    assert "this fit's 4 epochs" in message


# state.json edits -> the field the error names.
BAD_STATES = {
    "epoch-not-its-folder": (lambda s: s.update(epoch=99), "`epoch` must be 2"),
    "epoch-bool": (lambda s: s.update(epoch=True), "`epoch` must be 2"),
    "seconds-nan": (lambda s: s.update(seconds=float("nan")), "`seconds` must be"),
    "history-nan": (
        lambda s: s["history"]["loss"].__setitem__(0, float("nan")),
        r"`history.loss\[0\]` must be a finite number",
    ),
    "history-too-long": (
        lambda s: s["history"]["loss"].extend([1.0] * 5),
        "`history.loss` must be a list of at most 2 numbers",
    ),
    "callback-best-nan": (
        lambda s: s["callbacks"][0]["state"].update(best=float("nan")),
        r"`callbacks\[0\].state.best` must be a number, not NaN",
    ),
    "not-an-object": (lambda s: s.clear() or s.update(x=1), "`epoch` must be 2"),
}


@pytest.mark.parametrize("case", sorted(BAD_STATES))
def test_an_impossible_state_is_refused_naming_the_file_and_field(tmp_path, case):
    change, pattern = BAD_STATES[case]
    path = _interrupted_run(tmp_path)
    _edit_state(path / "epoch_2" / "state.json", change)
    with pytest.raises(training.StateError, match=pattern) as raised:
        training.Stage(str(path))
    assert str(raised.value).startswith(f"{path}/epoch_2/state.json: ")


def test_nan_saved_variables_are_refused_not_trained_on(tmp_path):
    # The old loader trained on from NaN weights to `loss: nan`, exit 0.
    path = _interrupted_run(tmp_path)
    variables = path / "epoch_2" / "variables.npz"
    with np.load(variables) as data:
        arrays = {key: data[key] for key in data.files}
    arrays["model/00000"] = np.full_like(arrays["model/00000"], np.nan)
    with open(variables, "wb") as f:
        np.savez(f, **arrays)
    with pytest.raises(training.StateError) as raised:
        tiny_fit(training.Stage(str(path)), epochs=4)
    assert str(raised.value).startswith(
        f"{variables}: model/00000 holds NaN or infinite values"
    )


@pytest.mark.parametrize(
    "content,pattern",
    [
        ("{", "is not valid JSON: Expecting"),
        ("[1, 2]", "`options` must be a JSON object"),
        ('{"options": 3}', "`options` must be a JSON object. Received: 3"),
        ('{"options": {}, "backend": 7}', "`backend` must be a string. Received: 7"),
    ],
)
def test_a_corrupt_run_file_is_refused_naming_it(tmp_path, capsys, content, pattern):
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "run.json").write_text(content)
    with pytest.raises(SystemExit) as raised:
        training.RunDirectory(str(folder), {"epochs": 3})
    assert raised.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {folder}/run.json"), err
    assert pattern in err[0], err
