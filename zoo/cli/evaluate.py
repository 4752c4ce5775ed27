"""`evaluate PRESET`: scores a preset on held-out data, as its card does."""

import sys

from zoo.cli import common
from zoo.training.flags import positive_int


def add_parser(sub):
    evaluate = sub.add_parser("evaluate", help="score a preset on held-out data")
    evaluate.add_argument("preset", help=common.PRESET_HELP)
    evaluate.add_argument(
        "--split",
        default="test",
        choices=["train", "validation", "test"],
        help="held-out data to score (default: test)",
    )
    evaluate.add_argument(
        "--sword-path",
        default="/usr/share/sword",
        help="SWORD modules of the Bible, translation presets (default: %(default)s)",
    )
    evaluate.add_argument(
        "--data-path", help="Fashion-MNIST IDX directory (default: the Debian one)"
    )
    evaluate.add_argument(
        "--beam",
        type=positive_int,
        default=4,
        help="beam width scored beside greedy decoding (default: %(default)s)",
    )
    evaluate.add_argument(
        "--limit",
        type=positive_int,
        default=None,
        help="first N samples only (more than the split holds: all of it)",
    )
    common.add_model_flags(evaluate)
    return evaluate


def evaluate(args):
    model = common.load_model(args)
    if getattr(model, "kind", None) is None:
        print(f"Preset {args.preset} has no evaluation here.", file=sys.stderr)
        return 2
    model.evaluate_split(
        args.split,
        limit=args.limit,
        beam_width=args.beam,
        sword_path=args.sword_path,
        data_path=args.data_path,
    )
    return 0
