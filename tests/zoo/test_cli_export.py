"""`python -m zoo export` / `serve`: bad arguments end in one line and exit 2.

The exports are tested family by family (`tests/zoo/*/test_export.py`; the RAM
one exports the shipped preset through `python -m zoo export` and tests
`Task.export`), the server in `test_serve.py`.
"""

import os

import pytest

from zoo import cli

pytestmark = pytest.mark.tensorflow_only

RAM = "ram_fashion_mnist_translated"


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
