"""JAX: the Transformer preset's test-split decoding with and without source padding.

`zoo.base.generation` pads a source under JAX to a multiple of
`SOURCE_LENGTH_MULTIPLE` positions so that batches of near lengths share one
compiled search (session 27). This probe runs, in one JAX process and
alternately (so that the machine's load falls on both alike), `translate` of
the whole test split, greedy then beam 4, on a freshly loaded preset with the
multiple set to 1 (no padding: the search as session 26 left it) and to 16;
it prints each pass's seconds, the search compilations (counted as
`benchmarks/zoo_backends_evaluation.py` counts them) and whether the
translations equal the first pass's.

    KERAS_BACKEND=jax nice -n 10 taskset -c 1 python \\
        experiments/benchmarks/jax_source_padding.py --rounds 2
"""

import argparse
import os
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "jax")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))

from machine import load_average  # noqa: E402
from zoo_backends_evaluation import DECODE_PRESET, search_compilations  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--multiples", default="1,16")
    p.add_argument("--limit", type=int, help="first N test verses")
    args = p.parse_args()

    import zoo.base.generation as generation
    from zoo.base.task import Task
    from zoo.data import bible

    sources = [en for en, _, _ in bible.load_pairs("test")][: args.limit]
    counts = search_compilations()
    reference = None
    print(f"{len(sources)} verses; load average {load_average()}", flush=True)
    for round_ in range(args.rounds):
        for multiple in map(int, args.multiples.split(",")):
            generation.SOURCE_LENGTH_MULTIPLE = multiple
            model = Task.from_preset(DECODE_PRESET)
            before = dict(counts)
            start = time.perf_counter()
            outputs = [model.translate(sources, beam_width=w) for w in (1, 4)]
            seconds = time.perf_counter() - start
            compiled = counts["compilations"] - before["compilations"]
            compile_s = counts["compile_seconds"] - before["compile_seconds"]
            reference = reference or outputs
            differ = sum(
                a != b for o, r in zip(outputs, reference) for a, b in zip(o, r)
            )
            print(
                f"round {round_} multiple {multiple:2d}: greedy + beam 4 in "
                f"{seconds:.1f} s, {compiled} search compilations "
                f"({compile_s:.1f} s), {differ}/{2 * len(sources)} translations "
                f"differ from the first pass's; load average {load_average()}",
                flush=True,
            )


if __name__ == "__main__":
    main()
