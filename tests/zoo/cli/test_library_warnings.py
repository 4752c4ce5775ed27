"""The libraries' warnings on the command line: one `warning:` line, or none.

Run as `python -m zoo` runs it, a `UserWarning` from Keras (or keras-hub,
TensorFlow) is printed as `warning: LIBRARY: TEXT` on one line, not in
Python's two-line format; those that are not real for a CLI user
(`warning_lines.NOT_REAL`) are dropped, from `warnings` and from
TensorFlow's logger; `--verbose` gives them back as they come.
"""

import logging
import os
import sys
import warnings

import keras
import pytest

from zoo import cli
from zoo.cli import common, warning_lines

KERAS_FILE = os.path.join(os.path.dirname(keras.__file__), "src", "models", "model.py")
RETRACING = "5 out of the last 11 calls to <fn> triggered tf.function retracing."


def test_library_warnings_one_line_not_real_dropped_verbose_kept(capsys):
    shown = []
    show = lambda *a: shown.append(a[0])  # noqa: E731
    printer = warning_lines.warning_printer("train", show)
    printer(UserWarning("Two\n  lines."), UserWarning, KERAS_FILE, 1)
    printer(UserWarning(RETRACING), UserWarning, KERAS_FILE, 1)
    printer(DeprecationWarning("old"), DeprecationWarning, KERAS_FILE, 1)
    printer(UserWarning("a script's"), UserWarning, "/home/me/script.py", 1)
    assert capsys.readouterr().err == "warning: keras: Two lines.\n"
    assert [str(m) for m in shown] == ["old", "a script's"]
    verbose = warning_lines.warning_printer("train", show, verbose=True)
    verbose(UserWarning(RETRACING), UserWarning, KERAS_FILE, 1)
    assert capsys.readouterr().err == "" and str(shown[-1]) == RETRACING


def test_tensorflows_retracing_log_is_dropped_unless_verbose():
    logger = logging.getLogger("tensorflow")
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logger.addHandler(handler)
    try:
        with warning_lines.quiet_logs():
            logger.warning(RETRACING)
            logger.warning("a real one")
        with warning_lines.quiet_logs(verbose=True):
            logger.warning(RETRACING)
        logger.warning(RETRACING)  # outside: as TensorFlow logs it
    finally:
        logger.removeHandler(handler)
    assert [r.getMessage() for r in records] == ["a real one", RETRACING, RETRACING]


class Warns:
    """A task whose `translate` meets a Keras warning, as the CLI loads one."""

    verbs = ("translate",)

    def translate(self, texts, **kwargs):
        warnings.warn_explicit("Keras says\nso.", UserWarning, KERAS_FILE, 547)
        return list(texts)


@pytest.mark.parametrize("verbose", [False, True])
def test_the_command_line_prints_a_keras_warning_in_one_line(
    verbose, monkeypatch, capsys
):
    monkeypatch.setattr(common, "load_preset", lambda *a, **k: Warns())
    argv = ["keras-attention", "translate", "p", "Jesus wept.", "--beam", "1"]
    monkeypatch.setattr(sys, "argv", argv + ["--verbose"] * verbose)
    monkeypatch.delenv("ZOO_VERBOSE", raising=False)
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = lambda m, *a, **k: print(f"python: {m}", file=sys.stderr)
        assert cli.main() == 0
    captured = capsys.readouterr()
    assert captured.out == "Jesus wept.\n"
    expected = (
        "python: Keras says\nso." if verbose else "warning: keras: Keras says so."
    )
    assert captured.err.strip() == expected
