"""Each shipped preset's held-out metric in float32 and after int8 (#51 item 3).

For every preset of `--presets` (default: all shipped, from the family
registry) the script scores the preset with its kind's `evaluate_split`
(as `python -m zoo evaluate`: BLEU greedy and at the card's beam for a
translator, BLEU-4 for a captioner, the error for a glimpse classifier) on
the first `--limit` test examples, then quantizes the same model with
`Task.quantize("int8")` (Keras's own API) and scores it again on the same
examples; it prints both, the change and the seconds of each evaluation.
`--limit` also caps RAM's 10,000 test images only if given per kind
(`--ram-limit`).

    python benchmarks/int8_metrics.py --limit 128 --ram-limit 10000 \\
        --log experiments/benchmarks/logs/int8_metrics_s31.log
"""

import argparse
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ["KERAS_BACKEND"] = "tensorflow"

from machine import describe, printer  # noqa: E402


def scores(metrics):
    """`{name: value}` of the headline metrics of an `evaluate_split` result."""
    if not isinstance(metrics, dict):
        return {"error %": float(metrics)}
    found = {}
    for decoding, values in sorted(metrics.items()):
        for key in ("bleu", "bleu4"):
            if isinstance(values, dict) and key in values:
                found[f"{decoding} {key.upper()}"] = float(values[key])
    return found


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--presets", help="comma-separated (default: every shipped)")
    p.add_argument("--limit", type=int, default=128, help="test verses / scenes")
    p.add_argument("--ram-limit", type=int, help="RAM's test images (all)")
    p.add_argument("--log")
    args = p.parse_args(argv)
    say = printer(args.log)

    import warnings

    from zoo import registry
    from zoo.base.task import Task

    warnings.simplefilter("ignore")  # truncation notes of long verses
    names = args.presets.split(",") if args.presets else sorted(registry.presets())
    say(f"{describe()}; {' '.join(['python', *sys.argv])}\n")
    say("| preset | examples | metric | float32 | int8 | change | s float / int8 |")
    say("|---|---:|---|---:|---:|---:|---|")
    for name in names:
        model = Task.from_preset(name)
        limit = args.ram_limit if name.startswith("ram_") else args.limit
        results, seconds = [], []
        for quantized in (False, True):
            if quantized:
                model.quantize("int8")
            start = time.perf_counter()
            results.append(scores(model.evaluate_split("test", limit=limit)))
            seconds.append(time.perf_counter() - start)
        for metric, value in results[0].items():
            after = results[1][metric]
            say(
                f"| {name} | {limit or 'all'} | {metric} | {value:.2f} | {after:.2f} "
                f"| {after - value:+.2f} | {seconds[0]:.0f} / {seconds[1]:.0f} |"
            )
    say(f"\n{describe()}")


if __name__ == "__main__":
    sys.exit(main())
