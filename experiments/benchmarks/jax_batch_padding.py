"""JAX: a preset's test-split evaluation with and without batch padding.

Under JAX `GenerativeTask.generate` runs a search compiled for each input
shape. Session 27 padded the source length to a multiple of 16; the last,
smaller chunk of a `translate`/`caption` call was still a new shape. With
`batch_size` (which `translate` and `caption` now pass) a smaller chunk runs
padded with copies of its last row (session 28). This probe runs, in one
JAX process and alternately (so that the machine's load falls on both
alike), each preset's `evaluate_split("test")` on a freshly loaded preset
"before" (`generate` ignoring `batch_size`: the search as session 27 left
it) and "after", twice on the same model: the cold pass compiles, the warm
pass reuses every compiled search, so it is the running time alone. It
prints each pass's seconds, the search compilations and their seconds
(tracing, lowering, XLA; counted as `benchmarks/zoo_backends_evaluation.py`
counts them), with `--calls` every `generate` call that compiled (its
inputs' shape and the `batch_size` it was given, which "before" ignores),
and whether the outputs equal the first pass's. `evaluate_split` prints
its scores and examples as well; the logs keep the probe's lines only.

    KERAS_BACKEND=jax nice -n 10 taskset -c 1 python \\
        experiments/benchmarks/jax_batch_padding.py --rounds 1 --calls \\
        | grep "^round\\|compiled:\\|^load"
"""

import argparse
import os
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "jax")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))

from machine import load_average  # noqa: E402
from zoo_backends_evaluation import (  # noqa: E402
    SCORED_VERBS,
    beam_width_of,
    recording,
    search_compilations,
)

PRESETS = ("transformer_bible_en_es", "seq2seq_bahdanau_bible_en_es")


def unpadded(generate):
    """`generate` as session 27 ran it: `batch_size` ignored."""

    def run(self, inputs, *args, batch_size=None, **kwargs):
        return generate(self, inputs, *args, **kwargs)

    return run


def logging_calls(model, counts, calls):
    """Makes `model.generate` append `(shape, rows, beam, s, compiling s)`."""
    generate = model.generate

    def logged(inputs, *args, **kwargs):
        before = dict(counts)
        start = time.perf_counter()
        result = generate(inputs, *args, **kwargs)
        seconds = time.perf_counter() - start
        compiled = counts["compile_seconds"] - before["compile_seconds"]
        shape = tuple(getattr(inputs, "shape", ()))
        width = kwargs.get("beam_width")
        calls.append((shape, kwargs.get("batch_size"), width, seconds, compiled))
        return result

    model.generate = logged


def one_pass(model, limit):
    """`(seconds, outputs)` of the model's test evaluation."""
    outputs = []
    verb, keep = SCORED_VERBS[model.kind]
    method = getattr(model, verb)
    recording(model, verb, keep, outputs)
    start = time.perf_counter()
    model.evaluate_split("test", limit=limit, beam_width=beam_width_of(model))
    seconds = time.perf_counter() - start
    setattr(model, verb, method)
    return seconds, outputs


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--presets", nargs="+", default=list(PRESETS))
    p.add_argument("--modes", default="before,after")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--limit", type=int, help="first N test examples")
    p.add_argument("--calls", action="store_true", help="list compiling calls")
    args = p.parse_args()

    from zoo.base.generation import GenerativeTask
    from zoo.base.task import Task

    generate = GenerativeTask.generate
    counts = search_compilations()
    references = {}
    print(f"load average {load_average()}", flush=True)
    for round_ in range(args.rounds):
        for name in args.presets:
            for mode in args.modes.split(","):
                GenerativeTask.generate = (
                    unpadded(generate) if mode == "before" else generate
                )
                model = Task.from_preset(name)
                calls = []
                logging_calls(model, counts, calls)
                for pass_ in ("cold", "warm"):
                    before = dict(counts)
                    seconds, outputs = one_pass(model, args.limit)
                    compiled = counts["compilations"] - before["compilations"]
                    compile_s = counts["compile_seconds"] - before["compile_seconds"]
                    reference = references.setdefault(name, outputs)
                    total = sum(len(o) for o in outputs)
                    differ = sum(
                        a != b for o, r in zip(outputs, reference) for a, b in zip(o, r)
                    )
                    print(
                        f"round {round_} {name} {mode:6s} {pass_}: {seconds:6.1f} s, "
                        f"{compiled:2d} search compilations ({compile_s:5.1f} s), "
                        f"{differ}/{total} outputs differ from the first pass's; "
                        f"load average {load_average()}",
                        flush=True,
                    )
                    if args.calls and pass_ == "cold":
                        for shape, rows, width, seconds, compile_s in calls:
                            if compile_s:
                                print(
                                    f"    compiled: beam {width} inputs {shape} "
                                    f"rows {rows}: "
                                    f"{seconds:.1f} s, {compile_s:.1f} s compiling"
                                )
                    calls.clear()
    GenerativeTask.generate = generate


if __name__ == "__main__":
    main()
