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

3. With `--gqa`: grouped-query attention (8 query / 2 key-value heads,
   head_dim 32, causal, batch 1) at lengths 1,024-4,096 (`--lengths`):
   Keras's `GroupQueryAttention` beside ours plain and with each score
   hook (ALiBi, T5 relative bias, soft-cap 50). Time: a forward pass of a
   `jit_compile=True` model (`predict_on_batch`), each configuration in a
   process of its own (one model of the length lives at a time), the
   processes alternating per round, the median of the rounds; peak
   memory: RSS growth of one eager forward pass, a subprocess per row (as
   in 2). A call whose estimated peak (`gqa_peak_gib`, from the scores'
   size) exceeds `--budget-gib` (an eager one: or the memory available
   then) is skipped with a note; the children are the OOM killer's first
   pick. The ratio is ours / Keras's (lower is
   better for ours); where Keras's call does not fit, ours is timed alone.

Usage:
    python benchmarks/attention.py            # full run, a few minutes
    python benchmarks/attention.py --quick    # length 128 only, fewer steps
    python benchmarks/attention.py --warmup 10 --steps 60   # steadier medians
    KERAS_BACKEND=jax python benchmarks/attention.py
    python benchmarks/attention.py --gqa --lengths 1024 2048 4096
    python benchmarks/attention.py --gqa --lengths 8192 16384 --budget-gib 12
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
from machine import (  # noqa: E402
    available_gib,
    cpu_model,
    describe,
    load_average,
    reset_peak,
    status_kib,
)

try:
    from keras_attention import layers
except ImportError:  # a source checkout without `pip install -e .`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from keras_attention import layers
from keras_attention.layers import dispatch  # noqa: E402

MultiHeadAttention = layers.MultiHeadAttention

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


# Grouped-query attention and the score hooks (`--gqa`).
QUERY_HEADS, KV_HEADS, HEAD_DIM = 8, 2, 32
HOOKS = {
    "ours": lambda: None,
    "ours-alibi": layers.ALiBi,
    "ours-relative": lambda: layers.RelativePositionBias(),
    "ours-softcap": lambda: layers.SoftCap(50.0),
}
GQA_CONFIGS = ("keras", *HOOKS)
#: Float32 copies of the `(heads, T, T)` scores a full (unchunked) call
#: holds at its peak, for `gqa_peak_gib`.
SCORE_COPIES = 4.2


def make_gqa(config):
    keras.utils.set_random_seed(0)
    sizes = dict(
        head_dim=HEAD_DIM, num_query_heads=QUERY_HEADS, num_key_value_heads=KV_HEADS
    )
    if config == "keras":
        return keras.layers.GroupQueryAttention(**sizes, name="gqa")
    return layers.GroupedQueryAttention(**sizes, score_mod=HOOKS[config](), name="gqa")


def gqa_model(config, length):
    x = keras.Input((length, D_MODEL), batch_size=1, name="x")
    model = keras.Model(x, make_gqa(config)(x, x, use_causal_mask=True))
    model.compile(jit_compile=True)
    return model


def gqa_peak_gib(config, length, eager):
    """An estimate of a call's peak memory in GiB, from its scores' size.

    Keras's layer and our explicit path hold about `SCORE_COPIES` float32
    copies of the `(heads, T, T)` scores (at 4,096 eager: 2,149 MiB
    measured, 512 MiB per copy); our chunked path (above the threshold of
    `dispatch`) a `(heads, T, block)` slice of them.
    """
    rows = length
    if config != "keras" and length > dispatch.auto_threshold(
        keras.backend.backend(),
        "cpu",
        eager and keras.backend.backend() == "tensorflow",
    ):
        rows = dispatch.EAGER_CPU_CHUNK_SIZE if eager else dispatch.CPU_CHUNK_SIZE
    return SCORE_COPIES * QUERY_HEADS * length * rows * 4 / 2**30


def gqa_time_child(config, length, warmup, steps):
    """Runs in a subprocess: median seconds of a compiled forward pass."""
    x = np.random.default_rng(0).normal(size=(1, length, D_MODEL)).astype("float32")
    model = gqa_model(config, length)
    for _ in range(warmup):
        model.predict_on_batch(x)
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        model.predict_on_batch(x)
        times.append(time.perf_counter() - start)
    peak = status_kib("VmHWM") / 2**20
    print(json.dumps({"seconds": statistics.median(times), "peak_gib": peak}))


def gqa_times(length, warmup, steps, rounds, configs=GQA_CONFIGS):
    """Median seconds of a compiled forward pass, per configuration.

    Each configuration is timed in a process of its own (so one model of
    this length lives at a time), `steps` calls after `warmup`; the
    processes alternate per round (round 0: the configurations in order,
    round 1: reversed, ...), and a configuration's time is the median of
    its rounds. None where the process failed (out of memory).
    """
    times = {config: [] for config in configs}
    for step in range(rounds):
        order = list(configs) if step % 2 == 0 else list(configs)[::-1]
        for config in order:
            result = _child(
                "--gqa-time-child",
                config,
                length,
                "--warmup",
                str(warmup),
                "--steps",
                str(steps),
            )
            times[config].append(None if result is None else result["seconds"])
            print(f"{length} {config} round {step}: {result}", flush=True)
    return {
        config: None if None in values else statistics.median(values)
        for config, values in times.items()
    }


def gqa_memory_child(config, length):
    """Runs in a subprocess: peak RSS growth of one eager forward pass."""
    layer = make_gqa(config)
    x = np.random.default_rng(0).normal(size=(1, length, D_MODEL)).astype("float32")

    def forward(x):
        out = layer(x, x, use_causal_mask=True)
        return keras.ops.convert_to_numpy(out)

    forward(x[:, :64])
    if not reset_peak():
        raise SystemExit("cannot reset the peak memory (/proc/self/clear_refs)")
    before = status_kib("VmRSS")
    forward(x)
    print(json.dumps({"growth_mib": (status_kib("VmHWM") - before) / 1024}))


def _first_to_kill():
    """In a child: the kernel's OOM killer picks it, not the parent."""
    with open("/proc/self/oom_score_adj", "w") as f:
        f.write("1000")


def _child(flag, config, length, *args):
    """This script with `flag config --lengths length *args` in a subprocess
    that the OOM killer picks first; its last JSON line, or None where it
    failed."""
    result = subprocess.run(
        [sys.executable, os.path.abspath(__file__), flag, config]
        + ["--lengths", str(length), *args],
        capture_output=True,
        text=True,
        preexec_fn=_first_to_kill,
    )
    if result.returncode != 0:
        return None
    return json.loads(result.stdout.strip().splitlines()[-1])


def gqa_memory(config, length):
    """`gqa_memory_child` in a subprocess; None where it ran out of memory."""
    result = _child("--gqa-memory-child", config, length)
    return None if result is None else result["growth_mib"]


def _cell(value, text):
    """`text` formatted, or a dash for a missing value."""
    return text.format(value) if value is not None else "-"


def gqa_main(lengths, warmup, steps, rounds, budget_gib, configs=GQA_CONFIGS):
    print(
        f"\nGrouped-query attention ({QUERY_HEADS} query / {KV_HEADS} key-value "
        f"heads x {HEAD_DIM}), causal, batch 1; time: jit_compile=True forward, "
        f"each configuration in its own process ({warmup} warm-up calls, "
        f"median of {steps} timed), processes alternating over {rounds} rounds, "
        "median of the rounds; memory: peak RSS growth of one eager forward "
        f"(a process per row); calls estimated over {budget_gib:g} GiB (eagerly: "
        "or over the memory available) skipped; "
        "a ratio only where Keras's call fits (the ratio is the claim; "
        "where it does not, ours is timed alone)\n"
    )
    print(
        "| length | configuration | seconds | / keras | peak growth (MiB) | / keras |"
    )
    print(
        "|-------:|---------------|--------:|--------:|------------------:|--------:|"
    )
    for length in lengths:
        # One process per measurement, after an estimate of its peak: a
        # call that cannot fit (Keras's at 16,384: ~34 GiB of scores) is
        # not run, and one that runs out of memory anyway ends only itself.
        growth, fits, notes = {}, [], []
        for config in configs:
            eager_gib = gqa_peak_gib(config, length, eager=True)
            if eager_gib > min(budget_gib, available_gib() or budget_gib):
                growth[config] = None
                notes.append(
                    f"{length} {config} eager: needs ~{eager_gib:.1f} GiB > budget "
                    f"({budget_gib:g} GiB, {available_gib() or 0:.1f} GiB available)"
                )
            else:
                growth[config] = gqa_memory(config, length)
                # As measured: a run cut short keeps it.
                print(f"{length} {config} eager peak growth: {growth[config]} MiB")
            compiled_gib = gqa_peak_gib(config, length, eager=False)
            if compiled_gib > budget_gib:
                notes.append(
                    f"{length} {config} compiled: needs ~{compiled_gib:.1f} GiB "
                    f"> budget ({budget_gib:g} GiB)"
                )
            else:
                fits.append(config)
        seconds = gqa_times(length, warmup, steps, rounds, fits) if fits else {}
        keras_seconds, keras_growth = seconds.get("keras"), growth.get("keras")
        for config in configs:
            took, grown = seconds.get(config), growth[config]
            print(
                f"| {length:6d} | {config:13s} | "
                + f"{_cell(took, '{:.3f}'):>7s} | "
                + f"{_cell(took and keras_seconds and took / keras_seconds, '{:.2f}'):>7s} | "
                + f"{_cell(grown, '{:.0f}'):>17s} | "
                + f"{_cell(grown and keras_growth and grown / keras_growth, '{:.2f}'):>7s} |",
                flush=True,
            )
        for note in notes:
            print(note)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="length 128 only")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--warmup", type=int, help="warm-up steps (default 3)")
    parser.add_argument("--steps", type=int, help="timed steps each (default 20)")
    parser.add_argument("--memory-child", help=argparse.SUPPRESS)
    parser.add_argument("--gqa", action="store_true", help="only the GQA rows")
    parser.add_argument("--lengths", type=int, nargs="+", default=[1024, 2048, 4096])
    parser.add_argument("--rounds", type=int, default=2, help="GQA: rounds")
    parser.add_argument(
        "--budget-gib",
        type=float,
        default=12.0,
        help="GQA: skip a call whose estimated peak is larger (default 12)",
    )
    parser.add_argument(
        "--configs",
        nargs="+",
        choices=GQA_CONFIGS,
        default=list(GQA_CONFIGS),
        help="GQA: the configurations (default all)",
    )
    parser.add_argument("--gqa-memory-child", help=argparse.SUPPRESS)
    parser.add_argument("--gqa-time-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_child:
        memory_child(args.memory_child)
        return
    if args.gqa_memory_child:
        gqa_memory_child(args.gqa_memory_child, args.lengths[0])
        return
    if args.gqa_time_child:
        gqa_time_child(args.gqa_time_child, args.lengths[0], args.warmup, args.steps)
        return
    if args.gqa:
        print(
            f"keras {keras.__version__}, backend {keras.backend.backend()}, "
            f"{describe()}"
        )
        args.warmup = 2 if args.warmup is None else args.warmup
        args.steps = args.steps or 3
        gqa_main(
            args.lengths,
            args.warmup,
            args.steps,
            args.rounds,
            args.budget_gib,
            args.configs,
        )
        print(f"\nload average at the end: {load_average()}")
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
