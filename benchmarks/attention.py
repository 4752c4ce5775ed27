"""Benchmarks `keras_attention.layers.MultiHeadAttention` against Keras's.

Two measurements, printed as tables:

1. Training throughput (examples/s): a tiny model, `Input -> multi-head
   self-attention -> mean`, trained with `train_on_batch` under
   `jit_compile=True` (forward + backward + optimizer step) on batch 32,
   d_model 256 (8 heads x key_dim 32), lengths 128 and 512, without a mask
   and with a padding mask (`value_mask`). After a warm-up, Keras and ours
   take turns step by step; the per-step time is the median of each one's
   timed steps; the ratio is ours / Keras (higher is better for ours).
2. Peak memory of one eager forward pass at length 4096 (batch 1, same
   layer, padding mask): each configuration runs in a fresh subprocess.
   After a small warm-up call has built the layer and loaded the kernels,
   the subprocess resets its peak-RSS counter (Linux: `echo 5 >
   /proc/self/clear_refs`), runs the call, and reports `VmHWM` (peak
   resident set) minus the `VmRSS` it had just before the call, from
   `/proc/self/status`. (`getrusage(...).ru_maxrss` is not used: on Linux it
   keeps the parent's peak across fork + exec.)
   "unfused" is our explicit path (score layer, float32 masked softmax),
   reached through `return_attention_scores=True`; "default" is the layer
   as constructed by default (`chunk_threshold="auto"`: the fused
   `keras.ops.dot_product_attention` path where the backend's kernel is
   memory-efficient, e.g. PyTorch; the chunked path at this length on a CPU
   under TensorFlow or JAX).

Usage:
    python benchmarks/attention.py            # full run, a few minutes
    python benchmarks/attention.py --quick    # length 128 only, fewer steps
    python benchmarks/attention.py --warmup 10 --steps 60   # steadier medians
    KERAS_BACKEND=jax python benchmarks/attention.py
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402
from machine import cpu_model, reset_peak, status_kib  # noqa: E402

try:
    from keras_attention.layers import MultiHeadAttention
except ImportError:  # a source checkout without `pip install -e .`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from keras_attention.layers import MultiHeadAttention

NUM_HEADS, KEY_DIM = 8, 32
D_MODEL = NUM_HEADS * KEY_DIM


def make_layer(kind):
    keras.utils.set_random_seed(0)
    if kind == "keras":
        return keras.layers.MultiHeadAttention(NUM_HEADS, KEY_DIM, name="mha")
    return MultiHeadAttention(NUM_HEADS, KEY_DIM, name="mha")


def padding_mask(batch, length, seed=0):
    """Boolean `(batch, length)`: each sequence keeps 50-100% of its tokens."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(length // 2, length + 1, size=batch)
    return np.arange(length)[None, :] < lengths[:, None]


def make_model(kind, length, masked):
    x = keras.Input((length, D_MODEL), name="x")
    inputs = [x]
    kwargs = {}
    if masked:
        mask = keras.Input((length,), dtype="bool", name="mask")
        inputs.append(mask)
        kwargs["value_mask"] = mask
    hidden = make_layer(kind)(x, x, **kwargs)
    output = keras.layers.GlobalAveragePooling1D()(hidden)
    model = keras.Model(inputs, output)
    model.compile(optimizer="sgd", loss="mse", jit_compile=True)
    return model


def throughput(batch, length, masked, warmup, steps):
    """Median seconds per training step of Keras's layer and ours.

    The two models take turns step by step, the order swapped every round,
    so that the load of other processes on the machine hits both alike.
    """
    rng = np.random.default_rng(0)
    x = rng.normal(size=(batch, length, D_MODEL)).astype("float32")
    inputs = [x, padding_mask(batch, length)] if masked else [x]
    y = np.zeros((batch, D_MODEL), "float32")
    models = {kind: make_model(kind, length, masked) for kind in ("keras", "ours")}
    for model in models.values():
        for _ in range(warmup):
            model.train_on_batch(inputs, y)
    times = {kind: [] for kind in models}
    for step in range(steps):
        order = list(models) if step % 2 == 0 else list(models)[::-1]
        for kind in order:
            start = time.perf_counter()
            models[kind].train_on_batch(inputs, y)
            times[kind].append(time.perf_counter() - start)
    return {kind: statistics.median(values) for kind, values in times.items()}


def memory_child(config):
    """Runs in a subprocess: peak RSS growth of one forward pass, in MiB."""
    length = 4096
    layer = make_layer("keras" if config == "keras" else "ours")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(1, length, D_MODEL)).astype("float32")
    mask = padding_mask(1, length)
    scores = config == "ours-unfused"

    def forward(x, mask):
        out = layer(x, x, value_mask=mask, return_attention_scores=scores)
        return keras.ops.convert_to_numpy(keras.tree.flatten(out)[0])

    forward(x[:, :64], mask[:, :64])  # builds the layer, loads kernels
    if not reset_peak():  # VmHWM back to the current VmRSS
        raise SystemExit("cannot reset the peak memory (/proc/self/clear_refs)")
    before = status_kib("VmRSS")
    start = time.perf_counter()
    forward(x, mask)
    seconds = time.perf_counter() - start
    after = status_kib("VmHWM")
    print(
        json.dumps(
            {
                "config": config,
                "baseline_mib": before / 1024,
                "peak_mib": after / 1024,
                "growth_mib": (after - before) / 1024,
                "seconds": seconds,
            }
        )
    )


def memory(config):
    result = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--memory-child", config],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="length 128 only")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--warmup", type=int, help="warm-up steps (default 3)")
    parser.add_argument("--steps", type=int, help="timed steps each (default 20)")
    parser.add_argument("--memory-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_child:
        memory_child(args.memory_child)
        return

    lengths = (128,) if args.quick else (128, 512)
    warmup, steps = (2, 6) if args.quick else (3, 20)
    warmup = args.warmup if args.warmup is not None else warmup
    steps = args.steps if args.steps is not None else steps
    print(
        f"keras {keras.__version__}, backend {keras.backend.backend()}, "
        f"{cpu_model()}, {os.cpu_count()} CPUs"
    )
    print(
        f"\nTraining step throughput, batch {args.batch}, d_model {D_MODEL} "
        f"({NUM_HEADS} heads x {KEY_DIM}), jit_compile=True, median of "
        f"{steps} alternating steps each after {warmup} warm-up steps\n"
    )
    print("| length | mask    | keras (ex/s) | ours (ex/s) | ours / keras |")
    print("|-------:|---------|-------------:|------------:|-------------:|")
    for length in lengths:
        for masked in (False, True):
            seconds = throughput(args.batch, length, masked, warmup, steps)
            keras_rate = args.batch / seconds["keras"]
            ours_rate = args.batch / seconds["ours"]
            print(
                f"| {length:6d} | {'padding' if masked else 'none':7s} | "
                f"{keras_rate:12.1f} | {ours_rate:11.1f} | "
                f"{ours_rate / keras_rate:12.2f} |",
                flush=True,
            )

    print(
        "\nPeak memory of one eager forward pass, batch 1, length 4096, "
        "padding mask\n(subprocess per row; peak RSS during the call minus RSS "
        "before it)\n"
    )
    print("| configuration | RSS before (MiB) | peak growth (MiB) | seconds |")
    print("|---------------|-----------------:|------------------:|--------:|")
    for config in ("keras", "ours-default", "ours-unfused"):
        result = memory(config)
        print(
            f"| {config:13s} | {result['baseline_mib']:16.0f} | "
            f"{result['growth_mib']:17.0f} | {result['seconds']:7.2f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
