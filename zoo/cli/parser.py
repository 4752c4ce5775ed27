"""`keras-attention` / `python -m zoo`: presets, training, evaluation, translation.

Commands:
  presets                          list shipped presets with their metrics
  train MODEL [training flags]     train a zoo model and write a preset
  evaluate PRESET [--split test]   translation: sacreBLEU BLEU/chrF; glimpse
                                   classifier: error rate; captioner: BLEU-1..4
                                   and attention correctness
  translate PRESET TEXT... [--beam 4] [--sequence-length N] [--max-length N]
                                   [--plot out.png]
  caption PRESET IMAGE... [--beam 3] [--max-length N] [--plot out.png]
  classify PRESET IMAGE... [--plot out.png]
  export PRESET DIR [--beam N]     write a serving SavedModel (raw inputs in,
                                   finished outputs out; no zoo needed to load)
  serve DIR [--port 8501]          TF Serving REST API, JSON and a page over an export

Each verb's flags are in its module (`zoo.cli.<module>.add_parser`); this one
puts them under one parser, with `--verbose` on every verb but `train`.
"""

import argparse

from zoo import quiet
from zoo.cli import evaluate, predict, presets, serving, train

#: The command's name in usage lines: `keras-attention` (the installed
#: script); `python -m zoo` passes its own.
PROG = "keras-attention"


def build_parser(prog=PROG):
    """The CLI's `argparse` parser; `prog` is the command in usage lines.

    Example:
    >>> parser = build_parser("python -m zoo")
    >>> parser.parse_args(["translate", "p", "Jesus wept.", "--beam", "2"]).beam
    2
    >>> parser.format_usage().split()[:4]
    ['usage:', 'python', '-m', 'zoo']
    """
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    presets.add_parser(sub)
    training = train.add_parser(sub)
    evaluate.add_parser(sub)
    predict.add_parsers(sub)
    serving.add_export_parser(sub)
    serving.add_serve_parser(sub)
    for command in (parser, *sub.choices.values()):
        if command is training:  # `train`'s `--verbose N` is fit's (zoo/quiet.py)
            continue
        command.add_argument(
            quiet.VERBOSE_FLAG,
            action="store_true",
            help="show TensorFlow's own start-up and runtime logs (hidden by default)",
        )
    return parser
