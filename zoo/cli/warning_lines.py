"""The CLI's warnings: the project's own as one `warning: TEXT` line each."""

import contextlib
import importlib.util
import logging
import os
import sys
import warnings

from zoo.base.truncation import TruncatedWarning, UnfinishedWarning

#: What a verb advises when rows were cut (`CutWarning`): the library names
#: a Python setting (`max_length`, `preprocessor.source_sequence_length`); a
#: verb names its flag. Outputs that reached the decoding length before [END]
#: (`UnfinishedWarning`) and sources longer than the preprocessor's length
#: (`TruncatedWarning`). `evaluate` has neither flag (it scores the preset as
#: shipped, as its card does), so it says what happened to the score; `train`'s
#: `--max-length` is the training scripts' length of both sides.
_LONGER = "Raise --max-length to let them finish."
_AS_ON_THE_CARD = "They are scored as cut, as on the preset's card"
CUT_ADVICE = {
    (UnfinishedWarning, "translate"): _LONGER,
    (UnfinishedWarning, "caption"): _LONGER,
    (UnfinishedWarning, "train"): _LONGER,
    (UnfinishedWarning, "evaluate"): f"{_AS_ON_THE_CARD} "
    "(evaluate decodes at the preset's length).",
    (TruncatedWarning, "translate"): "Raise --sequence-length to keep them whole.",
    (TruncatedWarning, "train"): "Raise --max-length to keep them whole.",
    (TruncatedWarning, "evaluate"): f"{_AS_ON_THE_CARD} "
    "(evaluate reads sources at the preset's length).",
}

#: Folders whose `UserWarning`s are the project's: the CLI prints them as
#: one `warning:` line each, other libraries' as Python shows them.
#: (Found without importing them: `keras_attention` imports Keras.)
OWN_FOLDERS = tuple(
    os.path.dirname(os.path.abspath(importlib.util.find_spec(package).origin)) + os.sep
    for package in ("zoo", "keras_attention")
)


def say_warnings(path, caught):
    """Prints the user warnings of `caught` (about the input at `path`) once
    each, one line; the others (libraries' deprecations) go to `warnings`,
    whose filters decide, as if they had not been caught.
    """
    user = [w for w in caught if issubclass(w.category, UserWarning)]
    for message in dict.fromkeys(str(w.message) for w in user):
        print(f"warning: {path}: {message}", file=sys.stderr)
    for w in caught:
        if not issubclass(w.category, UserWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


#: Other libraries' warnings a verb meets that are not real for its user,
#: by a piece of their text: silenced unless `--verbose` (`ZOO_VERBOSE=1`).
NOT_REAL = (
    # TensorFlow's logger, in `train ram`: the script trains several models
    # in one process, and each traces its own step (5 of 11 calls "retrace").
    "triggered tf.function retracing",
)


def _library(filename):
    """The installed package that `filename` belongs to, or `None`.

    Example:
    >>> _library("/venv/lib/python3.11/site-packages/keras/src/models/model.py")
    'keras'
    >>> _library("/home/me/script.py") is None
    True
    """
    parts = os.path.abspath(filename).split(os.sep)
    for i, part in enumerate(parts[:-2]):
        if part in ("site-packages", "dist-packages"):
            return parts[i + 1]
    return None


def warning_printer(command, show, verbose=False):
    """A `warnings.showwarning` that prints warnings in the project's one line.

    A `UserWarning` raised from the project's code is printed as
    `warning: TEXT` on stderr, its advice worded for `command`
    (`CUT_ADVICE`). One from an installed library (Keras, keras-hub,
    TensorFlow) is printed as `warning: LIBRARY: TEXT`, on one line, unless
    it is `NOT_REAL` (then nothing). Any other warning, and every warning
    not the project's when `verbose`, goes to `show` (Python's format).
    """

    def printer(message, category, filename, lineno, file=None, line=None):
        own = os.path.abspath(filename).startswith(OWN_FOLDERS)
        library = None if own else _library(filename)
        if not issubclass(category, UserWarning) or not (own or library):
            return show(message, category, filename, lineno, file, line)
        if own:
            advice = CUT_ADVICE.get((type(message), command))
            text = message.advise(advice) if advice else str(message)
            print(f"warning: {text}", file=sys.stderr)
            return None
        if verbose:
            return show(message, category, filename, lineno, file, line)
        text = " ".join(str(message).split())  # one line
        if not any(piece in text for piece in NOT_REAL):
            print(f"warning: {library}: {text}", file=sys.stderr)
        return None

    return printer


class NotRealLogs(logging.Filter):
    """Drops the `NOT_REAL` records of a library's logger (TensorFlow's).

    Example:
    >>> logger = logging.getLogger("zoo.example")
    >>> logger.addFilter(NotRealLogs())
    >>> record = logging.makeLogRecord({"msg": "5 calls triggered tf.function retracing"})
    >>> logger.filter(record)  # `logger` would not emit it
    False
    """

    def filter(self, record):
        """`False` (drop) for a record whose message holds a `NOT_REAL` piece.

        Example:
        >>> record = logging.makeLogRecord({"msg": "5 calls triggered tf.function retracing"})
        >>> NotRealLogs().filter(record), NotRealLogs().filter(logging.makeLogRecord({}))
        (False, True)
        """
        return not any(piece in record.getMessage() for piece in NOT_REAL)


@contextlib.contextmanager
def quiet_logs(verbose=False):
    """Drops the `NOT_REAL` records of TensorFlow's logger inside, unless `verbose`."""
    logger = logging.getLogger("tensorflow")
    dropped = NotRealLogs()
    if not verbose:
        logger.addFilter(dropped)
    try:
        yield
    finally:
        logger.removeFilter(dropped)
