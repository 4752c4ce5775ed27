"""Every shipped preset scored on TensorFlow, JAX and PyTorch: one table (#43).

For each backend (`--backends`, default all three) the script runs itself
again as a worker in a subprocess with `KERAS_BACKEND` set (a process has
one Keras backend), one backend after the other. The worker loads every
shipped preset of the family registry (`zoo.registry.presets()`) and scores
it on its held-out test split with the kind's own `evaluate_split`, as
`python -m zoo evaluate PRESET` does: sacreBLEU BLEU of greedy and beam
decoding for a translator, BLEU-4, exact captions and the attention peak on
the named item for a captioner, the test accuracy for a glimpse classifier.
The beam width is the one the preset's metrics report (`beam4`, `beam3`).
While the evaluation runs, the worker keeps what the scored verb returned
(the translations, the captions, the predicted classes), so the table also
counts the outputs that differ from TensorFlow's.

The table gives each metric on each backend, the largest difference from
TensorFlow's value, and whether it meets the issue's criteria: BLEU within
0.1, accuracies (and the other percentages) within 0.5 points, and equal
outputs. `--limit N` scores the first N examples of every test split (the
whole splits take about an hour per backend on a 2-core CPU). On JAX the
seconds of each preset (and the warm-up of `--decode`) come with the number
of compilations of the generation search and their seconds (tracing,
lowering and XLA compilation, from JAX's compile events).

`--decode N` measures instead the decoding speed of the Transformer preset
on each backend (issue #43, goal 5): `translate` of the first N test verses
at beam 4 (the user verb: tokenization, length-sorted batches of 64, the
beam search, detokenization), once untimed (the warm-up: TensorFlow traces
its search function, JAX compiles its loops for each batch shape), then
`--runs` timed passes over the same verses; it prints the median seconds,
sentences/s and generated tokens/s (the subwords `generate` produced,
`[END]` included), and whether the translations equal TensorFlow's.

    nice -n 10 python benchmarks/zoo_backends_evaluation.py --limit 100 \\
        --json experiments/benchmarks/logs/zoo_backends_evaluation_s26.json \\
        > experiments/benchmarks/logs/zoo_backends_evaluation_s26.log
    python benchmarks/zoo_backends_evaluation.py --decode 64 --runs 2
    python benchmarks/zoo_backends_evaluation.py --limit 8 --presets transformer_bible_en_es
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from machine import describe, load_average  # noqa: E402

BACKENDS = ("tensorflow", "jax", "torch")

#: Largest difference from TensorFlow's value that meets #43's criteria.
BLEU_TOLERANCE = 0.1
PERCENT_TOLERANCE = 0.5

#: The verb each kind's `evaluate_split` scores, and what of its result to keep.
SCORED_VERBS = {
    "translation": ("translate", lambda result: list(result)),
    "captioning": ("caption", lambda result: list(result[0])),
    "classification": ("predict", lambda result: result.argmax(-1).tolist()),
}

DECODE_PRESET = "transformer_bible_en_es"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backends", default=",".join(BACKENDS), help="comma-separated")
    p.add_argument(
        "--presets", nargs="+", help="presets to score (default: every shipped one)"
    )
    p.add_argument("--limit", type=_positive, help="first N examples of each split")
    p.add_argument(
        "--decode",
        type=_positive,
        metavar="N",
        help="time beam-4 `translate` of N test verses instead (Transformer)",
    )
    p.add_argument("--runs", type=_positive, default=2, help="timed decode passes")
    p.add_argument("--beam-width", type=_positive, default=4, help="--decode beam")
    p.add_argument("--json", help="also write the results here")
    p.add_argument("--worker", help=argparse.SUPPRESS)  # the worker's output file
    args = p.parse_args(argv)
    unknown = sorted(set(args.backends.split(",")) - set(BACKENDS))
    if unknown:
        p.error(f"--backends: unknown {unknown}; choose from {list(BACKENDS)}")
    return args


def _positive(text):
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected an int >= 1, received {text!r}")
    return int(text)


# === The worker: one backend ===


def recording(model, verb, keep, outputs):
    """Makes `model.<verb>` append `keep(result)` of each call to `outputs`."""
    method = getattr(model, verb)

    def recorded(*args, **kwargs):
        result = method(*args, **kwargs)
        outputs.append(keep(result))
        return result

    setattr(model, verb, recorded)


def beam_width_of(model):
    """The beam width the preset's test metrics report (`beam4`), else 4."""
    test = (model.preset_metadata or {}).get("metrics", {}).get("test", {})
    widths = [int(m.group(1)) for m in map(re.compile(r"beam(\d+)$").match, test) if m]
    return max([w for w in widths if w > 1], default=4)


def metric_rows(kind, scores):
    """`[(metric, value, tolerance)]` of what `evaluate_split` returned.

    Example:
    >>> metric_rows("classification", 12.5)
    [('accuracy %', 87.5, 0.5)]
    """
    if kind == "classification":  # the error in percent
        return [("accuracy %", round(100.0 - scores, 2), PERCENT_TOLERANCE)]
    rows = []
    for decoding, values in scores.items():
        if kind == "translation":
            rows.append((f"BLEU {decoding}", values["bleu"], BLEU_TOLERANCE))
            rows.append((f"chrF {decoding}", values["chrf"], BLEU_TOLERANCE))
        else:
            rows += [
                (f"BLEU-4 {decoding}", values["bleu4"], BLEU_TOLERANCE),
                (f"exact caption % {decoding}", values["exact_match"], 0.5),
                (f"attention peak % {decoding}", values["attention"]["peak"], 0.5),
            ]
    return rows


def search_compilations():
    """A dict that counts JAX's compilations of the generation search.

    JAX reports each compilation of a jitted function by events (tracing,
    lowering, XLA compilation, with the function's name); the dict counts
    the XLA compilations of `zoo.base.generation`'s `jitted_search` and adds
    up the seconds of all three, as they happen. `None` off JAX.
    """
    import keras

    if keras.backend.backend() != "jax":
        return None
    from jax import monitoring

    counts = {"compilations": 0, "compile_seconds": 0.0}

    def listen(event, duration, fun_name="", **_):
        if "jitted_search" in str(fun_name):
            counts["compilations"] += event.endswith("backend_compile_duration")
            counts["compile_seconds"] += duration

    monitoring.register_event_duration_secs_listener(listen)
    return counts


def compiled_since(counts, before):
    """What `search_compilations()` counted since `before` (a copy of it)."""
    if counts is None:
        return {}
    return {
        "search_compilations": counts["compilations"] - before["compilations"],
        "search_compile_seconds": round(
            counts["compile_seconds"] - before["compile_seconds"], 1
        ),
    }


def evaluate_preset(name, limit, compilations=None):
    """Scores one preset as `python -m zoo evaluate` does, keeping its outputs."""
    from zoo.base.task import Task

    model = Task.from_preset(name)
    outputs = []
    verb, keep = SCORED_VERBS[model.kind]
    recording(model, verb, keep, outputs)
    before = dict(compilations or {})
    start = time.time()
    scores = model.evaluate_split("test", limit=limit, beam_width=beam_width_of(model))
    return {
        "kind": model.kind,
        "metrics": metric_rows(model.kind, scores),
        "outputs": outputs,
        "seconds": round(time.time() - start, 1),
        **compiled_since(compilations, before),
    }


def decode_speed(args):
    """Warm-up and timed beam `translate` passes over the first test verses."""
    import numpy as np

    from zoo.base.task import Task
    from zoo.data import bible

    model = Task.from_preset(DECODE_PRESET)
    sources = [en for en, _, _ in bible.load_pairs("test")][: args.decode]
    generated = []
    recording(model, "generate", np.asarray, generated)
    compilations = search_compilations()
    before = dict(compilations or {})
    start = time.perf_counter()
    translations = model.translate(sources, beam_width=args.beam_width)
    warm_up = time.perf_counter() - start
    warm_up_compilations = compiled_since(compilations, before)
    pad, begin = model.preprocessor.target_pad_id, model.preprocessor.start_id
    tokens = sum(int(np.sum((t != pad) & (t != begin))) for t in generated)
    times = []
    for _ in range(args.runs):
        start = time.perf_counter()
        again = model.translate(sources, beam_width=args.beam_width)
        times.append(time.perf_counter() - start)
        if again != translations:
            raise RuntimeError("`translate` gave other translations on a rerun")
    seconds = statistics.median(times)
    return {
        "preset": DECODE_PRESET,
        "verses": len(sources),
        "beam_width": args.beam_width,
        "warm_up_seconds": round(warm_up, 2),
        **warm_up_compilations,
        "seconds": [round(t, 2) for t in times],
        "median_seconds": round(seconds, 2),
        "sentences_per_second": round(len(sources) / seconds, 2),
        "tokens": tokens,
        "tokens_per_second": round(tokens / seconds, 1),
        "outputs": [translations],
    }


def backend_version():
    """`"<backend> <version>"` of the backend library this process runs."""
    import importlib

    import keras

    backend = keras.backend.backend()
    return f"{backend} {importlib.import_module(backend).__version__}"


def worker(args):
    import keras

    from zoo import registry

    result = {
        "backend": keras.backend.backend(),
        "versions": f"keras {keras.__version__}, {backend_version()}",
        "load_average_before": load_average(),
    }
    if args.decode:
        result["decode"] = decode_speed(args)
    else:
        result["presets"] = {}
        compilations = search_compilations()
        for name in args.presets or sorted(registry.presets()):
            print(f"== {name} on {result['backend']}", flush=True)
            try:
                result["presets"][name] = evaluate_preset(
                    name, args.limit, compilations
                )
            except Exception as e:  # shown in the table, not dropped
                result["presets"][name] = {"error": f"{type(e).__name__}: {e}"}
            keras.backend.clear_session()
    result["load_average_after"] = load_average()
    with open(args.worker, "w", encoding="utf-8") as f:
        json.dump(result, f)


# === The parent: one worker per backend, one table ===


def run_workers(args, argv):
    """Runs the worker under each backend in turn; `{backend: its result}`."""
    results = {}
    for backend in args.backends.split(","):
        with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
            path = f.name
        start = time.time()
        print(f"# {backend}: worker started, load average {load_average()}", flush=True)
        done = subprocess.run(
            [sys.executable, os.path.abspath(__file__), *argv, "--worker", path],
            env=dict(os.environ, KERAS_BACKEND=backend),
            stdout=sys.stderr,  # the evaluation's own lines, apart from the table
        )
        if done.returncode != 0:
            results[backend] = {"error": f"worker exited with {done.returncode}"}
        else:
            with open(path, encoding="utf-8") as f:
                results[backend] = json.load(f)
        os.unlink(path)
        results[backend]["wall_seconds"] = round(time.time() - start, 1)
        print(f"# {backend}: {results[backend]['wall_seconds']} s", flush=True)
    return results


def differing(outputs, reference):
    """`"k/n"`: how many of the outputs differ from the reference's."""
    pairs = [p for a, b in zip(outputs, reference) for p in zip(a, b)]
    total = sum(len(b) for b in reference)
    if sum(len(a) for a in outputs) != total:
        return f"lengths {sum(len(a) for a in outputs)} != {total}"
    return f"{sum(a != b for a, b in pairs)}/{total}"


def _cell(value):
    return "-" if value is None else f"{value:.2f}"


def evaluation_table(results, backends):
    """Markdown table rows and `[failures]` of the evaluation results."""
    names = sorted({n for r in results.values() for n in r.get("presets", {})})
    header = " | ".join(backends)
    lines = [
        f"| preset | metric | {header} | max diff vs TF | criterion | met |",
        "|---|---|" + "---:|" * len(backends) + "---:|---:|---|",
    ]
    failures = []
    for name in names:
        scored = {b: results[b].get("presets", {}).get(name, {}) for b in backends}
        for b, s in scored.items():
            if "metrics" not in s:
                failures.append(f"{name} on {b}: {s.get('error', 'not run')}")
        ok = {b: s for b, s in scored.items() if "metrics" in s}
        if not ok:
            continue
        rows = next(iter(ok.values()))["metrics"]
        for i, (metric, _, tolerance) in enumerate(rows):
            values = {b: s["metrics"][i][1] for b, s in ok.items()}
            cells = " | ".join(_cell(values.get(b)) for b in backends)
            reference = values.get("tensorflow")
            diff = None
            if reference is not None and len(values) > 1:
                diff = max(abs(v - reference) for v in values.values())
            met = diff is not None and diff <= tolerance + 1e-9
            if not met:
                failures.append(f"{name} {metric}: max diff {_cell(diff)}")
            lines.append(
                f"| {name} | {metric} | {cells} | {_cell(diff)} | <= {tolerance} "
                f"| {'yes' if met else 'NO'} |"
            )
        if "tensorflow" in ok:
            reference = ok["tensorflow"]["outputs"]
            cells = " | ".join(
                differing(ok[b]["outputs"], reference) if b in ok else "-"
                for b in backends
            )
            met = all(
                differing(s["outputs"], reference).startswith("0/") for s in ok.values()
            )
            if not met:
                failures.append(f"{name}: outputs differ from TensorFlow's")
            lines.append(
                f"| {name} | outputs differing from TF's | {cells} | | equal "
                f"| {'yes' if met else 'NO'} |"
            )
    return lines, failures


def with_compilations(entry, key, missing=None):
    """`entry[key]`, with JAX's search compilations where they were counted.

    Example:
    >>> with_compilations({"seconds": 9.5}, "seconds")
    '9.5'
    >>> entry = {"seconds": 9.5, "search_compilations": 3, "search_compile_seconds": 4.0}
    >>> with_compilations(entry, "seconds")
    '9.5 (3 search compilations, 4.0 s)'
    """
    cell = str(entry.get(key, missing))
    if "search_compilations" in entry:
        cell += (
            f" ({entry['search_compilations']} search compilations, "
            f"{entry['search_compile_seconds']} s)"
        )
    return cell


def decode_table(results, backends):
    """Markdown table rows and `[failures]` of the `--decode` results."""
    lines = [
        "| backend | verses | warm-up s | median s | sentences/s | tokens/s "
        "| translations differing from TF's |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    failures = []
    reference = results.get("tensorflow", {}).get("decode", {}).get("outputs")
    for b in backends:
        d = results[b].get("decode")
        if d is None:
            failures.append(f"{b}: {results[b].get('error', 'not run')}")
            continue
        same = differing(d["outputs"], reference) if reference else "-"
        if reference and not same.startswith("0/"):
            failures.append(f"{b}: translations differ from TensorFlow's")
        lines.append(
            f"| {b} | {d['verses']} | {with_compilations(d, 'warm_up_seconds')} "
            f"| {d['median_seconds']} "
            f"| {d['sentences_per_second']} | {d['tokens_per_second']} | {same} |"
        )
    return lines, failures


def worker_argv(args):
    """The worker's options: the parent's, less `--backends` and `--json`."""
    argv = ["--runs", str(args.runs), "--beam-width", str(args.beam_width)]
    if args.presets:
        argv += ["--presets", *args.presets]
    if args.limit:
        argv += ["--limit", str(args.limit)]
    if args.decode:
        argv += ["--decode", str(args.decode)]
    return argv


def seconds_table(results, backends):
    """Markdown rows: each preset's evaluation seconds on each backend."""
    names = sorted({n for r in results.values() for n in r.get("presets", {})})
    lines = [
        f"| preset | {' | '.join(f'{b} s' for b in backends)} |",
        "|---|" + "---:|" * len(backends),
    ]
    for name in names:
        cells = [
            with_compilations(
                results[b].get("presets", {}).get(name, {}), "seconds", "-"
            )
            for b in backends
        ]
        lines.append(f"| {name} | {' | '.join(cells)} |")
    return lines


def differing_examples(results, count=5):
    """Replaces each result's outputs with its first outputs unlike TF's.

    The JSON keeps `[index, TensorFlow's, this backend's]` of up to `count`
    differing outputs of every scored call instead of every output.
    """

    def entries(result):
        if "decode" in result:
            return {"decode": result["decode"]}
        return result.get("presets", {})

    reference = {
        name: entry.get("outputs")
        for name, entry in entries(results.get("tensorflow", {})).items()
    }
    for backend, result in results.items():
        for name, entry in entries(result).items():
            outputs = entry.pop("outputs", None)
            theirs = reference.get(name)
            if outputs is None or theirs is None or backend == "tensorflow":
                continue
            entry["differing_examples"] = [
                [[i, b, a] for i, (a, b) in enumerate(zip(mine, tf)) if a != b][:count]
                for mine, tf in zip(outputs, theirs)
            ]


def main(argv=None):
    args = parse_args(argv)
    if args.worker:
        return worker(args)
    print(f"{describe()}; {' '.join(['python', *sys.argv])}", flush=True)
    backends = args.backends.split(",")
    results = run_workers(args, worker_argv(args))
    print()
    for b in backends:
        print(
            f"{b}: {results[b].get('versions', results[b].get('error'))}, "
            f"{results[b]['wall_seconds']} s, load average "
            f"{results[b].get('load_average_before')} -> "
            f"{results[b].get('load_average_after')}"
        )
    if args.decode:
        print(
            f"\n{DECODE_PRESET}: `translate` of the first {args.decode} test "
            f"verses, beam {args.beam_width}, median of {args.runs} timed passes "
            "after one warm-up pass; tokens: the subwords generated, [END] "
            "included\n"
        )
        lines, failures = decode_table(results, backends)
    else:
        limit = f"the first {args.limit}" if args.limit else "all"
        print(f"\nheld-out test splits, {limit} examples of each\n")
        lines, failures = evaluation_table(results, backends)
        lines += ["", "evaluation seconds (decoding included)", ""]
        lines += seconds_table(results, backends)
    print("\n".join(lines))
    print(
        "\ncriteria met: yes"
        if not failures
        else "\ncriteria NOT met:\n" + "\n".join(f"  {f}" for f in failures)
    )
    if args.json:
        differing_examples(results)
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"command": sys.argv, "results": results}, f, indent=1)
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
