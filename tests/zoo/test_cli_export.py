"""`python -m zoo export` / `serve` and `Task.export`: the user's ways in.

The exports themselves are tested family by family (`tests/zoo/*/test_export.py`)
and the server in `test_serve.py`; here: the commands and the method reach them,
and bad arguments end in one line and exit status 2.
"""

import os

import pytest
import tensorflow as tf

from zoo import cli
from zoo.ram import RecurrentAttentionModel

pytestmark = pytest.mark.tensorflow_only

RAM = "ram_fashion_mnist_translated"


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    directory = tmp_path_factory.mktemp("cli-export") / "ram"
    assert cli.main(["export", RAM, str(directory)]) == 0
    return directory


def test_export_command_writes_a_savedmodel_with_its_serving_signatures(
    exported, capsys
):
    assert os.path.exists(exported / "saved_model.pb")
    loaded = tf.saved_model.load(str(exported))
    assert {"serving_default", "serve", "serve_bytes"} <= set(loaded.signatures)


def test_task_export_is_the_zoo_export_and_other_formats_are_keras(exported, tmp_path):
    model = RecurrentAttentionModel.from_preset(RAM)
    metadata = model.export(str(tmp_path / "method"))
    assert metadata == cli_metadata(exported)
    with pytest.raises(ValueError, match="format"):
        model.export(str(tmp_path / "other"), format="no-such-format")


def cli_metadata(directory):
    from zoo.export import read_metadata

    metadata = read_metadata(str(directory))
    assert metadata.pop("preset") == RAM
    return metadata


@pytest.mark.parametrize(
    "argv, message",
    [
        (["export", RAM, "{tmp}/x", "--beam", "3"], "beam"),
        (["export", "no_such_preset", "{tmp}/x"], "no_such_preset"),
        (["serve", "{tmp}/missing"], "missing"),
    ],
)
def test_bad_export_and_serve_arguments_end_in_one_line(
    argv, message, tmp_path, capsys
):
    argv = [a.format(tmp=tmp_path) for a in argv]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err
    assert not os.path.exists(tmp_path / "x" / "saved_model.pb")


@pytest.mark.parametrize(
    "argv",
    [["serve", "d", "--batch-delay-ms", "-1"], ["serve", "d", "--port", "0"]],
)
def test_bad_serve_options_are_refused_by_the_parser(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    assert exit_info.value.code == 2
    assert "error:" in capsys.readouterr().err
