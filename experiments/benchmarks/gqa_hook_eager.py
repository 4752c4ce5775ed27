"""Eager TensorFlow: a score hook on the explicit path against chunks.

Peak RSS growth and time of one eager forward pass of Keras's
`GroupQueryAttention` and of ours with a hook (8 query / 2 key-value heads x
32, causal, batch 1), each configuration in its own process:

- `keras`: `keras.layers.GroupQueryAttention`;
- `<hook>:explicit`: ours with `chunk_threshold=None`, the path
  `chunk_threshold="auto"` took below 3,072 keys before a hook made eager
  calls chunk (the hook's `(heads, T, T)` bias beside the scores);
- `<hook>:chunked`: ours with `chunk_threshold=1023`, the path `"auto"`
  takes now (`dispatch.auto_threshold(..., hooked=True)`, 512-blocks);
- `<hook>`: ours as constructed (`"auto"`).

`<hook>` is `alibi`, `softcap` (50) or `plain` (no hook). Time is the
median of 3 calls after the measured one; the rounds alternate the order.

Usage (a source checkout):
    PYTHONPATH=. python experiments/benchmarks/gqa_hook_eager.py \
        --lengths 1024 2048 --configs keras alibi:explicit alibi:chunked
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))


def child(config, length):
    """In a subprocess: prints the growth (MiB) and median seconds as JSON."""
    import keras
    import numpy as np
    from machine import reset_peak, status_kib

    from keras_attention import layers

    keras.utils.set_random_seed(0)
    sizes = dict(head_dim=32, num_query_heads=8, num_key_value_heads=2)
    if config == "keras":
        layer = keras.layers.GroupQueryAttention(**sizes)
    else:
        hook, _, mode = config.partition(":")
        thresholds = {"chunked": 1023, "explicit": None}
        extra = {"chunk_threshold": thresholds[mode]} if mode else {}
        hooks = {"alibi": layers.ALiBi, "softcap": lambda: layers.SoftCap(50.0)}
        score_mod = hooks[hook]() if hook in hooks else None
        layer = layers.GroupedQueryAttention(**sizes, score_mod=score_mod, **extra)
    x = np.random.default_rng(0).normal(size=(1, length, 256)).astype("float32")

    def forward(x):
        return keras.ops.convert_to_numpy(layer(x, x, use_causal_mask=True))

    forward(x[:, :64])  # builds the layer, loads the kernels
    if not reset_peak():
        raise SystemExit("cannot reset the peak memory (/proc/self/clear_refs)")
    before = status_kib("VmRSS")
    forward(x)
    growth = (status_kib("VmHWM") - before) / 1024
    times = []
    for _ in range(3):
        start = time.perf_counter()
        forward(x)
        times.append(time.perf_counter() - start)
    print(json.dumps({"growth": growth, "seconds": statistics.median(times)}))


def measure(config, length):
    result = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--child", config]
        + ["--lengths", str(length)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[1024, 2048])
    parser.add_argument(
        "--configs", nargs="+", default=["keras", "alibi:explicit", "alibi:chunked"]
    )
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.lengths[0])
        return
    print(
        "| length | configuration | seconds | / keras | peak growth (MiB) | / keras |"
    )
    print(
        "|-------:|---------------|--------:|--------:|------------------:|--------:|"
    )
    for length in args.lengths:
        runs = {config: [] for config in args.configs}
        for step in range(args.rounds):
            order = args.configs if step % 2 == 0 else args.configs[::-1]
            for config in order:
                runs[config].append(measure(config, length))

        medians = {
            config: {
                key: statistics.median(run[key] for run in runs[config])
                for key in ("seconds", "growth")
            }
            for config in args.configs
        }
        keras_run = medians["keras"]
        for config in args.configs:
            seconds, growth = medians[config]["seconds"], medians[config]["growth"]
            print(
                f"| {length} | {config} | {seconds:.3f} | "
                f"{seconds / keras_run['seconds']:.2f} | {growth:.0f} | "
                f"{growth / keras_run['growth']:.2f} |",
                flush=True,
            )
    print("load average at the end: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
