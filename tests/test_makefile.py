"""`make install` (and so `make demo`) says one line, not the install's output.

The install runs a stand-in `pip` in a temporary virtual-environment folder
(`VENV=...`), so the test needs no network and installs nothing: it checks
what make prints around the install, for one that succeeds and one that fails.
"""

import glob
import os
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make")

FAKE_PIP = """#!/bin/sh
i=0
while [ $i -lt 300 ]; do
  echo "install output line $i"
  i=$((i + 1))
done
echo "warning: Package would be ignored" >&2
exit {status}
"""


def _make_install(tmp_path, status):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    for name, text in (("python", "#!/bin/sh\nexit 0\n"), ("pip", FAKE_PIP)):
        path = venv / "bin" / name
        path.write_text(text.format(status=status))
        path.chmod(0o755)
    return subprocess.run(
        ["make", "--no-print-directory", "-C", ROOT, f"VENV={venv}", "install"],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_good_install_prints_one_line_and_logs_the_rest(tmp_path):
    done = _make_install(tmp_path, status=0)
    assert done.returncode == 0, done.stderr
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert len(lines) == 1 and "install.log" in lines[0]
    log = (tmp_path / "venv" / "install.log").read_text()
    assert "install output line 299" in log and "would be ignored" in log
    assert (tmp_path / "venv" / ".installed").exists()


def test_a_failed_install_stops_make_with_the_log_tail(tmp_path):
    done = _make_install(tmp_path, status=1)
    assert done.returncode != 0
    assert "install output line 299" in done.stderr  # the tail, shown
    assert "install output line 0\n" not in done.stderr  # not all of it
    assert "the install failed" in done.stderr
    assert not (tmp_path / "venv" / ".installed").exists()


def test_the_backend_passes_name_paths_that_exist():
    # `make test` runs BACKEND_TESTS under JAX and PyTorch; a moved test file
    # would drop out of those passes silently (pytest runs what it finds).
    with open(os.path.join(ROOT, "Makefile"), encoding="utf-8") as f:
        text = f.read().replace("\\\n", " ")
    line = next(x for x in text.splitlines() if x.startswith("BACKEND_TESTS :="))
    paths = line.partition(":=")[2].split()
    assert "tests/zoo/base/test_generation.py" in paths
    missing = [p for p in paths if not glob.glob(os.path.join(ROOT, p))]
    assert not missing, missing
