"""Time and peak memory of attention against the sequence length T.

Five self-attention layers of the same size, batch 1, 8 heads of 64
(d_model 512), projections included:

- `keras`: `keras.layers.MultiHeadAttention` (the backend picks its fused
  or explicit path; on CPU both hold the `(B, heads, T, T)` scores);
- `default`: `keras_attention.layers.MultiHeadAttention` as constructed by
  default: the path its dispatch picks for this backend, device and T;
- `full`: `keras_attention.layers.MultiHeadAttention(chunk_threshold=None)`,
  the full path, `(B, heads, T, T)` scores materialised;
- `chunked`: the same layer with `chunk_threshold=0, chunk_size=--chunk`
  (default 512): exact attention by `chunked_attention` (online softmax,
  custom gradient), linear memory;
- `windowed`: the same layer with `window=--window` (default 128):
  restricted self-attention by `windowed_attention`, each query sees the
  keys within `window` positions, `O(window * T)` time and memory (a
  different, cheaper function, not the same values).

For each `(method, T)` a fresh subprocess compiles the forward pass and
the forward + backward pass (gradients of `sum(output)` w.r.t. the input
and the weights; `tf.function(jit_compile=True)` or `jax.jit`), runs each
once to warm up, then times `--repeats` runs (median). Peak memory is
measured in a second fresh subprocess: the growth of the resident set
during one run of forward + backward after a warm-up one; it resets its
peak counter (Linux: `echo 5 > /proc/self/clear_refs`) and reports
`VmHWM` minus the `VmRSS` it had before the run, from `/proc/self/status`.
Only that process runs with glibc's `MALLOC_MMAP_THRESHOLD_=131072`, so
buffers over 128 KiB are unmapped when freed and its RSS falls back
between runs (compilation is not counted); the timed one keeps the default
allocator, as a user's program does (mapping every large buffer afresh
cost about a third more time at T = 1,024 on a 2-core AMD EPYC). Where `clear_refs` cannot be written, the `ru_maxrss` growth
since start-up is reported instead (compilation included). On a GPU the
device's peak bytes are reported too.

`keras` and `full` are skipped, with the reason printed, where their
forward + backward would not fit: about three float32 `(B, heads, T, T)`
tensors (scores, weights and their gradient) against `--budget-gib`
(default: 80% of the machine's available memory, from `/proc/meminfo`).
`chunked` and `windowed` run at every T.

Output: a markdown table (times in ms, memory in MiB, ratios to `keras`
at the same T) and the growth of each method's time and memory from
T = 4096 to the largest T run, on stdout; the same rows as JSON in
`--json`; a log-log PNG of time and memory against T in `--plot`.

Targets (issue #17; benchmark results, not timed tests):

- chunked peak memory at T = 4096 <= 10% of Keras's, and T = 32768
  forward and backward run on a 24 GiB machine;
- chunked throughput at T = 512 within 10% of the fused path, and at
  T >= 4096 at least Keras's;
- windowed cost linear in T: time ratio T = 32768 / T = 4096 <= 10
  (against 64 for full attention);
- `benchmarks/attention.py` still >= 1.0 against Keras on its rows.

Usage:
    python benchmarks/attention_scaling.py              # T = 512 ... 32768
    python benchmarks/attention_scaling.py --quick      # T = 256, 512, 1024
    python benchmarks/attention_scaling.py --window 64 --methods chunked,windowed
    python benchmarks/attention_scaling.py --lengths 4096,65536 --methods chunked
    KERAS_BACKEND=jax python benchmarks/attention_scaling.py
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

from machine import available_gib, describe, reset_peak, status_kib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
METHODS = ("keras", "default", "full", "chunked", "windowed")
LENGTHS = (512, 1024, 2048, 4096, 8192, 16384, 32768)
QUICK_LENGTHS = (256, 512, 1024)
HEADS, KEY_DIM, WINDOW, CHUNK = 8, 64, 128, 512
MIB = 2**20


def _layer(method, window, chunk=CHUNK):
    """The attention layer of one method."""
    import keras

    from keras_attention.layers import MultiHeadAttention

    if method == "keras":
        return keras.layers.MultiHeadAttention(HEADS, KEY_DIM)
    if method == "default":  # what the layer's dispatch picks on this device
        return MultiHeadAttention(HEADS, KEY_DIM)
    if method == "full":
        return MultiHeadAttention(HEADS, KEY_DIM, chunk_threshold=None)
    if method == "chunked":
        return MultiHeadAttention(HEADS, KEY_DIM, chunk_threshold=0, chunk_size=chunk)
    if method == "windowed":
        return MultiHeadAttention(HEADS, KEY_DIM, window=window)
    raise ValueError(f"Unknown method {method!r}. Valid: {METHODS}")


def _compiled(layer, x):
    """Compiled forward and forward + backward (gradients of sum(output))."""
    import keras

    layer(x[:, :8], x[:, :8])  # builds the weights
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        def step(x):
            with tf.GradientTape() as tape:
                tape.watch(x)
                loss = tf.reduce_sum(layer(x, x))
            return tape.gradient(loss, [x, *layer.trainable_variables])

        forward = tf.function(lambda x: layer(x, x), jit_compile=True)
        backward = tf.function(step, jit_compile=True)
    elif backend == "jax":
        import jax

        trainable = [v.value for v in layer.trainable_variables]
        others = [v.value for v in layer.non_trainable_variables]

        def pure(params, x):
            out, _ = layer.stateless_call(params, others, x, x)
            return out

        # The weights are arguments, as in `fit` and `predict`, not
        # constants folded into the program.
        forward_weights = jax.jit(pure)
        grads = jax.jit(jax.grad(lambda p, x: pure(p, x).sum(), (0, 1)))

        def forward(x):
            return forward_weights(trainable, x)

        def backward(x):
            return grads(trainable, x)
    else:
        raise SystemExit(f"Unsupported backend {backend!r}")
    return forward, backward


def _block(result):
    import keras

    for leaf in keras.tree.flatten(result):
        keras.ops.convert_to_numpy(leaf[..., :1])


def _device_peak():
    """Peak bytes of the first GPU, or None on CPU."""
    import keras

    try:
        if keras.backend.backend() == "jax":
            import jax

            device = jax.devices()[0]
            if device.platform == "cpu":
                return None
            return device.memory_stats().get("peak_bytes_in_use")
        import tensorflow as tf

        if not tf.config.list_physical_devices("GPU"):
            return None
        return tf.config.experimental.get_memory_info("GPU:0")["peak"]
    except Exception:  # noqa: BLE001 - a measurement we can do without
        return None


def worker(method, length, batch, repeats, window, chunk=CHUNK, memory=False):
    """Runs one configuration; prints one JSON line.

    Times it (`memory=False`) or measures its peak memory (`memory=True`,
    in a process started with `MEMORY_ENV`).
    """
    import numpy as np
    from keras import ops

    start_maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    rng = np.random.default_rng(0)
    x = rng.normal(size=(batch, length, HEADS * KEY_DIM)).astype("float32")
    x = ops.convert_to_tensor(x)
    forward, backward = _compiled(_layer(method, window, chunk), x)
    if not memory:
        times = {}
        for name, compiled in (("forward", forward), ("backward", backward)):
            _block(compiled(x))  # compile and warm up
            runs = []
            for _ in range(repeats):
                begin = time.perf_counter()
                _block(compiled(x))
                runs.append(time.perf_counter() - begin)
            times[name] = statistics.median(runs)
        print(
            json.dumps({"forward_s": times["forward"], "backward_s": times["backward"]})
        )
        return
    _block(backward(x))  # compile and warm up
    # Compiled and warmed up: the peak of one more run is the working set
    # (`MEMORY_ENV`: freed buffers leave the resident set).
    before = status_kib("VmRSS")
    reset = reset_peak()
    _block(backward(x))
    if reset:
        peak_mib = (status_kib("VmHWM") - before) / 1024
    else:
        peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - start_maxrss
        peak_mib = peak_kib / 1024
    device = _device_peak()
    print(
        json.dumps(
            {
                "method": method,
                "length": length,
                "window": window if method == "windowed" else None,
                "chunk": chunk if method == "chunked" else None,
                "peak_mib": peak_mib,
                "peak_exact": reset,
                "device_peak_mib": None if device is None else device / MIB,
            }
        )
    )


def _full_need_gib(batch, length):
    """Memory of a full forward + backward: ~3 float32 (B, heads, T, T)."""
    return 3 * batch * HEADS * length * length * 4 / 2**30


#: The memory process's environment: glibc unmaps each freed buffer over
#: 128 KiB, so the resident set falls back between runs.
MEMORY_ENV = {"MALLOC_MMAP_THRESHOLD_": "131072"}


def _run(method, length, args):
    """Times `(method, length)` in one subprocess, its memory in another."""
    command = [
        sys.executable,
        os.path.abspath(__file__),
        "--worker",
        f"{method}:{length}",
        f"--batch={args.batch}",
        f"--repeats={args.repeats}",
        f"--window={args.window}",
        f"--chunk={args.chunk}",
    ]
    env = {
        **os.environ,
        "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
    }
    result = {}
    for extra, extra_env in (([], {}), (["--memory"], MEMORY_ENV)):
        done = subprocess.run(
            command + extra, capture_output=True, text=True, env={**env, **extra_env}
        )
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        if done.returncode != 0 or not lines:
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:]
            return {"method": method, "length": length, "error": " ".join(tail)}
        result.update(json.loads(lines[-1]))
    return result


def _table(results, methods, lengths):
    """The results as a markdown table (ratios to `keras` at the same T)."""
    by_key = {(r["method"], r["length"]): r for r in results}
    lines = [
        "| T | method | fwd ms | fwd+bwd ms | peak MiB | fwd / keras "
        "| fwd+bwd / keras | mem / keras |",
        "|---:|:---|---:|---:|---:|---:|---:|---:|",
    ]
    for length in lengths:
        base = by_key.get(("keras", length))
        for method in methods:
            r = by_key.get((method, length))
            if r is None:
                continue
            name = method
            if r.get("window"):
                name = f"{method} (r={r['window']})"
            elif r.get("chunk") and r["chunk"] != CHUNK:
                name = f"{method} (c={r['chunk']})"
            if "forward_s" not in r:
                reason = r.get("skipped") or r.get("error")
                lines.append(f"| {length} | {name} | {reason} | | | | | |")
                continue
            cells = [
                f"{r['forward_s'] * 1e3:.1f}",
                f"{r['backward_s'] * 1e3:.1f}",
                f"{r['peak_mib']:.1f}",
            ]
            if r.get("device_peak_mib") is not None:
                cells[-1] += f" (device {r['device_peak_mib']:.0f})"
            if base and "forward_s" in base:
                cells += [
                    f"{r['forward_s'] / base['forward_s']:.2f}",
                    f"{r['backward_s'] / base['backward_s']:.2f}",
                    f"{r['peak_mib'] / max(base['peak_mib'], 1e-3):.3f}",
                ]
            else:
                cells += ["", "", ""]
            lines.append(f"| {length} | {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _growth(results, methods, start=4096):
    """Each method's time and memory at its largest T over those at `start`."""
    lines = []
    for method in methods:
        rows = {
            r["length"]: r
            for r in results
            if r["method"] == method and "forward_s" in r
        }
        if start not in rows or max(rows) <= start:
            continue
        top = max(rows)
        first, last = rows[start], rows[top]
        lines.append(
            f"- {method}: T = {top} / T = {start} ({top // start}x longer): "
            f"fwd+bwd time x{last['backward_s'] / first['backward_s']:.1f}, "
            f"peak memory x{last['peak_mib'] / max(first['peak_mib'], 1e-3):.1f}"
        )
    return "\n".join(lines)


def _plot(results, methods, path):
    from keras_attention.plotting import pyplot

    plt = pyplot()
    figure, (time_axis, memory_axis) = plt.subplots(1, 2, figsize=(11, 4.2))
    for index, method in enumerate(methods):
        color = f"C{index}"
        rows = sorted(
            (r for r in results if r["method"] == method and "forward_s" in r),
            key=lambda r: r["length"],
        )
        if not rows:
            continue
        if rows[0].get("window"):
            method = f"{method} (r={rows[0]['window']})"
        lengths = [r["length"] for r in rows]
        time_axis.plot(
            lengths,
            [r["forward_s"] for r in rows],
            "o--",
            color=color,
            label=f"{method} fwd",
        )
        time_axis.plot(
            lengths,
            [r["backward_s"] for r in rows],
            "o-",
            color=color,
            label=f"{method} fwd+bwd",
        )
        memory_axis.plot(
            lengths,
            [max(r["peak_mib"], 1e-2) for r in rows],
            "o-",
            color=color,
            label=method,
        )
    for axis, label in (
        (time_axis, "time (s)"),
        (memory_axis, "peak RSS growth (MiB)"),
    ):
        axis.set_xscale("log", base=2)
        axis.set_yscale("log")
        axis.set_xlabel("sequence length T")
        axis.set_ylabel(label)
        axis.grid(True, which="both", alpha=0.3)
        axis.legend(fontsize=7)
    figure.suptitle(f"Self-attention cost against T ({HEADS} heads x {KEY_DIM})")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    print(f"plot: {path}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", help="comma-separated T values")
    parser.add_argument("--quick", action="store_true", help="T = 256, 512, 1024")
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--window", type=int, default=WINDOW, help="windowed radius")
    parser.add_argument(
        "--chunk", type=int, default=CHUNK, help="chunked: query and key chunk size"
    )
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--budget-gib",
        type=float,
        help="memory for keras/full (default: 80%% of MemAvailable)",
    )
    logs = os.path.join(ROOT, "experiments", "benchmarks", "logs")
    parser.add_argument("--plot", default=os.path.join(logs, "attention_scaling.png"))
    parser.add_argument("--json", default=os.path.join(logs, "attention_scaling.json"))
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--memory", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.window < 1:
        parser.error(f"--window must be a positive int. Received: {args.window}")
    if args.chunk < 1:
        parser.error(f"--chunk must be a positive int. Received: {args.chunk}")
    if args.worker:
        method, length = args.worker.split(":")
        worker(
            method,
            int(length),
            args.batch,
            args.repeats,
            args.window,
            args.chunk,
            memory=args.memory,
        )
        return None
    if args.lengths:
        lengths = tuple(int(x) for x in args.lengths.split(","))
    else:
        lengths = QUICK_LENGTHS if args.quick else LENGTHS
    if args.quick:
        args.repeats = min(args.repeats, 2)
    methods = [m for m in args.methods.split(",") if m]
    for method in methods:
        if method not in METHODS:
            parser.error(f"unknown method {method!r}; valid: {', '.join(METHODS)}")
    budget = args.budget_gib
    if budget is None:
        available = available_gib()
        budget = 16.0 if available is None else 0.8 * available
    import keras

    header = [
        f"backend: {keras.backend.backend()}; keras {keras.__version__}",
        describe(),
        f"batch {args.batch}, {HEADS} heads x {KEY_DIM}, chunks {args.chunk}, "
        f"window radius {args.window}, {args.repeats} timed runs (median), "
        f"memory budget for keras/full {budget:.1f} GiB",
    ]
    print("\n".join(header))
    results = []
    for length in lengths:
        for method in methods:
            need = _full_need_gib(args.batch, length)
            if method in ("keras", "full") and need > budget:
                result = {
                    "method": method,
                    "length": length,
                    "skipped": f"skipped: needs ~{need:.1f} GiB "
                    f"(3 x (B, heads, T, T) float32) > budget {budget:.1f} GiB",
                }
            else:
                result = _run(method, length, args)
            results.append(result)
            print(json.dumps(result), flush=True)
    table = _table(results, methods, lengths)
    growth = _growth(results, methods)
    print()
    print(table)
    if growth:
        print()
        print(growth)
    for path in (args.plot, args.json):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(args.json, "w") as out:
        json.dump(
            {
                "header": header,
                "command": " ".join([os.path.basename(sys.argv[0]), *sys.argv[1:]]),
                "window": args.window,
                "chunk": args.chunk,
                "budget_gib": budget,
                "results": results,
            },
            out,
            indent=1,
        )
    print(f"json: {args.json}")
    _plot(results, methods, args.plot)
    return results


if __name__ == "__main__":
    main()
