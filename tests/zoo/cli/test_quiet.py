"""The command line prints its answer and the project's warnings, nothing else.

Each verb runs in a fresh process, as a user starts it, with neither
`TF_CPP_MIN_LOG_LEVEL` nor `ZOO_VERBOSE` set: every line on standard error
must be a `warning:` line the project wrote (TensorFlow's start-up logs, its
E-level `cuInit` line and the RAM graph's optimizer errors are not).
`--verbose` brings TensorFlow's logs back (on `translate`: `presets`
imports no TensorFlow). `translate`, `caption` and
`classify` (a RAM preset, whose graph once logged optimizer errors) are held
to the same rule where tests/test_readme.py runs the README's commands of
those verbs, so that each verb starts once.
"""

import os
import subprocess
import sys

import pytest

from zoo import quiet

pytestmark = pytest.mark.tensorflow_only


def _run(*argv):
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("TF_CPP_MIN_LOG_LEVEL", "ZOO_VERBOSE")
    }
    result = subprocess.run(
        [sys.executable, "-m", "zoo", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines(), result.stderr.splitlines()


def test_presets_prints_only_its_table():
    out, err = _run("presets")
    assert err == []
    assert any(line.startswith("transformer_bible_en_es ") for line in out)


def test_verbose_shows_tensorflows_logs():
    # `presets` imports no TensorFlow (test_presets_import.py): a verb that
    # runs a model does.
    out, err = _run(
        "translate",
        "seq2seq_bahdanau_bible_en_es",
        "Jesus wept.",
        "--beam",
        "1",
        "--verbose",
    )
    assert any(quiet.is_tensorflow_log(line) for line in err), err
    assert len(out) == 1 and out[0].strip(), out
