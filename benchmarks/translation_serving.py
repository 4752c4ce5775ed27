"""Serving speed of a translation preset: `translate` vs its SavedModel export.

In one process: loads the preset (`--preset`, the Transformer by default),
exports it with `zoo.serving.export.export` (tokenization, beam search and
detokenization in the graph, `zoo/translation/export.py`) to a temporary
directory, loads that with `tf.saved_model.load`, and translates the Bible
test verses (763, `bible.load_pairs("test")` as `python -m zoo evaluate`
reads them) at beam `--beam-width` (4) and each of `--batch-sizes`
(1, 8, 64) in two ways:

- `translate`: `model.translate(verses, beam_width=4, batch_size=B)`, the
  Python API (it tokenizes, sorts the verses by source length, decodes
  chunks of `B` in a `tf.function` and detokenizes in Python).
- `export`: the export's `serving_default` signature (the `serve`
  endpoint), called once per chunk with `text` = the chunk's verses. The
  chunks are the ones `translate` decodes (the same length-sorted order,
  computed before the clock starts), so both decode the same batches and
  their translations must match line for line; the table counts the equal
  lines.

Each configuration first runs an untimed warm-up call on the `B` shortest
and the `B` longest verses (two source shapes, so `translate`'s
`tf.function`, which traces again for new shapes until it has relaxed
them, is traced before the clock starts), twice:
"warm-up s" is the first call, "compile s" the first minus the second
(tracing and graph optimisation; the first `translate` row pays the
`tf.function` trace that every later row reuses, as they share it).
Exporting and loading the SavedModel are timed on their own
line. Each timed pass runs once over the verses (`--limit`, and
`--limit-batch-one` for batch 1 alone, decoding the first N verses).

XLA: not measured, as it does not apply as such. The export's signature
holds string ops (WordPiece tokenizer, regex detokenization) that XLA
cannot compile, and `translate` trims every chunk to its longest source,
so each chunk has a new shape and `jit_compile` would compile again per
chunk (it would need fixed, padded shapes: another path, not this one's).
`benchmarks/transformer_decoding.py` measures XLA on the search alone.

`--profile` runs one batch-64 `translate` call under cProfile (the top 25
functions by cumulative time: the Python side) and a second one under the
TensorFlow profiler (the top op types and ops by self time: the graph
side). `--bfloat16` (for a CPU with avx512_bf16 or amx_bf16) loads the
preset again with the `mixed_bfloat16` dtype policy and gives its batch-64
`translate` speed and sacreBLEU/chrF beside float32's.

    python benchmarks/translation_serving.py --limit-batch-one 128 \\
        --profile --bfloat16 --json experiments/benchmarks/logs/translation_serving.json \\
        > experiments/benchmarks/logs/translation_serving.log
    python benchmarks/translation_serving.py --limit 32 --batch-sizes 8  # quick

Targets (issue #18): the Transformer preset decodes the 763 test verses at
beam 4 in <= 30 s on a 2-core machine; bfloat16 (where the CPU has it)
within 0.2 BLEU of float32. And the export as fast as `translate` (the
same graph, without Python between the steps), with equal translations on
every line.
"""

import argparse
import cProfile
import glob
import io
import json
import os
import pstats
import tempfile
import time

import keras
import numpy as np
import tensorflow as tf
from machine import cpu_flags, cpu_model, load_average

import zoo
from zoo.data import bible
from zoo.serving.export import export, register_text_ops
from zoo.translation.metrics import corpus_scores


def length_order(model, texts):
    """The order `translate` decodes `texts` in: by source length in subwords."""
    pre = model.preprocessor
    ids = np.asarray(pre(tf.constant(texts))["encoder_token_ids"])
    lengths = (ids != pre.source_pad_id).sum(axis=1)
    return sorted(range(len(texts)), key=lambda i: lengths[i])


class ExportRunner:
    """Translates with an export's signature in `translate`'s chunks."""

    def __init__(self, signature, order_of):
        self.signature = signature
        self.order_of = order_of

    def __call__(self, texts, batch_size):
        order = self.order_of(texts)
        outputs = [None] * len(texts)
        for begin in range(0, len(order), batch_size):
            chunk = order[begin : begin + batch_size]
            result = self.signature(text=tf.constant([texts[i] for i in chunk]))
            for i, text in zip(chunk, result["translation"].numpy()):
                outputs[i] = text.decode("utf-8")
        return outputs


def measure(translate, verses, batch_size):
    """Warm-up and timed pass of one configuration, as a row dict.

    The warm-up call (the `batch_size` shortest and longest verses) runs
    twice; the first minus the second is the compile time.
    """
    by_length = sorted(verses, key=len)
    warm = by_length[:batch_size] + by_length[-batch_size:]
    warm_seconds = []
    for _ in range(2):
        start = time.perf_counter()
        translate(warm, batch_size)
        warm_seconds.append(time.perf_counter() - start)
    start = time.perf_counter()
    outputs = translate(verses, batch_size)
    seconds = time.perf_counter() - start
    return {
        "batch_size": batch_size,
        "verses": len(verses),
        "seconds": round(seconds, 2),
        "verses_per_second": round(len(verses) / seconds, 2),
        "warmup_seconds": round(warm_seconds[0], 2),
        "compile_seconds": round(max(warm_seconds[0] - warm_seconds[1], 0.0), 2),
    }, outputs


def top_functions(profile, count=25):
    """The top `count` functions of a cProfile by cumulative time, as text."""
    stream = io.StringIO()
    stats = pstats.Stats(profile, stream=stream)
    stats.sort_stats("cumulative").print_stats(count)
    return stream.getvalue()


def tensorflow_op_stats(run, count=25):
    """Top op types and ops by self time of `run()` under the TF profiler.

    Reads the profile with TensorFlow's own converter (the one TensorBoard's
    profile plugin calls); returns `None` where that is unavailable.
    """
    from tensorflow.python.profiler.internal import _pywrap_profiler_plugin

    directory = tempfile.mkdtemp(prefix="translation_serving_profile_")
    tf.profiler.experimental.start(directory)
    try:
        run()
    finally:
        tf.profiler.experimental.stop()
    paths = glob.glob(os.path.join(directory, "**", "*.xplane.pb"), recursive=True)
    data, ok = _pywrap_profiler_plugin.xspace_to_tools_data(paths, "framework_op_stats")
    if not ok:
        return None
    table = json.loads(data)[0]  # the table with IDLE time
    columns = [c["id"] for c in table["cols"]]
    rows = [dict(zip(columns, [c.get("v") for c in r["c"]])) for r in table["rows"]]
    total = sum(r["total_self_time"] for r in rows) or 1.0
    by_type = {}
    for r in rows:
        entry = by_type.setdefault(r["type"], [0.0, 0])
        entry[0] += r["total_self_time"]
        entry[1] += int(r["occurrences"])
    types = sorted(by_type.items(), key=lambda kv: -kv[1][0])[:count]
    ops = sorted(rows, key=lambda r: -r["total_self_time"])[:count]
    return {
        "total_ms": round(total / 1000, 1),
        "types": [
            {
                "type": name,
                "self_ms": round(us / 1000, 1),
                "percent": round(100 * us / total, 1),
                "occurrences": n,
            }
            for name, (us, n) in types
        ],
        "ops": [
            {
                "op": r["operation"],
                "type": r["type"],
                "self_ms": round(r["total_self_time"] / 1000, 1),
                "percent": round(100 * r["total_self_time"] / total, 1),
                "occurrences": int(r["occurrences"]),
            }
            for r in ops
        ],
    }


def profile(model, verses, beam_width):
    """Where one batch-64 `translate` call spends its time."""
    batch = verses[:64]
    model.translate(batch, beam_width=beam_width, batch_size=64)  # warm
    profiler = cProfile.Profile()
    start = time.perf_counter()
    profiler.enable()
    model.translate(batch, beam_width=beam_width, batch_size=64)
    profiler.disable()
    seconds = time.perf_counter() - start
    text = top_functions(profiler)
    print(f"\n## cProfile: one translate call, {len(batch)} verses, {seconds:.2f} s\n")
    print(text)
    result = {"cprofile_seconds": round(seconds, 2), "cprofile_top25": text}
    try:
        ops = tensorflow_op_stats(
            lambda: model.translate(batch, beam_width=beam_width, batch_size=64)
        )
    except Exception as error:  # the converter is TensorFlow-internal
        print(f"TensorFlow profiler unavailable: {error!r}")
        ops = None
    if ops:
        print(
            f"## TensorFlow profiler: the same call, {ops['total_ms']} ms of op "
            "self time summed over TensorFlow's threads (IDLE: a thread "
            "waiting)\n"
        )
        print("| op type | self ms | % | occurrences |\n|---|---:|---:|---:|")
        for t in ops["types"]:
            print(
                f"| {t['type']} | {t['self_ms']} | {t['percent']} | {t['occurrences']} |"
            )
        print("\n| op | type | self ms | % | occurrences |\n|---|---|---:|---:|---:|")
        for o in ops["ops"]:
            print(
                f"| {o['op']} | {o['type']} | {o['self_ms']} | {o['percent']} "
                f"| {o['occurrences']} |"
            )
        result["tensorflow_ops"] = ops
    return result


def bfloat16_comparison(args, verses, references, float32_outputs, float32_row):
    """Batch-64 `translate` speed and BLEU of `mixed_bfloat16` vs float32."""
    model = zoo.from_preset(args.preset, dtype="mixed_bfloat16")
    row, outputs = measure(
        lambda texts, b: model.translate(
            texts, beam_width=args.beam_width, batch_size=b
        ),
        verses,
        64,
    )
    result = {"float32": dict(float32_row), "mixed_bfloat16": row}
    for name, hypotheses in (("float32", float32_outputs), ("mixed_bfloat16", outputs)):
        scores = corpus_scores(hypotheses, references)
        result[name].update(bleu=scores["bleu"], chrf=scores["chrf"])
    result["bleu_signature"] = scores["bleu_signature"]
    result["equal_lines"] = sum(a == b for a, b in zip(float32_outputs, outputs))
    print(
        f"\n## translate, batch 64, beam {args.beam_width}: float32 vs mixed_bfloat16"
        f" ({len(verses)} verses)\n"
    )
    print(
        "| dtype policy | verses/s | warm-up s | BLEU | chrF |\n|---|---:|---:|---:|---:|"
    )
    for name in ("float32", "mixed_bfloat16"):
        r = result[name]
        print(
            f"| {name} | {r['verses_per_second']:.2f} | {r['warmup_seconds']:.1f} "
            f"| {r['bleu']:.2f} | {r['chrf']:.2f} |"
        )
    print(
        f"\nlines equal to float32's: {result['equal_lines']}/{len(verses)}; "
        f"{result['bleu_signature']}"
    )
    return result


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="transformer_bible_en_es")
    p.add_argument("--sword-path", default=bible.DEFAULT_SWORD_PATH)
    p.add_argument("--beam-width", type=int, default=4)
    p.add_argument("--batch-sizes", default="1,8,64", help="comma-separated")
    p.add_argument("--limit", type=int, help="only the first N test verses")
    p.add_argument(
        "--limit-batch-one", type=int, help="at batch 1, only the first N verses"
    )
    p.add_argument(
        "--profile", action="store_true", help="profile one batch-64 translate"
    )
    p.add_argument(
        "--bfloat16",
        action="store_true",
        help="also translate with mixed_bfloat16 (CPUs with avx512_bf16/amx_bf16)",
    )
    p.add_argument("--json", help="also write the results here")
    args = p.parse_args(argv)
    batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    load_before = load_average()
    flags = cpu_flags()

    pairs = bible.load_pairs("test", sword_path=args.sword_path)
    pairs = pairs[: args.limit] if args.limit else pairs
    verses = [en for en, _, _ in pairs]
    references = [es for _, es, _ in pairs]

    model = zoo.from_preset(args.preset)
    directory = tempfile.mkdtemp(prefix="translation_serving_")
    start = time.perf_counter()
    export(model, directory, beam_width=args.beam_width)
    export_seconds = time.perf_counter() - start
    start = time.perf_counter()
    register_text_ops()
    serving = tf.saved_model.load(directory).signatures["serving_default"]
    load_seconds = time.perf_counter() - start

    orders = {}

    def order_of(texts):
        key = tuple(texts)
        if key not in orders:
            orders[key] = length_order(model, texts)
        return orders[key]

    methods = {
        "translate": lambda texts, b: model.translate(
            texts, beam_width=args.beam_width, batch_size=b
        ),
        "export": ExportRunner(serving, order_of),
    }
    rows, outputs = [], {}
    for batch_size in batch_sizes:
        texts = verses
        if batch_size == 1 and args.limit_batch_one:
            texts = verses[: args.limit_batch_one]
        order_of(texts)  # the export's chunks, computed before the clock starts
        for name, translate in methods.items():
            row, out = measure(translate, texts, batch_size)
            row["method"] = name
            rows.append(row)
            outputs[name, batch_size] = out
            print(
                f"{name}, batch {batch_size}: {row['verses_per_second']:.2f} verses/s "
                f"({row['verses']} verses, {row['seconds']} s; warm-up "
                f"{row['warmup_seconds']} s)",
                flush=True,
            )
        equal = sum(
            a == b
            for a, b in zip(
                outputs["translate", batch_size], outputs["export", batch_size]
            )
        )
        for row in rows[-2:]:
            row["equal_lines"] = equal
    load_after = load_average()

    print(
        f"\nkeras {keras.__version__} ({keras.backend.backend()}), tensorflow "
        f"{tf.__version__}; CPU: {cpu_model()} ({os.cpu_count()} logical cores; "
        f"bf16/amx flags: {', '.join(flags) or 'none'}); load average before "
        f"{load_before}, after {load_after}"
    )
    print(
        f"preset {args.preset} ({type(model).__name__}, {model.count_params():,} "
        f"parameters), beam {args.beam_width}, {len(verses)} Bible test verses; "
        f"export {export_seconds:.1f} s, tf.saved_model.load {load_seconds:.1f} s\n"
    )
    print(
        "| method | batch | verses | verses/s | vs translate | warm-up s | compile s "
        "| equal to translate |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    speed = {(r["method"], r["batch_size"]): r["verses_per_second"] for r in rows}
    for r in rows:
        ratio = r["verses_per_second"] / speed["translate", r["batch_size"]]
        print(
            f"| {r['method']} | {r['batch_size']} | {r['verses']} "
            f"| {r['verses_per_second']:.2f} | {ratio:.2f}x | {r['warmup_seconds']:.1f} "
            f"| {r['compile_seconds']:.1f} | {r['equal_lines']}/{r['verses']} |"
        )

    result = {
        "preset": args.preset,
        "beam_width": args.beam_width,
        "verses": len(verses),
        "keras": keras.__version__,
        "tensorflow": tf.__version__,
        "backend": keras.backend.backend(),
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpu_flags": flags,
        "load_average_before": load_before,
        "load_average_after": load_after,
        "export_seconds": round(export_seconds, 2),
        "load_seconds": round(load_seconds, 2),
        "rows": rows,
    }
    if args.profile:
        result["profile"] = profile(model, verses, args.beam_width)
    if args.bfloat16:
        if not {"avx512_bf16", "amx_bf16"} & set(flags):
            print("\n--bfloat16: skipped, the CPU has neither avx512_bf16 nor amx_bf16")
        elif 64 not in batch_sizes:
            print("\n--bfloat16: skipped, it compares with the batch-64 row")
        else:
            float32_row = next(
                r for r in rows if r["method"] == "translate" and r["batch_size"] == 64
            )
            result["bfloat16"] = bfloat16_comparison(
                args, verses, references, outputs["translate", 64], float32_row
            )
    if args.profile or args.bfloat16:
        result["load_average_end"] = load_average()
        print(f"\nload average at the end: {result['load_average_end']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
        print(f"results written to {args.json}")


if __name__ == "__main__":
    main()
