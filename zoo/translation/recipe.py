"""What the translation training scripts share, around `zoo.training.harness`.

`zoo/seq2seq/train.py` and `zoo/transformer/train.py` take the same data,
vocabulary, length and evaluation options (`add_translation_arguments`),
open their run the same way (`open_translation_run`: output checks, then the
splits, printed) and end it the same way (`finish_translation_run`: greedy
and beam BLEU on the test split, the metadata as data, the preset). Each
script keeps its own model, batching and training recipe.

```
args = parse_args(argv)            # training_parser + add_translation_arguments
run, splits = open_translation_run("zoo.seq2seq.train", args, argv)
...                                # vocabularies, model, run.fit(...)
finish_translation_run(run, model, splits, fit.metrics())
```
"""

from zoo.training.flags import positive_int
from zoo.training.harness import TrainingRun
from zoo.translation.data import (
    add_data_arguments,
    evaluate_translations,
    load_splits,
    translation_metadata,
)


def add_translation_arguments(parser, vocabulary_size, vocabulary_dir_help):
    """Adds the data, vocabulary, length and evaluation options of a script.

    The options of `add_data_arguments` (`--data`, ...), then
    `--vocabulary-size`, `--vocabulary-dir` (vocabularies kept and reused
    there), `--max-length` (subwords per side, default 64), `--beam-width`
    (the beam of the test evaluation, beside greedy; default 4) and
    `--eval-limit` (translate only the first N test pairs).

    Args:
        parser: `argparse.ArgumentParser`.
        vocabulary_size: int. The default of `--vocabulary-size`.
        vocabulary_dir_help: str. The help of `--vocabulary-dir`.

    Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser()
    >>> add_translation_arguments(parser, 8000, "reuse/keep vocabularies here")
    >>> args = parser.parse_args(["--data", "sample", "--eval-limit", "2"])
    >>> args.vocabulary_size, args.max_length, args.beam_width, args.eval_limit
    (8000, 64, 4, 2)
    """
    add_data_arguments(parser)
    parser.add_argument("--vocabulary-size", type=int, default=vocabulary_size)
    parser.add_argument("--vocabulary-dir", help=vocabulary_dir_help)
    parser.add_argument("--max-length", type=int, default=64, help="subwords per side")
    parser.add_argument(
        "--beam-width",
        type=positive_int,
        default=4,
        help="beam of the test evaluation (greedy is scored too)",
    )
    parser.add_argument(
        "--eval-limit", type=positive_int, help="translate only the first N test pairs"
    )


def open_translation_run(module, args, argv=None):
    """Opens the `TrainingRun` of a translation script and loads its splits.

    The outputs (and `--vocabulary-dir`) are checked before any data is
    read; the sizes of the splits are printed.

    Args:
        module: str. The script's module (`"zoo.seq2seq.train"`).
        args: `argparse.Namespace` with the options of
            `zoo.training.flags.add_training_arguments` and
            `add_translation_arguments`.
        argv: list of str, or `None` for `sys.argv[1:]`.

    Returns:
        `(run, (train, validation, test))`: the `TrainingRun` and the lists
        of `(source, target)` pairs of `load_splits`.

    Example:
    >>> import argparse
    >>> from zoo.training.flags import training_parser
    >>> parser = training_parser("Trains.", epochs=1, out_required=False)
    >>> add_translation_arguments(parser, 100, "vocabularies")
    >>> args = parser.parse_args(["--data", "sample"])
    >>> run, (train, validation, test) = open_translation_run("my.train", args, [])
    data: 400 train, 50 validation, 100 test pairs
    >>> run.command
    'python -m my.train'
    """
    run = TrainingRun(
        module, args, argv, folders=[("--vocabulary-dir", args.vocabulary_dir)]
    )
    train, validation, test = load_splits(args)
    print(
        f"data: {len(train)} train, {len(validation)} validation, {len(test)} test pairs"
    )
    return run, (train, validation, test)


def finish_translation_run(run, model, splits, metrics):
    """Scores the test split, then writes the preset and ends the run.

    Args:
        run: the `TrainingRun` of `open_translation_run`.
        model: the trained translation task (it has `translate`).
        splits: `(train, validation, test)` lists of pairs.
        metrics: dict. What the run measured; the test scores (greedy and
            `--beam-width`, on the first `--eval-limit` pairs) are added
            under `"test"` when there is a test split.

    Returns:
        The preset's metadata (dict), as `TrainingRun.save_and_finish`.
    """
    args = run.args
    test = splits[2]
    if test:
        metrics["test"] = evaluate_translations(
            model, test, args.beam_width, args.eval_limit
        )
    data = translation_metadata(args, run.command, splits, {})
    return run.save_and_finish(model, data["task"], data["data"], metrics)
