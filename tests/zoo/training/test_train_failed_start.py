"""A `zoo train` that fails before training does not block the fixed command.

A typo in `--data` used to leave `<out>.run/run.json` with the typo among its
options, so the corrected command was refused ("holds a run of other
options"). A run directory that holds nothing trained now starts over with
the new options; one that holds trained state still refuses them.
"""

import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from zoo import cli
from zoo.training import run_directory

pytestmark = pytest.mark.tensorflow_only


def _close(run):
    os.close(run._lock)  # as if its process had ended


def test_a_run_that_trained_nothing_starts_over_with_new_options(tmp_path, capsys):
    folder = str(tmp_path / "p.run")
    _close(run_directory.RunDirectory(folder, {"data": "typo.tsv"}, "cmd 1"))
    run = run_directory.RunDirectory(folder, {"data": "sample"}, "cmd 2")
    assert "nothing trained yet, starting over" in capsys.readouterr().out
    assert run.read("run.json")["options"] == {"data": "sample"}
    assert run.read("run.json")["command"] == "cmd 2"
    run.finish()


def test_a_run_that_trained_an_epoch_still_refuses_new_options(tmp_path, capsys):
    folder = str(tmp_path / "p.run")
    run = run_directory.RunDirectory(folder, {"data": "a.tsv"}, "cmd")
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    run.stage("train").fit(model, np.ones((4, 2)), 1, y=np.ones((4, 1)), verbose=0)
    _close(run)
    with pytest.raises(SystemExit) as raised:
        run_directory.RunDirectory(folder, {"data": "b.tsv"})
    assert raised.value.code == 2
    assert "holds a run of other options" in capsys.readouterr().err


def test_the_corrected_train_command_is_not_refused(tmp_path, capsys):
    out = str(tmp_path / "preset")
    argv = ["train", "seq2seq", "--out", out, "--max-steps", "1", "--data"]
    # The failed attempt in its own process, which ends (and unlocks the
    # run directory) as a command does.
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    failed = subprocess.run(
        [sys.executable, "-m", "zoo", *argv, str(tmp_path / "typo.tsv")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=root,
        env={**os.environ, "PYTHONPATH": root, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    assert failed.returncode == 2 and "typo.tsv" in failed.stderr
    assert os.path.exists(out + ".run")
    # Corrected (to another missing file, so that nothing trains here): the
    # run directory the failed attempt left does not stand in the way.
    assert cli.main([*argv, str(tmp_path / "fixed.tsv")]) == 2
    err = capsys.readouterr().err
    assert "fixed.tsv" in err and "other options" not in err
