"""The command line, `keras-attention` / `python -m zoo` (`main`).

One module per group of verbs, each with its flags (`add_parser`) and its
run: `presets`, `train`, `evaluate`, `predict` (translate, caption,
classify) and `serving` (export, serve); `parser` puts the flags under one
parser, `common` holds what the verbs share, `warning_lines` the
`warning: TEXT` lines and `images` the image files.
"""

import sys
import warnings

from zoo import quiet
from zoo.cli import common, evaluate, predict, presets, serving, train, warning_lines
from zoo.cli.parser import PROG, build_parser
from zoo.cli.presets import image_sizes, metrics_summary
from zoo.cli.serving import SERVE_LIMITS

__all__ = [
    "PROG",
    "SERVE_LIMITS",
    "build_parser",
    "image_sizes",
    "main",
    "metrics_summary",
]

#: The verb functions, by command (`train` runs apart: it takes the rest).
VERBS = {
    "presets": presets.presets,
    "translate": predict.translate,
    "evaluate": evaluate.evaluate,
    "caption": predict.caption,
    "classify": predict.classify,
    "export": serving.export,
    "serve": serving.serve,
}


def main(argv=None, prog=PROG):
    """Runs the CLI on `argv` (default: `sys.argv[1:]`); returns the exit status.

    Run on the process's own command line (`argv=None`: `python -m zoo`,
    `keras-attention`), the project's warnings and the libraries' are
    printed as one `warning: TEXT` line each, the project's worded for the
    verb, and the libraries' that are not real here are dropped
    (`warning_lines`; `--verbose` keeps theirs as they come); called with a
    list (from Python, a test), they stay Python warnings.

    Args:
        argv: optional list of str.
        prog: str. The command in usage lines. Defaults to `"keras-attention"`.
    """
    command_line = argv is None
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(prog)
    args, rest = parser.parse_known_args(argv)
    if args.command != "train" and rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    verbose = command_line and quiet.verbose_requested()
    with (
        warnings.catch_warnings(),
        warning_lines.quiet_logs(not command_line or verbose),
    ):
        if command_line:
            warnings.showwarning = warning_lines.warning_printer(
                args.command, warnings.showwarning, verbose
            )
        if args.command == "train":
            return train.train(args, rest, args.train_parser)
        return _verb(args)


def _verb(args):
    """Runs the verb `args.command` (not `train`); returns the exit status."""
    try:
        common.check_plot_path(getattr(args, "plot", None))
        return VERBS[args.command](args)
    # A bad value or type (a preset's config, say) is one line and exit 2.
    except (ValueError, TypeError, FileNotFoundError, RuntimeError) as e:
        from zoo.base import backends  # Keras: only once a verb has failed

        if isinstance(e, RuntimeError) and not isinstance(e, backends.BackendError):
            raise
        print(f"error: {e}", file=sys.stderr)
        return 2
