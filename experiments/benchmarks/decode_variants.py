"""`translate()`'s search variants timed beside CTranslate2 float32 (issue #51).

Session 31's measurement of the changes the session-30 profile proposed,
each alone against the shipped search, in one alternating run
(`benchmarks/decode_engines.py`'s `measure`: a warm-up pass, then
`--rounds` rounds in an order reversed every round), greedy and beam 4, on
the first `--limit` test verses of `transformer_bible_en_es` (TensorFlow):

- `static`: the search of sessions 1-30, every row stepping to the end
  (`drop_finished_every = None`);
- `drop K`: the search dropping its finished rows (greedy) or examples
  (beam) every K steps (`drop_finished=K`, `search.shrinking_loop`);
- `grow K`: `drop K` whose self-attention caches hold only the positions
  written so far, padded every K steps for the next K (`resize_cache`);
- `ct2-float32`: CTranslate2 on the same weights (the ratio's anchor).

Prints seconds (best round), the process's CPU seconds (best round: the
steadier measure on a shared machine), the ratio to CTranslate2 float32
and the
count of translations equal to the static search's.

    python experiments/benchmarks/decode_variants.py --limit 128 --rounds 2 \\
        --drop 4 --grow 4,8 --log experiments/benchmarks/logs/decode_variants_s31.log
"""

import argparse
import os
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ["KERAS_BACKEND"] = "tensorflow"
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))

from decode_engines import PRESET, measure, test_pairs, timed  # noqa: E402
from machine import describe, printer  # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--limit", type=int, default=128)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--drop", default="1,8", help="comma-separated K of `drop K`")
    p.add_argument("--grow", default="", help="comma-separated K of `grow K`")
    p.add_argument("--no-ct2", action="store_true", help="no CTranslate2 row")
    p.add_argument("--log")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    say = printer(args.log)
    from ctranslate2_conversion import CTranslate2Translator, convert

    from zoo.base.task import Task

    say(f"{describe()}; {' '.join(['python', *sys.argv])}")
    verses, _ = test_pairs(args.limit)
    engines = {}
    cpu_seconds = {}  # The process's CPU time per run: steadier under load.

    def variant(name, every, resize):
        model = Task.from_preset(PRESET)
        model.drop_finished_every = every
        if not resize:
            model.resize_cache = None  # The instance's, over the class's.

        def run(beam):
            cpu = time.process_time()
            outputs, seconds = timed(model.translate, verses, beam)
            cpu_seconds.setdefault((name, beam), []).append(time.process_time() - cpu)
            return outputs, seconds

        engines[name] = run
        return model

    base = variant("static", None, False)
    for k in [int(k) for k in args.drop.split(",") if k]:
        variant(f"drop {k}", k, False)
    for k in [int(k) for k in args.grow.split(",") if k]:
        variant(f"grow {k}", k, True)
    with tempfile.TemporaryDirectory(prefix="decode_variants_") as directory:
        if not args.no_ct2:
            converted = convert(base, os.path.join(directory, "ctranslate2"))
            translator = CTranslate2Translator(converted, base.preprocessor, "float32")
            engines["ct2-float32"] = lambda beam: timed(translator, verses, beam)
        widths = [1, args.beam]
        runs = measure(engines, widths, args.rounds)
    say(f"\n{PRESET}: {len(verses)} test verses, best of {args.rounds} rounds")
    say(f"{describe()}\n")
    say(
        "| variant | greedy s | beam s | / ct2 greedy | / ct2 beam | "
        "greedy CPU s | beam CPU s | CPU / static (greedy, beam) | equal ids |"
    )
    say("|---|---:|---:|---:|---:|---:|---:|---|---|")
    anchor = "ct2-float32" if "ct2-float32" in engines else "static"
    for name in engines:
        g, b = (min(runs[name, w][1]) for w in widths)
        cg, cb = (min(runs[anchor, w][1]) for w in widths)
        equal = [
            sum(x == y for x, y in zip(runs[name, w][0], runs["static", w][0]))
            for w in widths
        ]
        cpu = [min(cpu_seconds.get((name, w), [0, float("nan")])[1:]) for w in widths]
        base = [min(cpu_seconds[("static", w)][1:]) for w in widths]
        say(
            f"| {name} | {g:.2f} | {b:.2f} | {g / cg:.2f}x | {b / cb:.2f}x | "
            f"{cpu[0]:.2f} | {cpu[1]:.2f} | {cpu[0] / base[0]:.2f}x, "
            f"{cpu[1] / base[1]:.2f}x | "
            f"{equal[0]}/{len(verses)}, {equal[1]}/{len(verses)} |"
        )


if __name__ == "__main__":
    main()
