"""The CLI's warnings: the project's own as one `warning: TEXT` line each."""

import os
import sys
import warnings

import keras_attention
import zoo
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
OWN_FOLDERS = tuple(
    os.path.dirname(os.path.abspath(package.__file__)) + os.sep
    for package in (zoo, keras_attention)
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


def warning_printer(command, show):
    """A `warnings.showwarning` that prints the project's warnings in one line.

    A `UserWarning` raised from the project's code is printed as
    `warning: TEXT` on stderr, its advice worded for `command`
    (`CUT_ADVICE`); any other warning goes to `show`.
    """

    def printer(message, category, filename, lineno, file=None, line=None):
        own = os.path.abspath(filename).startswith(OWN_FOLDERS)
        if not (own and issubclass(category, UserWarning)):
            return show(message, category, filename, lineno, file, line)
        advice = CUT_ADVICE.get((type(message), command))
        text = message.advise(advice) if advice else str(message)
        print(f"warning: {text}", file=sys.stderr)

    return printer
