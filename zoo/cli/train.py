"""`train MODEL [flags]`: runs a family's training script, which writes a preset."""

import argparse
import importlib
import sys

from zoo import registry
from zoo.training.flags import program_name


def add_parser(sub):
    """Adds `train`; its flags are the model's script's (`train MODEL --help`)."""
    width = max(len(f.name) for f in registry.families()) + 2
    families = "\n".join(f"  {f.name:{width}s}{f.summary}" for f in registry.families())
    train = sub.add_parser(
        "train",
        help="train a model (see train MODEL --help)",
        add_help=False,  # `train MODEL --help` is the script's help
        description="Trains a zoo model and writes a preset. "
        "`train MODEL --help` lists the options of MODEL's script.",
        epilog=f"models:\n{families}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    train.add_argument(
        "model",
        nargs="?",
        metavar="MODEL",
        help=f"one of: {', '.join(registry.names())}",
    )
    train.set_defaults(train_parser=train)  # for `train --help`
    return train


def train(args, rest, parser):
    if args.model is None:
        if "-h" in rest or "--help" in rest:
            parser.print_help()
            return 0
        parser.print_usage(sys.stderr)
        print(
            f"error: name the model to train, one of: {', '.join(registry.names())}",
            file=sys.stderr,
        )
        return 2
    if args.model not in registry.names():
        print(
            f"Unknown model {args.model!r}. "
            f"Choose one of: {', '.join(registry.names())}.",
            file=sys.stderr,
        )
        return 2
    try:
        with program_name(f"{parser.prog} {args.model}"):
            importlib.import_module(registry.get(args.model).train_module).main(rest)
    except (ValueError, TypeError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0
