"""The cost of `translate(..., return_attention=True)` on each backend (#51).

`translate --plot` asks `translate` for the alignments: after the search,
`token_attention` re-runs the decoder over the chosen tokens. For each
backend of `--backends` (a worker subprocess with `KERAS_BACKEND` set) the
script translates the first `--verses` test verses with the Transformer
preset at beam 4, in this order, each call timed:

1. `first`: with the alignments, the process's first call (traces and
   compiles);
2. `plain` and `maps`: without and with them, `--rounds` alternating times;
3. `new sizes`: with the alignments on the first `--verses` minus 8
   verses, whose last chunk has a batch size no call had before (a
   compilation per batch size shows here as a call much slower than
   `maps`), then the same call again (`new sizes again`).

It prints each call's seconds, and `maps / plain` (best of the rounds),
the issue's <= 1.5x.

    python benchmarks/attention_maps.py --log experiments/benchmarks/logs/attention_maps.log
"""

import argparse
import json
import os
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from machine import describe, printer  # noqa: E402

PRESET = "transformer_bible_en_es"
BACKENDS = ("tensorflow", "jax", "torch")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--verses", type=int, default=96, help="the first N test verses")
    p.add_argument("--rounds", type=int, default=2, help="timed rounds")
    p.add_argument("--backends", default=",".join(BACKENDS), help="comma-separated")
    p.add_argument("--log", help="also write the output here")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def worker(args):
    """Times the calls of the docstring; prints one JSON line of seconds."""
    from zoo.base.task import Task
    from zoo.data import bible

    model = Task.from_preset(PRESET)
    verses = [en for en, _, _ in bible.load_pairs("test")[: args.verses]]

    def timed(texts, maps):
        start = time.perf_counter()
        model.translate(texts, beam_width=4, return_attention=maps)
        return time.perf_counter() - start

    seconds = {"first": [timed(verses, True)], "plain": [], "maps": []}
    for r in range(args.rounds):
        for name in ("plain", "maps") if r % 2 == 0 else ("maps", "plain"):
            seconds[name].append(timed(verses, name == "maps"))
    seconds["new sizes"] = [timed(verses[:-8], True)]
    seconds["new sizes again"] = [timed(verses[:-8], True)]
    print(json.dumps(seconds), flush=True)


def main(argv=None):
    args = parse_args(argv)
    if args.worker:
        return worker(args)
    say = printer(args.log)
    say(f"{describe()}; {' '.join(['python', *sys.argv])}")
    say(
        f"\n{PRESET}, beam 4, {args.verses} test verses (chunks of 64); "
        f"best of {args.rounds} alternating rounds\n"
    )
    say("| backend | first (maps) | plain | maps | maps / plain | new sizes | again |")
    say("|---|---:|---:|---:|---:|---:|---:|")
    for backend in args.backends.split(","):
        command = [sys.executable, os.path.abspath(__file__), "--worker"]
        command += ["--verses", str(args.verses), "--rounds", str(args.rounds)]
        out = subprocess.run(
            command,
            env=dict(os.environ, KERAS_BACKEND=backend),
            capture_output=True,
            text=True,
        )
        if out.returncode:
            say(f"| {backend} | failed: {out.stderr.strip().splitlines()[-1]} |")
            continue
        s = {k: min(v) for k, v in json.loads(out.stdout.splitlines()[-1]).items()}
        say(
            f"| {backend} | {s['first']:.2f} | {s['plain']:.2f} | {s['maps']:.2f} "
            f"| {s['maps'] / s['plain']:.2f}x | {s['new sizes']:.2f} "
            f"| {s['new sizes again']:.2f} |"
        )
    say(f"\n{describe()}")


if __name__ == "__main__":
    sys.exit(main())
