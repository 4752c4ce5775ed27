"""The translation scripts' data: splits, batches, evaluation, metadata.

Data splits, fixed-shape batches, sacreBLEU evaluation of a model's
`translate`, and the `metadata.json` entries of a translation preset. Used
by `zoo/seq2seq/train.py`, `zoo/transformer/train.py`, the CLI and
`benchmarks/translation_comparison.py`.
"""

import os
import time

from zoo import progress, quiet
from zoo.data import bible, parallel_text
from zoo.translation.metrics import corpus_scores

tf = quiet.LazyModule("tensorflow", "Reading and evaluating the Bible pairs (tf.data)")

#: Sentences per `translate` call when evaluation shows progress: the
#: task's own decoding batch, so the outputs are those of one call.
TRANSLATE_BATCH = 64


def add_data_arguments(parser):
    """Adds the arguments `load_splits` reads to an `argparse` parser.

    `--data` (`bible`, `sample` or a TSV path), `--sword-path`, and with a
    TSV, `--validation-tsv` / `--test-tsv`.

    Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser()
    >>> add_data_arguments(parser)
    >>> args = parser.parse_args(["--data", "train.tsv", "--test-tsv", "test.tsv"])
    >>> args.data, args.validation_tsv, args.test_tsv
    ('train.tsv', None, 'test.tsv')
    """
    parser.add_argument(
        "--data",
        default="bible",
        help="'bible' (Debian SWORD modules), 'sample', or a TSV path "
        "(train transformer: also a .npz of token ids, zoo.translation.arrays)",
    )
    parser.add_argument("--sword-path", default=bible.DEFAULT_SWORD_PATH)
    parser.add_argument("--validation-tsv", help="with a TSV --data: validation pairs")
    parser.add_argument("--test-tsv", help="with a TSV --data: test pairs")


def load_splits(args):
    """Returns lists of (source, target) pairs for train/validation/test.

    Args:
        args: `argparse.Namespace` with the options of `add_data_arguments`:
            `--data bible` reads the Debian SWORD modules (split by book,
            `translation_split`), `--data sample` the shipped sample (its
            test file's first 50 pairs also validate), and a TSV path its
            pairs (with the optional `--validation-tsv` / `--test-tsv`).

    Returns:
        `(train, validation, test)`, lists of `(source, target)` str pairs.

    Raises:
        ValueError: no training pair could be read (an empty TSV, say).

    Example:
    >>> import argparse
    >>> train, validation, test = load_splits(argparse.Namespace(data="sample"))
    >>> len(train), len(validation), len(test), train[0][0][:18]
    (400, 50, 100, 'As time passed, Ca')
    """
    train, validation, test = _read_splits(args)
    if not train:
        raise ValueError(
            f"--data {args.data}: no training pairs were read (an empty file, or "
            "no line with a tab between source and target)"
        )
    return train, validation, test


def _read_splits(args):
    if args.data == "bible":

        def pairs(split):
            return [
                (en, es)
                for en, es, _ in bible.load_pairs(split, sword_path=args.sword_path)
            ]

        return pairs("train"), pairs("validation"), pairs("test")
    if args.data == "sample":
        train = parallel_text.read_tsv(bible.sample_path("train"))
        test = parallel_text.read_tsv(bible.sample_path("test"))
        return train, test[:50], test
    train = parallel_text.read_tsv(args.data)
    validation = (
        parallel_text.read_tsv(args.validation_tsv) if args.validation_tsv else []
    )
    test = parallel_text.read_tsv(args.test_tsv) if args.test_tsv else []
    return train, validation, test


def fixed_batches(pairs, batch_size, seed, shuffle=True):
    """Batches of exactly `batch_size` raw string pairs (the rest is dropped).

    With `model.use_static_shapes()`, which pads every row to the full
    sequence length, every step then has one shape: what TPUs and XLA want.

    Example:
    >>> pairs = [("a", "b"), ("c", "d"), ("e", "f")]
    >>> [len(s) for s, t in fixed_batches(pairs, 2, seed=0)]  # 1 pair dropped
    [2]
    """
    ds = tf.data.Dataset.from_tensor_slices(
        (tf.constant([p[0] for p in pairs]), tf.constant([p[1] for p in pairs]))
    )
    if shuffle:
        ds = ds.shuffle(len(pairs), seed=seed, reshuffle_each_iteration=True)
    return ds.batch(batch_size, drop_remainder=True)


def evaluate_translations(model, test_pairs, beam_width, limit=None):
    """BLEU/chrF of greedy and beam decoding on `test_pairs`.

    Prints each score with its sacreBLEU signature and three examples.

    Args:
        model: a translation task (it has `translate(sources, beam_width=)`).
        test_pairs: list of `(source, reference)` str pairs.
        beam_width: int. The beam scored beside greedy decoding.
        limit: optional int. Score only the first `limit` pairs.

    Returns:
        dict: `"greedy"` and `"beam<width>"`, each the `corpus_scores` dict
        (`bleu`, `chrf`, signatures, `sentences`) with `decode_seconds`.

    Example:
    >>> class Echo:  # "translates" by copying the source
    ...     def translate(self, sources, beam_width=1):
    ...         return list(sources)
    >>> verse = "In the beginning God created the heaven and the earth."
    >>> pairs = [(verse, verse)]
    >>> scores = evaluate_translations(Echo(), pairs, 4)  # doctest: +ELLIPSIS
    greedy: BLEU 100.00 chrF 100.00 (1 sentences, ... s)
    ...
    >>> sorted(scores), scores["beam4"]["bleu"]
    (['beam4', 'greedy'], 100.0)
    """
    pairs = test_pairs[:limit] if limit else test_pairs
    sources = [p[0] for p in pairs]
    references = [p[1] for p in pairs]
    results = {}
    for name, width in (("greedy", 1), (f"beam{beam_width}", beam_width)):
        start = time.time()
        hypotheses = progress.in_batches(  # a bar on a terminal
            sources,
            TRANSLATE_BATCH,
            lambda batch, width=width: model.translate(batch, beam_width=width),
            "sentences",
            f"{name}: compiling the search (first call)",
        )
        scores = corpus_scores(hypotheses, references)
        scores["decode_seconds"] = round(time.time() - start, 1)
        results[name] = scores
        print(
            f"{name}: BLEU {scores['bleu']:.2f} chrF {scores['chrf']:.2f} "
            f"({scores['sentences']} sentences, {scores['decode_seconds']} s)"
        )
        print(f"  {scores['bleu_signature']}\n  {scores['chrf_signature']}")
        for src, hyp, ref in list(zip(sources, hypotheses, references))[:3]:
            print(f"  EN  {src}\n  OUT {hyp}\n  REF {ref}")
    return results


def translation_split(args):
    """How `load_splits` split the data, as data (lists of books or files).

    Example:
    >>> import argparse
    >>> split = translation_split(argparse.Namespace(data="bible"))
    >>> split["by"], split["validation"]
    ('book', ['Joel', 'Micah', 'Titus', 'Galatians'])
    """
    if args.data == "bible":
        return {
            "by": "book",
            "train": list(bible.TRAIN_BOOKS),
            "validation": list(bible.VALIDATION_BOOKS),
            "test": list(bible.TEST_BOOKS),
        }
    if args.data == "sample":
        test = os.path.basename(bible.sample_path("test"))
        return {
            "by": "file",
            "train": [os.path.basename(bible.sample_path("train"))],
            "validation": [test],  # its first 50 pairs
            "test": [test],
        }
    return {
        "by": "file",
        "train": [args.data],
        "validation": [args.validation_tsv] if args.validation_tsv else [],
        "test": [args.test_tsv] if args.test_tsv else [],
    }


def translation_metadata(args, command, splits, metrics):
    """The `metadata.json` entries of a translation preset.

    The hardware is recorded by the harness (`zoo.training.harness.TrainingRun`).

    Args:
        args: the parsed arguments (`--data` is recorded).
        command: str. The exact command that trained the model.
        splits: `(train, validation, test)` lists of pairs.
        metrics: dict of what the run measured.

    Example:
    >>> import argparse
    >>> meta = translation_metadata(
    ...     argparse.Namespace(data="bible"), "x", ([("a", "b")], [], []), {}
    ... )
    >>> meta["data"]["train_pairs"], meta["data"]["split"]["test"][:2]
    (1, ['Ruth', 'Esther'])
    """
    train, validation, test = splits
    return {
        "task": "translation en->es",
        "command": command,
        "data": {
            "source": args.data,
            "train_pairs": len(train),
            "validation_pairs": len(validation),
            "test_pairs": len(test),
            "split": translation_split(args),
        },
        "metrics": metrics,
    }
