"""Time and peak memory of attention against the sequence length T.

Four methods, all self-attention on batch 1, 8 heads of 64 (d_model 512):

- `keras`: `keras.layers.MultiHeadAttention` (projections included; the
  backend picks its fused or explicit path);
- `full`: explicit attention on projected `(B, T, heads, 64)` tensors,
  `einsum -> float32 softmax -> einsum`, the `(B, heads, T, T)` score
  tensor materialised;
- `chunked`: `keras_attention.layers.chunked.chunked_attention` (exact,
  query/key chunks of 512, custom gradient), same tensors;
- `windowed`: `keras_attention.layers.windowed.windowed_attention` with
  radius 128 (restricted attention: a different, cheaper function).

For each `(method, T)` a fresh subprocess compiles the forward pass and
the forward + backward pass (`tf.function(jit_compile=True)` or `jax.jit`),
runs each once to warm up, then times `--repeats` runs (median). Peak
memory is the growth of the resident set during one more run of forward +
backward: the subprocess resets its peak counter (Linux: `echo 5 >
/proc/self/clear_refs`) and reports `VmHWM` minus the `VmRSS` it had before
the run, from `/proc/self/status`. The subprocess runs with glibc's
`MALLOC_MMAP_THRESHOLD_=131072`, so buffers over 128 KiB are unmapped when
freed and the warm process's RSS falls back between runs (compilation is
not counted). Where `clear_refs` cannot be written, the `ru_maxrss` growth
since start-up is reported instead (compilation included). On a GPU the
device's peak bytes are reported too.
`keras` and `full` are skipped (printed as "skipped: would need N GiB")
where one float32 score tensor would exceed `--budget-gib`.

The table gives times in ms, memory in MiB and the ratios to `keras`; a
log-log PNG of time and memory against T is written to `--plot`.

Usage:
    python benchmarks/attention_scaling.py              # T = 512 ... 32768
    python benchmarks/attention_scaling.py --quick      # T = 256, 512, 1024
    python benchmarks/attention_scaling.py --lengths 4096,65536 --methods chunked
    KERAS_BACKEND=jax python benchmarks/attention_scaling.py
"""

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
METHODS = ("keras", "full", "chunked", "windowed")
LENGTHS = (512, 1024, 2048, 4096, 8192, 16384, 32768)
QUICK_LENGTHS = (256, 512, 1024)
HEADS, KEY_DIM, RADIUS, CHUNK = 8, 64, 128, 512
MIB = 2**20


def _status_kib(field):
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def _reset_peak():
    """Resets VmHWM to VmRSS; False where the kernel does not allow it."""
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
        return True
    except OSError:
        return False


def _attention_fn(method, batch, length):
    """`(inputs) -> output` for one method, and the inputs."""
    import keras
    import numpy as np
    from keras import ops

    from keras_attention.layers.chunked import chunked_attention
    from keras_attention.layers.windowed import windowed_attention

    rng = np.random.default_rng(0)
    if method == "keras":
        layer = keras.layers.MultiHeadAttention(HEADS, KEY_DIM)
        x = rng.normal(size=(batch, length, HEADS * KEY_DIM)).astype("float32")
        layer(x[:, :8], x[:, :8])
        return (lambda x: layer(x, x)), [ops.convert_to_tensor(x)], layer
    shape = (batch, length, HEADS, KEY_DIM)
    tensors = [ops.convert_to_tensor(rng.normal(size=shape).astype("float32"))] * 3
    tensors = [ops.copy(t) for t in tensors]
    if method == "full":

        def attend(q, k, v):
            scores = ops.einsum("bqhd,bkhd->bhqk", q, k) / float(np.sqrt(KEY_DIM))
            weights = ops.softmax(ops.cast(scores, "float32"), axis=-1)
            return ops.einsum("bhqk,bkhd->bqhd", weights, v)

    elif method == "chunked":

        def attend(q, k, v):
            return chunked_attention(
                q, k, v, query_chunk_size=CHUNK, key_chunk_size=CHUNK
            )

    elif method == "windowed":

        def attend(q, k, v):
            return windowed_attention(q, k, v, RADIUS)

    else:
        raise ValueError(f"Unknown method {method!r}. Valid: {METHODS}")
    return attend, tensors, None


def _compiled(fn, tensors, layer):
    """Compiled forward and forward + backward (gradients of sum(output))."""
    import keras

    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        weights = [] if layer is None else layer.trainable_variables

        def step(*xs):
            with tf.GradientTape() as tape:
                tape.watch(xs)
                loss = tf.reduce_sum(fn(*xs))
            return tape.gradient(loss, [*xs, *weights])

        forward = tf.function(fn, jit_compile=True)
        backward = tf.function(step, jit_compile=True)
    elif backend == "jax":
        import jax

        if layer is not None:
            trainable = [v.value for v in layer.trainable_variables]
            others = [v.value for v in layer.non_trainable_variables]

            def pure(params, *xs):
                out, _ = layer.stateless_call(params, others, xs[0], xs[0])
                return out

            forward = jax.jit(lambda *xs: pure(trainable, *xs))
            grads = jax.grad(lambda p, *xs: pure(p, *xs).sum(), (0, 1))
            backward = jax.jit(lambda *xs: grads(trainable, *xs))
        else:
            forward = jax.jit(fn)
            argnums = tuple(range(len(tensors)))
            backward = jax.jit(jax.grad(lambda *xs: fn(*xs).sum(), argnums))
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


def worker(method, length, batch, repeats):
    """Runs one configuration; prints one JSON line."""
    start_maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    fn, tensors, layer = _attention_fn(method, batch, length)
    forward, backward = _compiled(fn, tensors, layer)
    times = {}
    for name, compiled in (("forward", forward), ("backward", backward)):
        _block(compiled(*tensors))  # compile and warm up
        runs = []
        for _ in range(repeats):
            begin = time.perf_counter()
            _block(compiled(*tensors))
            runs.append(time.perf_counter() - begin)
        times[name] = statistics.median(runs)
    # Compiled and warmed up: the peak of one more run is the working set
    # (the parent sets MALLOC_MMAP_THRESHOLD_, so freed buffers leave RSS).
    before = _status_kib("VmRSS")
    reset = _reset_peak()
    _block(backward(*tensors))
    if reset:
        peak_mib = (_status_kib("VmHWM") - before) / 1024
    else:
        peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - start_maxrss
        peak_mib = peak_kib / 1024
    device = _device_peak()
    print(
        json.dumps(
            {
                "method": method,
                "length": length,
                "forward_s": times["forward"],
                "backward_s": times["backward"],
                "peak_mib": peak_mib,
                "peak_exact": reset,
                "device_peak_mib": None if device is None else device / MIB,
            }
        )
    )


def _score_gib(batch, length):
    return batch * HEADS * length * length * 4 / 2**30


def _machine():
    model = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return f"CPU: {model} ({os.cpu_count()} logical cores); load average: {load}"


def _run(method, length, args):
    command = [
        sys.executable,
        os.path.abspath(__file__),
        "--worker",
        f"{method}:{length}",
        f"--batch={args.batch}",
        f"--repeats={args.repeats}",
    ]
    env = {
        **os.environ,
        "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
    }
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:]
        return {"method": method, "length": length, "error": " ".join(tail)}
    return json.loads(lines[-1])


def _table(results, methods, lengths):
    by_key = {(r["method"], r["length"]): r for r in results}
    header = (
        f"{'T':>6} {'method':>9} {'fwd ms':>9} {'fwd+bwd ms':>11} {'peak MiB':>9}"
        f" {'fwd/keras':>9} {'f+b/keras':>9} {'mem/keras':>9}"
    )
    print(header)
    print("-" * len(header))
    for length in lengths:
        base = by_key.get(("keras", length))
        for method in methods:
            r = by_key.get((method, length))
            if r is None:
                continue
            if "skipped" in r or "error" in r:
                print(f"{length:>6} {method:>9}   {r.get('skipped') or r['error']}")
                continue
            line = (
                f"{length:>6} {method:>9} {r['forward_s'] * 1e3:>9.1f}"
                f" {r['backward_s'] * 1e3:>11.1f} {r['peak_mib']:>9.1f}"
            )
            if base and "forward_s" in base:
                line += (
                    f" {r['forward_s'] / base['forward_s']:>9.2f}"
                    f" {r['backward_s'] / base['backward_s']:>9.2f}"
                    f" {r['peak_mib'] / max(base['peak_mib'], 1e-3):>9.3f}"
                )
            if r.get("device_peak_mib") is not None:
                line += f"  (device peak {r['device_peak_mib']:.0f} MiB)"
            print(line)


def _plot(results, methods, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (time_axis, memory_axis) = plt.subplots(1, 2, figsize=(11, 4.2))
    for index, method in enumerate(methods):
        color = f"C{index}"
        rows = sorted(
            (r for r in results if r["method"] == method and "forward_s" in r),
            key=lambda r: r["length"],
        )
        if not rows:
            continue
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
    figure.suptitle("Attention cost against T (batch 1, 8 heads x 64)")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    print(f"plot: {path}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", help="comma-separated T values")
    parser.add_argument("--quick", action="store_true", help="T = 256, 512, 1024")
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--budget-gib", type=float, default=16.0)
    parser.add_argument(
        "--plot",
        default=os.path.join(ROOT, "benchmarks", "logs", "attention_scaling.png"),
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        method, length = args.worker.split(":")
        worker(method, int(length), args.batch, args.repeats)
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
    import keras

    print(f"backend: {keras.backend.backend()}; keras {keras.__version__}")
    print(_machine())
    print(
        f"batch {args.batch}, {HEADS} heads x {KEY_DIM}, chunks {CHUNK}, "
        f"window radius {RADIUS}, {args.repeats} timed runs (median)"
    )
    results = []
    for length in lengths:
        for method in methods:
            need = _score_gib(args.batch, length)
            if method in ("keras", "full") and need > args.budget_gib:
                result = {
                    "method": method,
                    "length": length,
                    "skipped": f"skipped: would need {need:.0f} GiB",
                }
            else:
                result = _run(method, length, args)
            results.append(result)
            print(json.dumps(result), flush=True)
    print()
    _table(results, methods, lengths)
    os.makedirs(os.path.dirname(os.path.abspath(args.plot)), exist_ok=True)
    _plot(results, methods, args.plot)
    return results


if __name__ == "__main__":
    main()
