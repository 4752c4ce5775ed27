"""`argparse` types shared by the CLI and the training scripts.

A count below one (`--epochs 0`, `--beam 0`, `--limit -1`) is an argument
error (exit status 2 with argparse's one-line message), never a silent
fallback or a crash after the work.
"""

import argparse


def positive_int(text):
    """An int >= 1.

    Example:
    >>> positive_int("3")
    3
    >>> positive_int("0")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: expected an int >= 1, got 0
    """
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected an int >= 1, got {text!r}"
        ) from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an int >= 1, got {value}")
    return value


def positive_float(text):
    """A finite float > 0 (minutes, rates).

    Example:
    >>> positive_float("1.5")
    1.5
    >>> positive_float("nan")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: expected a number > 0, got 'nan'
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a number > 0, got {text!r}"
        ) from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}")
    return value
