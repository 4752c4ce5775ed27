"""Command-line arguments shared by the CLI and the training scripts.

`add_training_arguments` adds the options every `zoo train` script takes
(outputs, epochs, batch size, learning rate, seed, strategy, static shapes,
budgets, verbosity), and `training_parser` makes a script's parser with them;
a script adds only what is its own. A count below one
(`--epochs 0`, `--beam 0`, `--limit -1`) is an argument error (exit status 2
with argparse's one-line message), never a silent fallback or a crash after
the work. Output paths are checked before any data is loaded (`check_folder`,
`check_file`): a bad one ends the script at once with one `error:` line and
exit status 2, as a bad argument does.
"""

import argparse
import contextlib
import contextvars
import os
import sys
import tempfile

# The command a training script runs under (`python -m zoo train seq2seq`),
# set by the CLI for the script's usage line; `None`: argparse's default.
_program = contextvars.ContextVar("program", default=None)


def positive_int(text):
    """An int >= 1 (`keras_attention.arguments.int_argument`), as argparse's type.

    argparse prints the error as one line naming the flag, and exits 2.

    Example:
    >>> positive_int("3")
    3
    >>> positive_int("0")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: expected an int >= 1, got '0'
    """
    from keras_attention.arguments import int_argument  # Keras: on first use

    try:
        return int_argument("value", int(text))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected an int >= 1, got {text!r}"
        ) from None


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


def fraction(text):
    """A float strictly between 0 and 1 (a part of a budget).

    Example:
    >>> fraction("0.25")
    0.25
    >>> fraction("1")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: expected a number between 0 and 1 (both excluded), got '1'
    """
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(
            f"expected a number between 0 and 1 (both excluded), got {text!r}"
        )
    return value


def add_training_arguments(
    parser,
    *,
    epochs,
    batch_size=None,
    learning_rate=None,
    verbose=1,
    out_required=True,
    out_help="preset directory to write",
):
    """Adds the options every training script shares to an `argparse` parser.

    `--out`, `--results`, `--history`, `--run-dir`, `--epochs`, `--batch-size`,
    `--learning-rate`, `--seed`, `--strategy`, `--static-shapes`,
    `--max-minutes` (also spelled `--time-budget`), `--max-steps` and
    `--verbose`. `zoo.training.harness.TrainingRun` reads them.

    Args:
        parser: `argparse.ArgumentParser`.
        epochs: int. The default of `--epochs`.
        batch_size: int or `None`. The default of `--batch-size`; `None`
            leaves the option out (a script that batches otherwise).
        learning_rate: float or `None`. The default of `--learning-rate`;
            `None` leaves the option out (a script with a schedule).
        verbose: int. The default of `--verbose` (Keras's `fit` verbosity).
        out_required: bool. Whether `--out` must be given.
        out_help: str. The help of `--out`.

    Example:
    >>> parser = argparse.ArgumentParser()
    >>> add_training_arguments(parser, epochs=3, batch_size=32)
    >>> args = parser.parse_args(["--out", "p", "--time-budget", "1.5"])
    >>> args.epochs, args.batch_size, args.max_minutes, args.max_steps
    (3, 32, 1.5, None)
    """
    parser.add_argument("--out", required=out_required, help=out_help)
    parser.add_argument(
        "--results", help="JSON file for what the run measured (also in the preset)"
    )
    parser.add_argument(
        "--history",
        metavar="FILE",
        help="JSON file for the per-epoch training history, which the preset's "
        "metadata names but does not hold (default: experiments/<family>/"
        "history/<name>.json of the checkout for a preset written to zoo/"
        "<family>/presets/<name>, else <out>.history.json beside the preset)",
    )
    parser.add_argument(
        "--run-dir",
        help="folder for this run's resumable state (default: <out>.run, else "
        "<results>.run, else none: no resumption); rerunning the same command "
        "resumes from it after a kill; it is deleted once the outputs are written",
    )
    parser.add_argument(
        "--epochs",
        type=positive_int,
        default=epochs,
        help="passes over the training data (default: %(default)s)",
    )
    if batch_size is not None:
        parser.add_argument(
            "--batch-size",
            type=positive_int,
            default=batch_size,
            help="global batch size (default: %(default)s)",
        )
    if learning_rate is not None:
        parser.add_argument(
            "--learning-rate",
            type=float,
            default=learning_rate,
            help="the optimizer's step size (default: %(default)s)",
        )
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="random seed of the weights and the data order (default: 0)",
    )
    parser.add_argument(
        "--strategy",
        default="auto",
        help="auto, default; TensorFlow's tf.distribute one_device, mirrored, "
        "multi_worker, tpu; JAX's data_parallel (keras.distribution.DataParallel; "
        "auto picks it with several devices). See zoo.training.strategy",
    )
    parser.add_argument(
        "--static-shapes",
        action="store_true",
        help="fixed-size batches padded to the full length (automatic on TPUs "
        "and under DataParallel over several devices)",
    )
    parser.add_argument(
        "--max-minutes",
        "--time-budget",
        dest="max_minutes",
        type=positive_float,
        metavar="MINUTES",
        help="stop training after this many minutes of training, e.g. 60 for "
        "an hour (a resumed run counts the minutes before the kill)",
    )
    parser.add_argument(
        "--max-steps",
        type=positive_int,
        metavar="STEPS",
        help="stop training after this many optimizer steps (an equal budget "
        "for comparisons that does not depend on machine load)",
    )
    parser.add_argument(
        "--verbose",
        type=int,
        default=verbose,
        help="Keras's fit verbosity: 0 silent, 1 progress bar, 2 one line per "
        "epoch (default: %(default)s)",
    )


def training_parser(doc, **defaults):
    """A training script's parser: described by `doc`, with the shared options.

    Args:
        doc: str. The script's docstring; its first line describes the script.
        **defaults: the arguments of `add_training_arguments` (`epochs`, ...).

    Returns:
        `argparse.ArgumentParser`, to which the script adds its own options.
        Its usage line names the command set by `program_name` (the CLI's
        `python -m zoo train MODEL`), else argparse's default.

    Example:
    >>> parser = training_parser("Trains a model.", epochs=3)
    >>> parser.description, parser.parse_args(["--out", "p"]).epochs
    ('Trains a model.', 3)
    >>> with program_name("python -m zoo train ram"):
    ...     training_parser("Trains a model.", epochs=3).prog
    'python -m zoo train ram'
    """
    parser = argparse.ArgumentParser(
        prog=_program.get(), description=doc.splitlines()[0]
    )
    add_training_arguments(parser, **defaults)
    return parser


@contextlib.contextmanager
def program_name(prog):
    """Within the block, `training_parser` names the command `prog`.

    The CLI runs a training script in its own process, so the script's
    usage line (`usage: python -m zoo train seq2seq ...`) names the command
    the user typed, not the file argparse would find in `sys.argv[0]`.

    Example:
    >>> with program_name("keras-attention train ram"):
    ...     training_parser("Trains.", epochs=1).format_usage().split()[:4]
    ['usage:', 'keras-attention', 'train', 'ram']
    """
    token = _program.set(prog)
    try:
        yield
    finally:
        _program.reset(token)


def pick_options(args, *names, drop_none=False):
    """The values of the options `names`, as keyword arguments.

    A training script names its options after the constructor arguments
    they set (`--embedding-dim` sets `embedding_dim`), so it hands them over
    by name instead of writing `embedding_dim=args.embedding_dim` for each.

    Args:
        args: `argparse.Namespace`.
        *names: str. Attribute names of `args`.
        drop_none: bool. Leave out options that were not given (`None`),
            so the constructor's (or a config's) default applies. Defaults
            to `False`.

    Returns:
        dict of `name: value`, in the order of `names`.

    Example:
    >>> args = argparse.Namespace(units=8, cell="gru", window=None)
    >>> pick_options(args, "units", "window")
    {'units': 8, 'window': None}
    >>> pick_options(args, "units", "window", drop_none=True)
    {'units': 8}
    """
    values = {name: getattr(args, name) for name in names}
    if drop_none:
        values = {name: value for name, value in values.items() if value is not None}
    return values


def fail(message):
    """Prints `error: message` to stderr and exits with status 2.

    Example:
    >>> import contextlib, io
    >>> with contextlib.redirect_stderr(io.StringIO()) as err:
    ...     try:
    ...         fail("--out x is a file")
    ...     except SystemExit as e:
    ...         code = e.code
    >>> code, err.getvalue().strip()
    (2, 'error: --out x is a file')
    """
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


def _writable(folder, option, path):
    """Creates `folder` if missing and proves a file can be created in it."""
    try:
        os.makedirs(folder, exist_ok=True)
        probe = tempfile.mkdtemp(prefix=".write-check-", dir=folder)
        os.rmdir(probe)
    except OSError as e:
        fail(f"{option} {path}: cannot write to folder {folder} ({e.strerror})")


def check_folder(path, option, preset=False):
    """Exits with status 2 unless `path` can be written as a folder.

    Args:
        path: str. The folder a script will write (created if missing).
        option: str. The command-line option that named it, for the message.
        preset: bool. The folder is a preset, replaced whole when saved: it
            must be new, empty or a preset (it has a `metadata.json`).

    Example:
    >>> import contextlib, io
    >>> folder = tempfile.mkdtemp()
    >>> check_folder(os.path.join(folder, "new"), "--out", preset=True)  # fine
    >>> open(os.path.join(folder, "notes.txt"), "w").close()
    >>> with contextlib.redirect_stderr(io.StringIO()) as err:
    ...     try:
    ...         check_folder(folder, "--out", preset=True)
    ...     except SystemExit as e:
    ...         print(e.code, "no metadata.json" in err.getvalue())
    2 True
    """
    path = os.path.abspath(path)
    if os.path.lexists(path) and not os.path.isdir(path):
        fail(f"{option} {path} is a file, not a folder")
    if preset and os.path.isdir(path):
        names = os.listdir(path)
        if names and "metadata.json" not in names:
            fail(
                f"{option} {path} holds files but no metadata.json: it is not a "
                "preset to replace; choose a new or empty folder"
            )
    if preset:  # Saved beside itself, then swapped into place.
        _writable(os.path.dirname(path), option, path)
    else:
        _writable(path, option, path)


def check_file(path, option):
    """Exits with status 2 unless the file `path` can be written.

    Example:
    >>> import contextlib, io
    >>> folder = tempfile.mkdtemp()
    >>> check_file(os.path.join(folder, "results.json"), "--results")  # fine
    >>> with contextlib.redirect_stderr(io.StringIO()) as err:
    ...     try:
    ...         check_file(folder, "--results")
    ...     except SystemExit as e:
    ...         print(e.code, "is a folder, not a file" in err.getvalue())
    2 True
    """
    path = os.path.abspath(path)
    if os.path.isdir(path):
        fail(f"{option} {path} is a folder, not a file")
    _writable(os.path.dirname(path), option, path)
    if os.path.exists(path) and not os.access(path, os.W_OK):
        fail(f"{option} {path}: the file is not writable")
