"""A trained preset's metadata is provenance; its per-epoch history is a file.

`TrainingRun.save_preset` writes the history of the fit to `--history` (by
default `experiments/<family>/history/<name>.json` of the checkout for a
preset written into `zoo/<family>/presets/`, else `<out>.history.json`) and
the metadata names it as `metrics.history_file`, as the shipped presets do.
"""

import argparse
import json
import os

import keras
import numpy as np
import pytest

from zoo.base.task import Task
from zoo.training import flags as arguments
from zoo.training import harness as training

pytestmark = pytest.mark.tensorflow_only

EPOCHS = 3


def parse(argv):
    parser = argparse.ArgumentParser()
    arguments.add_training_arguments(
        parser, epochs=EPOCHS, batch_size=4, verbose=0, out_required=False
    )
    return parser.parse_args(argv)


def train_tiny_preset(argv):
    """Trains a tiny regression `Task` for `EPOCHS` epochs; its metadata."""
    run = training.TrainingRun("zoo.tiny.train", parse(argv), argv)
    inputs = keras.Input((2,), name="x")
    model = Task(inputs, keras.layers.Dense(1)(inputs))
    model.compile("sgd", "mse")
    x = np.random.default_rng(0).normal(size=(8, 2)).astype("float32")
    fit = run.fit(model, x, y=x[:, :1], batch_size=4)
    return run.save_and_finish(model, "regression", {"rows": 8}, fit.metrics())


def number_lists(value, path="metadata"):
    """The paths of every list of numbers in `value` (as a history has)."""
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in number_lists(v, f"{path}.{k}")]
    if isinstance(value, list) and any(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in value
    ):
        return [path]
    return []


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def test_a_trained_preset_holds_no_per_epoch_lists_and_names_its_history(
    tmp_path,
):
    out = tmp_path / "runs" / "tiny"
    train_tiny_preset(["--out", str(out)])
    saved = read_json(out / "metadata.json")
    assert number_lists(saved["metrics"]) == []
    assert (saved["metrics"]["epochs"], saved["metrics"]["steps"]) == (EPOCHS, 6)
    assert "history" not in saved and "history" not in saved["metrics"]
    assert saved["metrics"]["history_file"] == f"{out}.history.json"
    history = read_json(f"{out}.history.json")
    assert history["preset"] == "tiny" and history["command"] == saved["command"]
    assert sorted(history["history"]) == ["loss"]
    assert len(history["history"]["loss"]) == EPOCHS
    assert all(np.isfinite(history["history"]["loss"]))
    assert not [name for name in os.listdir(out) if "history" in name]


def test_a_preset_written_into_a_checkout_has_its_history_in_experiments(
    tmp_path,
):
    # A checkout's layout in a temporary folder: zoo/<family>/presets/<name>.
    out = tmp_path / "zoo" / "tiny_family" / "presets" / "tiny_preset"
    train_tiny_preset(["--out", str(out)])
    recorded = "experiments/tiny_family/history/tiny_preset.json"
    saved = read_json(out / "metadata.json")
    assert saved["metrics"]["history_file"] == recorded  # as the shipped ones
    history = read_json(tmp_path / recorded)
    assert len(history["history"]["loss"]) == saved["metrics"]["epochs"] == EPOCHS
    assert not os.path.exists(f"{out}.history.json")


def test_history_goes_where_the_option_says_and_needs_a_preset(tmp_path, capsys):
    out, path = tmp_path / "p", tmp_path / "logs" / "p_history.json"
    train_tiny_preset(["--out", str(out), "--history", str(path)])
    assert read_json(out / "metadata.json")["metrics"]["history_file"] == str(path)
    assert len(read_json(path)["history"]["loss"]) == EPOCHS
    with pytest.raises(SystemExit) as raised:
        training.TrainingRun("zoo.x", parse(["--history", str(path)]), [])
    assert raised.value.code == 2
    assert "--history" in capsys.readouterr().err
    with pytest.raises(SystemExit) as raised:  # Checked before any work.
        training.TrainingRun(
            "zoo.x", parse(["--out", str(out), "--history", str(tmp_path)]), []
        )
    assert raised.value.code == 2
    assert "--history" in capsys.readouterr().err
