"""Inference time per image of RAM vs a small convnet as the image grows.

RAM reads `num_glimpses` multi-resolution glimpses, a fixed number of pixels
whatever the image size; a convnet convolves every pixel. Both models are
called on a batch of float32 images already in memory (the input pipeline is
not timed), through a `tf.function` traced once per size, with the settings
of the first RAM preset `ram_fashion_mnist_translated` (6 glimpses, 12x12
patches, 3 scales; no longer shipped: without it the script builds the same
network untrained, and the weights do not change the cost) and the table's
small convnet (`zoo.ram.train`). After
`--warmup` calls, the time per image is the median of `--repeats` timed calls
divided by the batch size. Ratios are to the 60x60 time of the same model.

`--api` times the calls a user makes instead, on the RAM model alone:
`model.predict_on_batch` on a uint8 and on a float32 image tensor, and
`model.predict` on the uint8 NumPy array (`--api-batch` images, 64 by
default), the input pipeline included.

Usage:
    python benchmarks/ram_speed.py                       # 60, 250, 1000 px
    python benchmarks/ram_speed.py --sizes 60 500 --batch 8 --repeats 10
    python benchmarks/ram_speed.py --json experiments/ram/logs/ram_speed.json
    python benchmarks/ram_speed.py --api --sizes 60 1000 --repeats 10
"""

import argparse
import json
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from machine import cpu_model  # noqa: E402

from zoo.base.task import list_presets  # noqa: E402
from zoo.ram import RecurrentAttentionModel  # noqa: E402
from zoo.ram.train import RETINA_60, small_convnet  # noqa: E402

PRESET = "ram_fashion_mnist_translated"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[60, 250, 1000])
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--json", help="also write the results here")
    p.add_argument("--api", action="store_true", help="time the public API calls")
    p.add_argument("--api-batch", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def ram_model():
    """The shipped preset if present, else the same architecture untrained."""
    if PRESET in list_presets():
        return RecurrentAttentionModel.from_preset(PRESET), PRESET
    return RecurrentAttentionModel(num_glimpses=6, seed=0, **RETINA_60), "untrained"


def time_per_image(fn, images, warmup, repeats):
    for _ in range(warmup):
        fn(images)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn(images)
        np.asarray(tf.nest.flatten(out)[0])  # wait for the result
        times.append(time.perf_counter() - start)
    return statistics.median(times) / int(images.shape[0])


def api_calls(ram, images):
    """The public calls timed by `--api`, on uint8 NumPy `images`."""
    as_uint8 = tf.constant(images)
    as_float = tf.constant(images.astype("float32") / 255.0)
    return {
        "predict_on_batch uint8 tensor": lambda: ram.predict_on_batch(as_uint8),
        "predict_on_batch float32 tensor": lambda: ram.predict_on_batch(as_float),
        "predict uint8 NumPy": lambda: ram.predict(
            images, batch_size=len(images), verbose=0
        ),
    }


def time_call(fn, warmup, repeats):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        np.asarray(tf.nest.flatten(fn())[0])
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main_api(args, ram, ram_source):
    """Seconds per call of each public API call at each size, and ratios."""
    rng = np.random.default_rng(args.seed)
    results = {}
    for size in args.sizes:
        images = rng.integers(0, 256, (args.api_batch, size, size, 1), dtype="uint8")
        for name, fn in api_calls(ram, images).items():
            seconds = time_call(fn, args.warmup, args.repeats)
            results.setdefault(name, {})[size] = seconds
            print(
                f"{name:32s} {size:5d}x{size:<5d} {seconds * 1e3:9.1f} ms", flush=True
            )
    base = args.sizes[0]
    header = "| call | " + " | ".join(f"{s}x{s}" for s in args.sizes) + " |"
    lines = [header, "|---|" + "---:|" * len(args.sizes)]
    for name, row in results.items():
        cells = [f"{row[s] * 1e3:.1f} ms ({row[s] / row[base]:.2f}x)" for s in row]
        lines.append(f"| `{name}` | " + " | ".join(cells) + " |")
    print()
    print("\n".join(lines))
    print(
        f"\n{args.api_batch} images per call, median of {args.repeats} calls after "
        f"{args.warmup} warm-up calls; RAM weights: {ram_source}; {cpu_model()}, "
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}, "
        f"TensorFlow {tf.__version__}"
    )
    return results


def main(argv=None):
    args = parse_args(argv)
    tf.random.set_seed(args.seed)
    ram, ram_source = ram_model()
    if args.api:
        results = main_api(args, ram, ram_source)
        if args.json:
            with open(args.json, "w", encoding="utf-8") as f:
                json.dump({"args": vars(args), "seconds_per_call": results}, f)
        return results
    convnet = small_convnet()
    spec = tf.TensorSpec((None, None, None, 1), tf.float32)
    models = {
        "RAM": tf.function(
            lambda x: ram(x, training=False)["logits"], input_signature=[spec]
        ),
        "convnet": tf.function(
            lambda x: convnet(x, training=False), input_signature=[spec]
        ),
    }
    rng = np.random.default_rng(args.seed)
    results = {name: {} for name in models}
    for size in args.sizes:
        images = tf.constant(
            rng.uniform(size=(args.batch, size, size, 1)).astype("float32")
        )
        for name, fn in models.items():
            seconds = time_per_image(fn, images, args.warmup, args.repeats)
            results[name][size] = seconds
            print(
                f"{name:8s} {size:5d}x{size:<5d} {seconds * 1e3:9.3f} ms/image",
                flush=True,
            )
    base = args.sizes[0]
    header = "| model | " + " | ".join(f"{s}x{s}" for s in args.sizes) + " |"
    lines = [header, "|---|" + "---:|" * len(args.sizes)]
    for name, row in results.items():
        cells = [
            f"{row[s] * 1e3:.3f} ms ({row[s] / row[base]:.2f}x)" for s in args.sizes
        ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    print()
    print("\n".join(lines))
    print(
        f"\nbatch {args.batch}, median of {args.repeats} calls after {args.warmup} "
        f"warm-up calls; RAM weights: {ram_source}; {cpu_model()}, "
        f"{os.cpu_count()} cores, TensorFlow {tf.__version__}"
    )
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(
                {
                    "args": vars(args),
                    "ram_weights": ram_source,
                    "seconds_per_image": results,
                    "ratio_to_first_size": {
                        name: {s: row[s] / row[base] for s in row}
                        for name, row in results.items()
                    },
                },
                f,
                indent=2,
            )
    return results


if __name__ == "__main__":
    main()
