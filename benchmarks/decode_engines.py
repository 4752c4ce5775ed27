"""Decoding speed of the Transformer preset beside CTranslate2 (issue #51).

Converts `transformer_bible_en_es` to CTranslate2
(`benchmarks/ctranslate2_conversion.py`: the same network, weights and
position table; CTranslate2's finished beam hypotheses re-ranked by our
GNMT score), then translates the Bible test verses (`--limit` the first N)
greedily and at beam `--beam` with every engine (`--engines`):

- `translate`: `model.translate(verses, beam_width=...)`, the Python API,
  on each backend of `--backends` (TensorFlow in this process; JAX and
  PyTorch each in a worker subprocess with `KERAS_BACKEND` set, kept alive
  between rounds and timed inside the worker);
- `savedmodel`: the export's `translate` signature
  (`zoo.serving.export.export`), called on `translate`'s length-sorted
  chunks of 64;
- `ours-int8`: `translate` (TensorFlow) of the preset quantized by Keras's
  own API, `Task.quantize("int8")` (its `Dense`, `EinsumDense` and
  embedding kernels int8, the activations quantized per call);
- `ct2-float32`, `ct2-int8`: CTranslate2 on the converted model,
  `compute_type` float32 and int8 (quantized when loaded), 64 sentences a
  batch, `--threads` intra-op threads (0: one per core).

Every engine first runs once untimed per decoding (warm: traced, compiled,
loaded); then `--rounds` rounds, the engines taking turns in an order
reversed every round; a row gives the best round's seconds, subwords/s
(the target tokenizer's pieces of each translation plus its `[END]`, the
same count for every engine), sacreBLEU BLEU (`zoo.translation.metrics`,
as the model card) and the speed ratio to `translate` on TensorFlow. The
conversion is checked: CTranslate2 float32's greedy translations must equal
`translate`'s (a count of equal lines; the script exits 1 otherwise).
The CPU model and the load average are printed before and after.

CTranslate2 is a benchmark dependency: `pip install -e ".[bench]"`. The
re-ranking of CTranslate2's beam hypotheses, the tokenization and the
detokenization are inside its timed region, as they are inside
`translate`'s.

The full measurement (a quiet machine, one line):

    python benchmarks/decode_engines.py --log experiments/benchmarks/logs/decode_engines.log

A smoke run (numbers not a measurement):

    python benchmarks/decode_engines.py --limit 64 --rounds 1 --backends tensorflow
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from machine import describe, printer  # noqa: E402

PRESET = "transformer_bible_en_es"
BACKENDS = ("tensorflow", "jax", "torch")
ENGINES = ("translate", "savedmodel", "ours-int8", "ct2-float32", "ct2-int8")
BATCH_SIZE = 64


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--limit", type=int, help="the first N test verses")
    p.add_argument("--rounds", type=int, default=3, help="timed rounds")
    p.add_argument("--beam", type=int, default=4, help="beam width (and greedy)")
    p.add_argument("--engines", default=",".join(ENGINES), help="comma-separated")
    p.add_argument("--backends", default=",".join(BACKENDS), help="of `translate`")
    p.add_argument("--threads", type=int, default=0, help="CTranslate2's threads")
    p.add_argument("--log", help="also write the output here")
    p.add_argument("--worker", help=argparse.SUPPRESS)  # a backend's `translate`
    args = p.parse_args(argv)
    for name, allowed in (("engines", ENGINES), ("backends", BACKENDS)):
        unknown = sorted(set(getattr(args, name).split(",")) - set(allowed))
        if unknown:
            p.error(f"--{name}: unknown {unknown}; choose from {list(allowed)}")
    return args


def test_pairs(limit):
    """The test verses and their references (`python -m zoo evaluate`'s)."""
    from zoo.data import bible

    pairs = bible.load_pairs("test")[:limit]
    return [en for en, _, _ in pairs], [es for _, es, _ in pairs]


def timed(function, *args):
    """`(function(*args), seconds)`."""
    start = time.perf_counter()
    result = function(*args)
    return result, time.perf_counter() - start


# === A worker: `translate` on one backend, run by the parent's requests ===


def worker(args):
    """Answers each beam width read on stdin with a JSON line of its pass."""
    from zoo.base.task import Task

    answers = os.fdopen(os.dup(1), "w")  # stray prints go to stderr
    os.dup2(2, 1)
    model = Task.from_preset(PRESET)
    verses, _ = test_pairs(args.limit)
    answers.write("ready\n")
    answers.flush()
    for line in sys.stdin:
        outputs, seconds = timed(model.translate, verses, int(line))
        answers.write(json.dumps({"outputs": outputs, "seconds": seconds}) + "\n")
        answers.flush()


class WorkerEngine:
    """`translate` in a subprocess under `backend`: `(outputs, seconds)`."""

    def __init__(self, backend, limit):
        command = [sys.executable, os.path.abspath(__file__), "--worker", backend]
        if limit:
            command += ["--limit", str(limit)]
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=dict(os.environ, KERAS_BACKEND=backend),
        )
        if self.process.stdout.readline().strip() != "ready":
            raise RuntimeError(f"the {backend} worker exited while loading")

    def __call__(self, beam_width):
        self.process.stdin.write(f"{beam_width}\n")
        self.process.stdin.flush()
        answer = json.loads(self.process.stdout.readline())
        return answer["outputs"], answer["seconds"]

    def close(self):
        self.process.stdin.close()
        self.process.wait()


# === The engines of this (TensorFlow) process ===


def ours_int8(verses):
    """`translate` of the preset quantized to int8: a `run(beam_width)`."""
    from zoo.base.task import Task

    quantized = Task.from_preset(PRESET)
    quantized.quantize("int8")
    return lambda beam: timed(quantized.translate, verses, beam)


def savedmodel_engine(model, verses, directory):
    """The export's `translate` signature on `translate`'s chunks."""
    import numpy as np
    import tensorflow as tf

    from zoo.serving.export import export, register_text_ops

    export(model, directory, beam_width=4)
    register_text_ops()
    signature = tf.saved_model.load(directory).signatures["translate"]
    pre = model.preprocessor
    ids = np.asarray(pre(tf.constant(verses))["encoder_token_ids"])
    lengths = (ids != pre.source_pad_id).sum(axis=1)
    order = sorted(range(len(verses)), key=lambda i: lengths[i])
    max_length = tf.constant(pre.target_sequence_length, tf.int32)

    def run(beam_width):
        outputs = [None] * len(verses)
        for begin in range(0, len(order), BATCH_SIZE):
            chunk = order[begin : begin + BATCH_SIZE]
            result = signature(
                text=tf.constant([verses[i] for i in chunk]),
                beam_width=tf.constant(beam_width, tf.int32),
                max_length=max_length,
            )
            for i, text in zip(chunk, result["translation"].numpy()):
                outputs[i] = text.decode("utf-8")
        return outputs

    return run


def local_engines(args, model, verses, directory):
    """`{name: run(beam_width) -> (outputs, seconds), or why it is not run}`."""
    from ctranslate2_conversion import CTranslate2Translator, convert

    wanted = args.engines.split(",")
    engines = {}
    if "translate" in wanted and "tensorflow" in args.backends.split(","):
        engines["translate tensorflow"] = lambda beam: timed(
            model.translate, verses, beam
        )
    if "savedmodel" in wanted:
        run = savedmodel_engine(model, verses, os.path.join(directory, "savedmodel"))
        engines["savedmodel"] = lambda beam: timed(run, beam)
    if "ours-int8" in wanted:
        engines["ours-int8"] = ours_int8(verses)
    kinds = [k for k in ("float32", "int8") if f"ct2-{k}" in wanted]
    if kinds:
        converted = convert(model, os.path.join(directory, "ctranslate2"))
    for kind in kinds:
        translator = CTranslate2Translator(
            converted, model.preprocessor, kind, threads=args.threads
        )
        engines[f"ct2-{kind}"] = lambda beam, t=translator: timed(t, verses, beam)
    return engines


def measure(engines, widths, rounds):
    """Warm-up, then alternating rounds: `{(engine, width): [outputs, [s]]}`.

    `engines` maps a name to `run(beam_width) -> (outputs, seconds)`, or to
    a str saying why it is not available (not run).
    """
    names = [name for name, run in engines.items() if callable(run)]

    def run(name, width, label):
        outputs, seconds = engines[name](width)
        print(f"# {label}: {name}, beam {width}, {seconds:.1f} s", file=sys.stderr)
        return outputs, seconds

    runs = {(n, w): [run(n, w, "warm-up")[0], []] for w in widths for n in names}
    for r in range(rounds):
        for width in widths:
            for name in names if r % 2 == 0 else names[::-1]:
                outputs, seconds = run(name, width, f"round {r + 1}")
                if outputs != runs[name, width][0]:
                    raise RuntimeError(f"{name} changed its outputs in round {r + 1}")
                runs[name, width][1].append(seconds)
    return runs


def subword_count(model, outputs):
    """The target tokenizer's pieces of the translations, one `[END]` each."""
    pieces = model.preprocessor.target_tokenizer(outputs)
    return sum(len(p) for p in pieces) + len(outputs)


def table(model, runs, engines, references, widths):
    """Markdown rows of every engine and decoding."""
    from zoo.translation.metrics import corpus_scores

    lines = [
        "| decoding | engine | best s | subwords/s | BLEU | vs translate TF |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for width in widths:
        decoding = "greedy" if width == 1 else f"beam {width}"
        reference = runs.get(("translate tensorflow", width), [None, [None]])[1]
        for name, engine in engines.items():
            if not callable(engine):
                lines.append(f"| {decoding} | {name} | {engine} | | | |")
                continue
            outputs, seconds = runs[name, width]
            best = min(seconds)
            ratio = f"{min(reference) / best:.2f}x" if reference[0] else "-"
            bleu = corpus_scores(outputs, references)["bleu"]
            lines.append(
                f"| {decoding} | {name} | {best:.2f} "
                f"| {subword_count(model, outputs) / best:.0f} | {bleu:.2f} "
                f"| {ratio} |"
            )
    return lines


def equal_lines(runs, name, width, reference="translate tensorflow"):
    """`(equal, total)` lines of `name`'s translations and the reference's."""
    mine, theirs = runs[name, width][0], runs[reference, width][0]
    return sum(a == b for a, b in zip(mine, theirs)), len(theirs)


def main(argv=None):
    args = parse_args(argv)
    if args.worker:
        return worker(args)
    os.environ["KERAS_BACKEND"] = "tensorflow"
    say = printer(args.log)

    import ctranslate2
    import keras
    import tensorflow as tf

    from zoo.base.task import Task

    say(f"{describe()}; {' '.join(['python', *sys.argv])}")
    say(
        f"keras {keras.__version__}, tensorflow {tf.__version__}, "
        f"ctranslate2 {ctranslate2.__version__}"
    )
    model = Task.from_preset(PRESET)
    verses, references = test_pairs(args.limit)
    widths = [1, args.beam]
    others = [b for b in args.backends.split(",") if b != "tensorflow"]
    workers = {}
    if "translate" in args.engines.split(","):
        workers = {f"translate {b}": WorkerEngine(b, args.limit) for b in others}
    try:
        with tempfile.TemporaryDirectory(prefix="decode_engines_") as directory:
            engines = {**local_engines(args, model, verses, directory), **workers}
            runs = measure(engines, widths, args.rounds)
    finally:
        for engine in workers.values():
            engine.close()

    say(
        f"\n{PRESET}: {len(verses)} test verses, greedy and beam {args.beam}, "
        f"best of {args.rounds} alternating rounds after a warm-up pass"
    )
    say(f"{describe()}\n")
    for line in table(model, runs, engines, references, widths):
        say(line)
    failures = 0
    for name, width in sorted(runs):
        if name != "translate tensorflow" and ("translate tensorflow", width) in runs:
            equal, total = equal_lines(runs, name, width)
            decoding = "greedy" if width == 1 else f"beam {width}"
            say(f"{name}, {decoding}: {equal}/{total} translations equal TF's")
            failures += name == "ct2-float32" and width == 1 and equal != total
    verdict = "FAILED" if failures else "passed"
    say(f"\nconversion check (ct2-float32 greedy == translate TF): {verdict}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
