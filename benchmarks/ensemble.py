"""BLEU of two Transformer checkpoints and of their ensemble on the test books.

The ensemble (`zoo.translation.ensemble`) decodes on the mean of the two
models' step log-probabilities, as OpenNMT-py's `-model a b` and fairseq's
`--path a:b`. Each of the three is scored as `python -m zoo evaluate`
scores a preset (`zoo.translation.data.evaluate_translations`: greedy and
beam `--beam`, GNMT length penalty 0.6, sacreBLEU) on the Bible test books,
or on their first `--limit` verses. The second checkpoint is any preset
sharing the shipped target vocabulary, e.g. the one
`experiments/transformer/continue_training.py` writes:

    python benchmarks/ensemble.py --second /work/s31_ckpt/transformer_seed2 \\
        --log experiments/transformer/logs/ensemble_s31.log
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import machine  # noqa: E402

PRESET = "transformer_bible_en_es"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--first", default=PRESET)
    parser.add_argument("--second", required=True, help="a preset name or folder")
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--limit", type=int, help="only the first N test verses")
    parser.add_argument("--log", help="also write the report to this file")
    args = parser.parse_args(argv)
    say = machine.printer(args.log)

    import keras

    from zoo.base.task import Task
    from zoo.data import bible
    from zoo.translation import ensemble
    from zoo.translation.data import evaluate_translations

    say(
        "$ python benchmarks/ensemble.py "
        + " ".join(sys.argv[1:] if argv is None else argv)
    )
    say(
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; Keras "
        f"{keras.__version__}, backend {keras.backend.backend()}"
    )
    say(machine.describe())
    test = [(en, es) for en, es, _ in bible.load_pairs("test")]
    first, second = Task.from_preset(args.first), Task.from_preset(args.second)
    models = {
        "first": first,
        "second": second,
        "ensemble": ensemble([first, second]),
    }
    say(f"first: {args.first}; second: {args.second}")
    say(f"test: {min(len(test), args.limit or len(test))} of {len(test)} verses")
    say(f"| model | greedy BLEU / chrF | beam {args.beam} BLEU / chrF | decode s |")
    say("|---|---:|---:|---:|")
    for name, model in models.items():
        scores = evaluate_translations(model, test, args.beam, args.limit)
        greedy, beam = scores["greedy"], scores[f"beam{args.beam}"]
        seconds = greedy["decode_seconds"] + beam["decode_seconds"]
        say(
            f"| {name} | {greedy['bleu']:.2f} / {greedy['chrf']:.2f} | "
            f"{beam['bleu']:.2f} / {beam['chrf']:.2f} | {seconds:.0f} |"
        )
    say(f"signature: {scores['greedy']['bleu_signature']}")
    say(f"end: {machine.describe()}")


if __name__ == "__main__":
    main()
