"""Output paths are checked before any data is loaded (`zoo.training.flags`).

A bad `--out` (a file, a folder of other files, a folder that cannot be
written) ends `zoo train` at once with one `error:` line and exit status 2,
instead of failing after the whole training.
"""

import os
import subprocess
import sys

import pytest

from zoo.training import flags as arguments

ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
)


def refused(capsys, check, *args, **kwargs):
    with pytest.raises(SystemExit) as raised:
        check(*args, **kwargs)
    assert raised.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ")
    return err[0]


def test_a_file_is_no_preset_folder(tmp_path, capsys):
    path = tmp_path / "preset"
    path.write_text("x")
    message = refused(capsys, arguments.check_folder, str(path), "--out", preset=True)
    assert f"--out {path} is a file" in message


def test_a_folder_of_other_files_is_not_replaced(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("keep me")
    message = refused(
        capsys, arguments.check_folder, str(tmp_path), "--out", preset=True
    )
    assert "no metadata.json" in message
    assert (tmp_path / "notes.txt").read_text() == "keep me"


def test_a_folder_under_a_file_cannot_be_made(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    out = tmp_path / "file" / "preset"
    message = refused(capsys, arguments.check_folder, str(out), "--out", preset=True)
    assert "--out" in message and "cannot write" in message


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux /proc")
def test_an_unwritable_parent_is_refused(capsys):
    # /proc takes no new files, even from root (file modes would not stop root).
    message = refused(
        capsys, arguments.check_folder, "/proc/zoo_preset", "--out", preset=True
    )
    assert "cannot write to folder /proc" in message


def test_files_and_good_paths(tmp_path, capsys):
    message = refused(capsys, arguments.check_file, str(tmp_path), "--results")
    assert "is a folder" in message
    arguments.check_file(str(tmp_path / "new" / "table.json"), "--results")
    arguments.check_folder(str(tmp_path / "a" / "preset"), "--out", preset=True)
    assert sorted(os.listdir(tmp_path / "a")) == []  # No probe left behind.


@pytest.mark.tensorflow_only
def test_the_cli_stops_before_loading_data(tmp_path):
    out = tmp_path / "preset"
    out.write_text("not a folder")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    command = [sys.executable, "-m", "zoo", "train", "seq2seq", "--data", "sample"]
    run = subprocess.run(
        command + ["--out", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert run.returncode == 2, run.stderr[-2000:]
    errors = [line for line in run.stderr.splitlines() if line.startswith("error:")]
    assert errors == [f"error: --out {out} is a file, not a folder"]
    assert "data:" not in run.stdout  # Nothing was loaded.
    assert not (tmp_path / "preset.run").exists()
