"""Saving presets survives SIGKILL and concurrent savers and readers.

Real processes: this file is also the worker script (`python
test_presets_concurrency.py MODE ...`, on Keras's NumPy backend, which
starts fast and forks safely). Two tiny presets, "A" and "B", differ in
their config (hidden units), every weight (all 1.0 or all 2.0) and their
vocabulary asset, so a directory that mixes them, or holds zeros, is seen.
"""

import json
import os
import random
import signal
import subprocess
import sys
import time

import keras
import numpy as np
import pytest

from keras_attention import presets

# The workers run on the NumPy backend whatever the suite's backend: run once.
pytestmark = pytest.mark.skipif(
    keras.backend.backend() != "tensorflow",
    reason="backend-independent (NumPy workers): runs in the TensorFlow pass",
)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
UNITS = {"A": 3, "B": 5}
VALUE = {"A": 1.0, "B": 2.0}


@keras.saving.register_keras_serializable(package="tests_presets_concurrency")
class Label(keras.layers.Layer):
    """A preprocessor holding its label in an asset file."""

    def __init__(self, label=None, **kwargs):
        super().__init__(**kwargs)
        self.label = label

    def save_assets(self, dir_path):
        with open(os.path.join(dir_path, "label.txt"), "w") as f:
            f.write(self.label)

    def load_assets(self, dir_path):
        with open(os.path.join(dir_path, "label.txt")) as f:
            self.label = f.read()

    def get_config(self):
        return {**super().get_config(), "label": None}


def build(label):
    inputs = keras.Input((4,))
    hidden = keras.layers.Dense(UNITS[label], name="hidden")(inputs)
    model = keras.Model(inputs, keras.layers.Dense(2, name="out")(hidden))
    for variable in model.weights:
        variable.assign(np.full(variable.shape, VALUE[label], "float32"))
    return model, Label(label, name="label")


def save(label, directory):
    model, pre = build(label)
    presets.save_preset(model, directory, preprocessor=pre)


def loaded_label(directory):
    """ "A" or "B" when the directory loads as one whole preset, else why not."""
    try:
        model, pre, _ = presets.load_preset(directory)
    except Exception as e:
        return f"error: {e}"
    label = pre.label
    if label not in UNITS:
        return f"bad label {label!r}"
    if model.get_layer("hidden").units != UNITS[label]:
        return f"mix: config of the other preset with label {label}"
    for variable in model.weights:
        if not np.all(keras.ops.convert_to_numpy(variable) == VALUE[label]):
            return f"mix: weights {variable.path} are not those of {label}"
    return label


# Workers --------------------------------------------------------------------


def _traced_save(label, directory, kill_at=None, presets_lines=None):
    """Saves while counting executed lines; SIGKILLs itself at line `kill_at`."""
    count = 0
    here = os.path.dirname(presets.__file__)

    def tracer(frame, event, arg):
        nonlocal count
        if event == "line":
            count += 1
            library = os.path.dirname(frame.f_code.co_filename) == here
            if presets_lines is not None and library:
                presets_lines.append(count)
            if count == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
        return tracer

    model, pre = build(label)
    sys.settrace(tracer)
    try:
        presets.save_preset(model, directory, preprocessor=pre)
    finally:
        sys.settrace(None)
    return count


def kill_points(directory, trials):
    """Forks a save of the other preset and SIGKILLs it at chosen lines."""
    scratch = directory + "_scratch"
    save("A", scratch)
    library_lines = []
    total = _traced_save("B", scratch, presets_lines=library_lines)
    # Half the points at lines of `keras_attention/presets/` (between its
    # file operations), half spread over every line run (inside Keras and
    # h5py writes too).
    step = max(1, len(library_lines) // (trials // 2))
    points = library_lines[::step][: trials // 2]
    points += [int(p) for p in np.linspace(1, total, trials - len(points))]
    save("A", directory)
    current, results = "A", []
    for point in sorted(set(points)):
        other = "B" if current == "A" else "A"
        pid = _fork(lambda o=other, p=point: _traced_save(o, directory, kill_at=p))
        _, status = os.waitpid(pid, 0)
        killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
        found = loaded_label(directory)
        results.append(
            {"point": point, "killed": killed, "old": current, "found": found}
        )
        current = found if found in UNITS else current
    save(current, directory)  # Cleans the hidden folders of killed saves.
    leftovers = [n for n in os.listdir(os.path.dirname(directory)) if ".saving-" in n]
    return {"total": total, "results": results, "leftovers": leftovers}


def _fork(work):
    """Runs `work` in a child process; returns its pid."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            work()
            code = 0
        finally:
            os._exit(code)
    return pid


def _save_forever(directory):
    while True:
        for label in "BA":
            save(label, directory)


def kill_loop(directory, rounds, seed):
    """Forks a process saving B and A in a loop; SIGKILLs it at random times."""
    save("A", directory)
    rng = random.Random(seed)
    results = []
    for _ in range(rounds):
        pid = _fork(lambda: _save_forever(directory))
        time.sleep(rng.uniform(0.02, 0.3))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        results.append(loaded_label(directory))
    return {"results": results}


def _for(seconds, step, out):
    """Runs `step()` for `seconds`, writing the list of its results to `out`."""
    end, results = time.time() + seconds, []
    while time.time() < end:
        try:
            results.append(step())
        except Exception as e:  # A failed save is a result too.
            results.append(f"error: {e}")
    with open(out, "w") as f:
        json.dump(results, f)


def race(directory, seconds):
    """Two processes save A and B to one directory while a third loads it."""
    save("A", directory)
    jobs = {
        "A": lambda: save("A", directory),
        "B": lambda: save("B", directory),
        "load": lambda: loaded_label(directory),
    }
    pids = [
        _fork(lambda job=job, name=name: _for(seconds, job, f"{directory}.{name}"))
        for name, job in jobs.items()
    ]
    codes = [os.waitpid(pid, 0)[1] for pid in pids]
    results = {}
    for name in jobs:
        with open(f"{directory}.{name}") as f:
            results[name] = json.load(f)
    leftovers = [n for n in os.listdir(os.path.dirname(directory)) if ".saving-" in n]
    return {
        "codes": codes,
        "saves": [results["A"].count(None), results["B"].count(None)],
        "save_errors": [r for r in results["A"] + results["B"] if r is not None],
        "loads": results["load"],
        "final": loaded_label(directory),
        "leftovers": leftovers,
    }


def main(root):
    report = {
        "kill_points": kill_points(os.path.join(root, "points", "preset"), 40),
        "kill_loop": kill_loop(os.path.join(root, "loop", "preset"), 12, 0),
        "race": race(os.path.join(root, "race", "preset"), 3.0),
    }
    print(json.dumps(report))


# Tests ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """Runs every scenario in one worker process (one Keras start-up)."""
    root = tmp_path_factory.mktemp("presets_concurrency")
    env = {**os.environ, "KERAS_BACKEND": "numpy", "PYTHONPATH": ROOT}
    process = subprocess.run(
        [sys.executable, os.path.abspath(__file__), str(root)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert process.returncode == 0, process.stderr[-3000:]
    return json.loads(process.stdout.strip().splitlines()[-1])


def test_sigkill_at_chosen_points_leaves_old_or_new(report):
    report = report["kill_points"]
    results = report["results"]
    assert len(results) >= 30 and report["total"] > 100
    bad = [r for r in results if r["found"] not in UNITS]
    assert not bad, bad
    killed = [r for r in results if r["killed"]]
    assert len(killed) >= 25
    # Killed before the swap: the old preset; after it: the new one.
    assert {r["found"] == r["old"] for r in killed} == {True, False}
    assert report["leftovers"] == []


def test_sigkill_of_a_process_saving_in_a_loop(report):
    results = report["kill_loop"]["results"]
    assert len(results) == 12 and set(results) <= {"A", "B"}, results


def test_two_savers_and_a_reader(report):
    report = report["race"]
    assert report["codes"] == [0, 0, 0]
    assert min(report["saves"]) > 0 and report["save_errors"] == []
    loads = report["loads"]
    assert loads and set(loads) <= {"A", "B"}, [r for r in loads if r not in UNITS]
    assert report["final"] in {"A", "B"}
    assert report["leftovers"] == []


if __name__ == "__main__":
    # A worker: NumPy backend, and no TensorFlow (Keras would import it to
    # save weights, doubling the start-up).
    sys.modules["tensorflow"] = None
    main(sys.argv[1])
