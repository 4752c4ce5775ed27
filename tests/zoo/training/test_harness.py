"""The training harness (`zoo.training.harness`, `zoo.training.flags`) on tiny runs.

Every training script shares its options, budgets, run directory and
metadata through `TrainingRun`; the metadata is data (the hardware detected,
never a fixed string), and every command the model cards record still parses.
"""

import argparse
import importlib
import json
import os
import re
import shlex
import sys

import keras
import numpy as np
import pytest

from zoo.training import flags as arguments
from zoo.training import harness as training

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from interrupts import Interrupt, StopAt  # noqa: E402 (tests/zoo/training/interrupts.py)

pytestmark = pytest.mark.tensorflow_only

ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
)
SCRIPTS = {
    "seq2seq": "zoo.seq2seq.train",
    "transformer": "zoo.transformer.train",
    "show_attend_tell": "zoo.show_attend_tell.train",
    "ram": "zoo.ram.train",
}


def parse(argv, epochs=2):
    parser = argparse.ArgumentParser()
    arguments.add_training_arguments(
        parser,
        epochs=epochs,
        batch_size=8,
        learning_rate=0.01,
        verbose=0,
        out_required=False,
    )
    return parser.parse_args(argv)


def tiny_model():
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(keras.optimizers.SGD(0.01), "mse")
    return model


def tiny_data(batches=4):
    import tensorflow as tf

    x = np.random.default_rng(0).normal(size=(8 * batches, 4)).astype("float32")
    return tf.data.Dataset.from_tensor_slices((x, x[:, :1])).batch(8)


# Shared options ----------------------------------------------------------


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_every_script_takes_the_shared_options(name, tmp_path):
    script = importlib.import_module(SCRIPTS[name])
    shared = [
        "--out", str(tmp_path / "p"),
        "--results", str(tmp_path / "r.json"),
        "--run-dir", str(tmp_path / "run"),
        "--epochs", "2",
        "--seed", "7",
        "--strategy", "default",
        "--static-shapes",
        "--max-steps", "5",
        "--verbose", "0",
    ]  # fmt: skip
    args = script.parse_args([*shared, "--time-budget", "1.5"])
    assert (args.epochs, args.seed, args.max_steps) == (2, 7, 5)
    assert args.static_shapes and args.strategy == "default"
    assert args.max_minutes == 1.5  # --time-budget: the old name of --max-minutes
    assert script.parse_args([*shared, "--max-minutes", "2"]).max_minutes == 2.0


def _markdown_commands(path, module):
    """`arguments` of every `python -m module` command in a markdown file.

    Code blocks and inline code; a command ends at the closing backtick or
    where the next `python -m` begins (two commands in one block).
    """
    with open(path, encoding="utf-8") as f:
        text = f.read().replace("\\\n", " ")
    start = re.escape(f"python -m {module}")
    found = []
    for match in re.finditer(start + r"(?:(?!python -m )[^`])*", text):
        found.append(shlex.split(match.group(0))[3:])
    return found


def _metadata_command(path, module):
    with open(path, encoding="utf-8") as f:
        words = shlex.split(json.load(f)["command"])
    assert words[:3] == ["python", "-m", module]
    return words[3:]


def model_card_commands():
    """`(source, module, arguments)` of every training command on record.

    From the model cards (`zoo/<family>/README.md`), the experiment notes
    (`experiments/<family>/*.md`) and the `command` of every shipped
    preset's metadata and of the unshipped ones kept in
    `experiments/<family>/presets_metadata/`.
    """
    found = []
    for family, module in SCRIPTS.items():
        folder = os.path.join(ROOT, "zoo", family)
        experiments = os.path.join(ROOT, "experiments", family)
        notes = [os.path.join(folder, "README.md")] + sorted(
            os.path.join(experiments, name)
            for name in os.listdir(experiments)
            if name.endswith(".md")
        )
        for path in notes:
            source = os.path.relpath(path, ROOT)
            for words in _markdown_commands(path, module):
                found.append((source, module, words))
        presets = os.path.join(folder, "presets")
        for name in sorted(os.listdir(presets)):
            path = os.path.join(presets, name, "metadata.json")
            found.append(
                (f"{family}/presets/{name}", module, _metadata_command(path, module))
            )
        kept = os.path.join(experiments, "presets_metadata")
        for name in sorted(os.listdir(kept)) if os.path.isdir(kept) else []:
            path = os.path.join(kept, name)
            found.append(
                (os.path.relpath(path, ROOT), module, _metadata_command(path, module))
            )
    return found


COMMANDS = model_card_commands()


def test_the_cards_record_commands_of_every_family():
    cards = {s.split("/")[1] for s, _, _ in COMMANDS if s.startswith("zoo/")}
    assert cards == set(SCRIPTS)
    notes = {s.split("/")[1] for s, _, _ in COMMANDS if s.startswith("experiments/")}
    assert "ram" in notes
    assert len(COMMANDS) >= 9


@pytest.mark.parametrize("source, module, argv", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_every_recorded_command_still_parses(source, module, argv):
    args = importlib.import_module(module).parse_args(argv)
    if "--out" in argv:
        assert args.out == argv[argv.index("--out") + 1]


# Budgets, metadata, results ------------------------------------------------


def test_the_step_budget_stops_training(tmp_path):
    run = training.TrainingRun("zoo.x", parse(["--max-steps", "3"]), [])
    fit = run.fit(tiny_model(), tiny_data(batches=4), epochs=5)
    assert (fit.epochs, fit.steps) == (1, 3)
    assert fit.metrics()["steps"] == 3


def test_the_time_budget_stops_training(tmp_path):
    run = training.TrainingRun("zoo.x", parse(["--max-minutes", "1e-9"]), [])
    fit = run.fit(tiny_model(), tiny_data(batches=4), epochs=5)
    assert (fit.epochs, fit.steps) == (1, 1)  # Checked after every batch.


def test_a_budget_stop_says_so_and_not_that_the_data_ran_out(capsys, recwarn):
    # Filtered: a dataset of unknown length, as the zoo's batched-by-length ones.
    data = tiny_data(batches=4).filter(lambda x, y: True)
    run = training.TrainingRun("zoo.x", parse(["--max-steps", "3"]), [])
    run.fit(tiny_model(), data, epochs=5, validation_data=data)
    out = capsys.readouterr().out
    assert "stopped after 3 steps: the step budget (--max-steps)" in out
    assert [
        str(w.message) for w in recwarn if "ran out of data" in str(w.message)
    ] == []


def test_without_budgets_every_epoch_runs(capsys):
    run = training.TrainingRun("zoo.x", parse([]), [])
    fit = run.fit(tiny_model(), tiny_data(batches=2), epochs=3)
    assert "stopped" not in capsys.readouterr().out
    assert (fit.epochs, fit.steps) == (3, 6)
    assert sorted(fit.history) == ["loss"] and len(fit.history["loss"]) == 3
    assert all(round(v, 4) == v for v in fit.history["loss"])


def test_metadata_is_data_with_the_hardware_detected(tmp_path):
    import tensorflow as tf

    argv = ["--out", str(tmp_path / "p"), "--seed", "3"]
    run = training.TrainingRun("zoo.x.train", parse(argv), argv)
    meta = run.metadata("a task", {"variant": "v", "seeds": {"test": 4}}, {"m": 1})
    assert json.loads(json.dumps(meta)) == meta
    assert meta["command"] == f"python -m zoo.x.train --out {tmp_path / 'p'} --seed 3"
    assert meta["seed"] == 3 and meta["options"]["seed"] == 3
    assert meta["data"] == {"variant": "v", "seeds": {"test": 4}}
    assert meta["strategy"]["replicas"] == 1
    assert meta["versions"]["keras"] == keras.__version__
    hardware = meta["hardware"]
    assert hardware["cores"] == len(os.sched_getaffinity(0))
    assert [d["type"] for d in hardware["devices"]] == [
        d.device_type for d in tf.config.list_physical_devices()
    ]
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        assert hardware["cpu"] is None or hardware["cpu"] in f.read()
    assert "no GPU" not in json.dumps(meta)
    run.finish()


def test_results_are_written_and_outputs_checked_first(tmp_path, capsys):
    results = tmp_path / "out" / "results.json"
    run = training.TrainingRun("zoo.x", parse(["--results", str(results)]), [])
    assert run.directory.path == str(tmp_path / "out" / "results.json.run")
    run.write_results({"a": 1})
    assert json.loads(results.read_text()) == {"a": 1}
    run.finish()
    assert not os.path.exists(str(results) + ".run")
    with pytest.raises(SystemExit) as raised:
        training.TrainingRun("zoo.x", parse(["--results", str(tmp_path)]), [])
    assert raised.value.code == 2
    assert "--results" in capsys.readouterr().err


def test_static_shapes_are_on_for_the_fit_only():
    class Model(keras.Sequential):
        calls = []

        def use_static_shapes(self, enabled=True):
            self.calls.append(enabled)

    model = Model([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    run = training.TrainingRun("zoo.x", parse(["--static-shapes"]), [])
    assert run.static_shapes(model) is True
    run.fit(model, tiny_data(batches=1), epochs=1)
    assert Model.calls == [True, False]
    assert training.TrainingRun("zoo.x", parse([]), []).static_shapes() is False


# Resume ------------------------------------------------------------------


def test_a_killed_run_resumes_in_its_run_directory(tmp_path, capsys):
    argv = ["--out", str(tmp_path / "p"), "--epochs", "4", "--max-steps", "100"]
    want = training.TrainingRun("zoo.x", parse(argv[2:]), []).fit(
        tiny_model(), tiny_data()
    )
    run = training.TrainingRun("zoo.x", parse(argv), argv)
    assert run.directory.path == str(tmp_path / "p.run")
    with pytest.raises(Interrupt):  # Killed at the start of the third epoch.
        run.fit(tiny_model(), tiny_data(), callbacks=[StopAt(2)])
    os.close(run.directory._lock)  # What the end of the process does.
    capsys.readouterr()
    resumed = training.TrainingRun("zoo.x", parse(argv), argv)
    got = resumed.fit(tiny_model(), tiny_data())
    assert "resuming train: 2 epochs done" in capsys.readouterr().out
    assert (got.epochs, got.steps) == (want.epochs, want.steps) == (4, 16)
    assert got.history == want.history
    resumed.finish()
    assert not (tmp_path / "p.run").exists()


def test_a_rerun_with_other_options_is_refused(tmp_path, capsys):
    argv = ["--out", str(tmp_path / "p"), "--epochs", "4"]
    run = training.TrainingRun("zoo.x", parse(argv), argv)
    os.close(run.directory._lock)
    # Work in the folder (a run with nothing trained starts over instead).
    with open(os.path.join(run.directory.path, "results.json"), "w") as f:
        f.write("{}")
    with pytest.raises(SystemExit) as raised:
        training.TrainingRun("zoo.x", parse([*argv, "--max-steps", "2"]), [])
    assert raised.value.code == 2
    assert "max_steps=None (now 2)" in capsys.readouterr().err
