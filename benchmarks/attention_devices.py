"""Our MultiHeadAttention against Keras's on every installed backend and device.

For each installed backend among JAX and PyTorch (one subprocess each, with
`KERAS_BACKEND` set), on its default device: self-attention, 8 heads of 64
(d_model 512), batch 1 (16 at T <= 128), float32 and `mixed_bfloat16`,
forward + backward (gradients of `sum(output)` w.r.t. the weights and the
input), `keras.layers.MultiHeadAttention` against
`keras_attention.layers.MultiHeadAttention` (default `chunk_threshold=
"auto"`) given Keras's weights. JAX: one `jax.jit` program per layer;
PyTorch: eager `backward()`. Time: the median of `--repeats` runs after a
warm-up. Memory: JAX, the compiled program's temporary bytes (XLA memory
analysis); PyTorch on CUDA, the peak allocated bytes during one run; on a
CPU, the growth of the resident set during one run (Linux `VmHWM`).

Rows: T in `--lengths` without a mask, and the causal and padding (the last
10% of the keys hidden) masks at `--mask-lengths`. On a CPU, a Keras row whose
three `(B, heads, T, T)` float32 tensors would not fit in memory is skipped
as "out of memory (estimate)"; on an accelerator every row runs, and a run that fails with an
out-of-memory error is reported as such. Each row also gives the largest
difference between the two layers' outputs (the same weights, so rounding
only) and the path ours took (`dispatch` decides per device).

No TensorFlow and no keras-hub are needed: only Keras (and its `namex`,
`optree` dependencies), NumPy and the backends.

Usage:
    python benchmarks/attention_devices.py                    # the GPU table
    python benchmarks/attention_devices.py --smoke            # T <= 256, CPU
    python benchmarks/attention_devices.py --backends torch --lengths 8192
    python benchmarks/attention_devices.py --json out.json

On the GPU machine (JAX and PyTorch installed, no Keras): carry the wheels
of keras, namex and optree in `.whl/` of the working tree, then

    python3 -m pip install -q --no-index --no-deps --target .site .whl/*.whl \
      && export PYTHONPATH=$PWD/.site:$PWD \
      && python3 benchmarks/attention_devices.py --json \
         benchmarks/logs/attention_devices.json \
      | tee benchmarks/logs/attention_devices.md

(one command of under 5 minutes on one H100 with the defaults).
"""

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

HEADS, KEY_DIM = 8, 64
LENGTHS = (128, 2048, 8192, 32768, 65536)
MASK_LENGTHS = (8192, 32768)
SMOKE_LENGTHS = (128, 256)
DTYPES = ("float32", "mixed_bfloat16")
BACKENDS = ("jax", "torch")


def _batch(length):
    return 16 if length <= 128 else 1


def _rows(lengths, mask_lengths):
    rows = [(length, "none") for length in lengths]
    rows += [
        (length, mask) for length in mask_lengths for mask in ("causal", "padding")
    ]
    return rows


def _inputs(length, mask):
    import numpy as np

    batch = _batch(length)
    x = np.random.default_rng(0).normal(size=(batch, length, HEADS * KEY_DIM))
    kwargs = {}
    if mask == "causal":
        kwargs["use_causal_mask"] = True
    elif mask == "padding":
        padding = np.ones((batch, length), bool)
        padding[:, length - max(length // 10, 1) :] = False
        kwargs["value_mask"] = padding
    return x.astype("float32"), kwargs


def _device_bytes():
    """The accelerator's memory in bytes, or None on a CPU."""
    import keras

    if keras.config.backend() == "jax":
        import jax

        stats = jax.devices()[0].memory_stats() or {}
        return stats.get("bytes_limit")
    import torch

    if torch.cuda.is_available():
        return torch.cuda.get_device_properties(0).total_memory
    return None


def _available_bytes():
    from machine import available_gib

    device = _device_bytes()
    if device is not None:
        return device
    gib = available_gib()
    return None if gib is None else gib * 2**30


def _is_oom(error):
    text = f"{type(error).__name__} {error}".lower()
    return "out of memory" in text or "resource_exhausted" in text or "oom" in text


def _path(layer, x, kwargs):
    """The path ours takes on this call: fused, chunked or explicit."""
    from keras_attention.layers import dispatch

    if layer.chunk_threshold == dispatch.AUTO or layer.chunk_threshold is not None:
        mask = dispatch.mask_kind(
            causal=kwargs.get("use_causal_mask", False),
            padding="value_mask" in kwargs,
        )
        if layer._takes_chunked_path(x, x, None, None, False, False, mask):
            if layer.chunk_size == dispatch.AUTO and dispatch.triton_flash_applies(
                dispatch.backend(), dispatch.platform(), mask, x.shape[1], x.shape[1]
            ):
                return "triton flash"
            return "chunked"
    return "fused" if layer._takes_fused_path(False, False, x.shape[1]) else "explicit"


def _jax_measure(layer, x, kwargs, repeats):
    import jax
    import jax.numpy as jnp

    trainable = [v.value for v in layer.trainable_variables]
    fixed = [v.value for v in layer.non_trainable_variables]
    masks = {k: jnp.asarray(v) for k, v in kwargs.items() if k != "use_causal_mask"}
    causal = kwargs.get("use_causal_mask", False)

    def loss(params, x, masks):
        out, _ = layer.stateless_call(
            params, fixed, x, x, use_causal_mask=causal, **masks
        )
        return jnp.sum(out.astype("float32")), out

    step = jax.jit(jax.grad(loss, (0, 1), has_aux=True))
    x = jnp.asarray(x)
    compiled = step.lower(trainable, x, masks).compile()
    memory = None
    try:
        memory = compiled.memory_analysis().temp_size_in_bytes
    except Exception:  # noqa: BLE001 - not every platform reports it
        pass
    grads, out = jax.block_until_ready(compiled(trainable, x, masks))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(compiled(trainable, x, masks))
        times.append(time.perf_counter() - start)
    if memory is None:
        memory = _rss_growth(
            lambda: jax.block_until_ready(compiled(trainable, x, masks))
        )
    return statistics.median(times), memory, out


def _torch_measure(layer, x, kwargs, repeats):
    import torch

    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    x = torch.tensor(x, device=device, requires_grad=True)
    kwargs = {
        k: (torch.tensor(v, device=device) if k != "use_causal_mask" else v)
        for k, v in kwargs.items()
    }

    def run():
        layer.zero_grad()
        x.grad = None
        out = layer(x, x, **kwargs)
        out.float().sum().backward()
        if cuda:
            torch.cuda.synchronize()
        return out

    out = run()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    if cuda:
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        run()
        memory = torch.cuda.max_memory_allocated() - before
    else:
        memory = _rss_growth(run)
    return statistics.median(times), memory, out.detach()


def _rss_growth(run):
    from machine import reset_peak, status_kib

    before = status_kib("VmRSS")
    if not reset_peak():
        return None
    run()
    return (status_kib("VmHWM") - before) * 1024


def worker(args):
    """Runs every row on this process's backend; prints one JSON line per row."""
    import keras
    import numpy as np

    from keras_attention.layers import MultiHeadAttention, dispatch

    backend = keras.config.backend()
    measure = _jax_measure if backend == "jax" else _torch_measure
    device = dispatch.platform()
    budget = _available_bytes()
    host = _device_bytes() is None
    for dtype in args.dtypes.split(","):
        for length, mask in _rows(args.lengths, args.mask_lengths):
            x, kwargs = _inputs(length, mask)
            row = {
                "backend": backend,
                "device": device,
                "dtype": dtype,
                "T": length,
                "B": _batch(length),
                "mask": mask,
            }
            theirs = keras.layers.MultiHeadAttention(HEADS, KEY_DIM, dtype=dtype)
            ours = MultiHeadAttention(HEADS, KEY_DIM, dtype=dtype)
            for layer in (theirs, ours):
                layer(x[:1, :8], x[:1, :8])
            ours.set_weights(theirs.get_weights())
            row["path"] = _path(ours, x, kwargs)
            need = 3 * _batch(length) * HEADS * length * length * 4
            outputs = {}
            for name, layer in (("keras", theirs), ("ours", ours)):
                # On a CPU an explicit path that does not fit would swap or be
                # killed: skipped. An accelerator answers with an error.
                if name == "keras" and host and budget is not None and need > budget:
                    row[name] = "out of memory (estimate)"
                    continue
                try:
                    seconds, memory, out = measure(layer, x, kwargs, args.repeats)
                except Exception as error:  # noqa: BLE001 - reported in the row
                    if not _is_oom(error):
                        raise
                    row[name] = "out of memory"
                    continue
                row[name] = {
                    "ms": seconds * 1e3,
                    "mib": None if memory is None else memory / 2**20,
                }
                outputs[name] = np.asarray(
                    keras.ops.convert_to_numpy(keras.ops.cast(out, "float32"))
                )
            if len(outputs) == 2:
                row["max_abs_diff"] = float(
                    np.max(np.abs(outputs["keras"] - outputs["ours"]))
                )
                row["ratio"] = row["ours"]["ms"] / row["keras"]["ms"]
            print(json.dumps(row), flush=True)


def _cell(result):
    if not isinstance(result, dict):
        return str(result)
    memory = "" if result["mib"] is None else f", {result['mib']:.0f} MiB"
    return f"{result['ms']:.2f} ms{memory}"


def _table(rows):
    lines = [
        "| backend, device | dtype | T (B) | mask | Keras MHA | ours | ours / Keras "
        "time | our path | max abs diff |",
        "|---|---|---:|---|---:|---:|---:|---|---:|",
    ]
    for row in rows:
        ratio = f"{row['ratio']:.2f}" if "ratio" in row else "only ours runs"
        if not isinstance(row.get("ours"), dict):
            ratio = "-"
        diff = f"{row['max_abs_diff']:.1e}" if "max_abs_diff" in row else ""
        lines.append(
            f"| {row['backend']}, {row['device']} | {row['dtype']} | "
            f"{row['T']} ({row['B']}) | {row['mask']} | {_cell(row.get('keras'))} | "
            f"{_cell(row.get('ours'))} | {ratio} | {row['path']} | {diff} |"
        )
    return "\n".join(lines)


def _describe():
    from machine import describe

    lines = [describe()]
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        if out.returncode == 0 and out.stdout.strip():
            lines.append("GPU: " + out.stdout.strip())
    except (OSError, subprocess.SubprocessError):
        pass
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--dtypes", default=",".join(DTYPES))
    parser.add_argument("--lengths", help="T without a mask, comma-separated")
    parser.add_argument("--mask-lengths", help="T with causal and padding masks")
    parser.add_argument("--max-length", type=int, help="drop the rows above this T")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="T <= 256, 1 repeat")
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument("--jsonl", help="append each row to this file as it comes")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    def ints(text, default):
        if text is None:
            return default
        return tuple(int(t) for t in text.split(",") if t)

    args.lengths = ints(args.lengths, SMOKE_LENGTHS if args.smoke else LENGTHS)
    args.mask_lengths = ints(
        args.mask_lengths, SMOKE_LENGTHS[-1:] if args.smoke else MASK_LENGTHS
    )
    if args.smoke:
        args.repeats = 1
    if args.max_length:
        args.lengths = tuple(t for t in args.lengths if t <= args.max_length)
        args.mask_lengths = tuple(t for t in args.mask_lengths if t <= args.max_length)
    if args.worker:
        worker(args)
        return None
    backends = [
        b for b in args.backends.split(",") if importlib.util.find_spec(b) is not None
    ]
    header = [*_describe(), f"backends: {', '.join(backends) or 'none installed'}"]
    print("\n".join(header), flush=True)
    rows = []
    for backend in backends:
        command = [
            sys.executable,
            os.path.abspath(__file__),
            "--worker",
            f"--dtypes={args.dtypes}",
            f"--lengths={','.join(map(str, args.lengths))}",
            f"--mask-lengths={','.join(map(str, args.mask_lengths))}",
            f"--repeats={args.repeats}",
        ]
        env = {
            **os.environ,
            "KERAS_BACKEND": backend,
            "MALLOC_MMAP_THRESHOLD_": "131072",
            "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
        }
        # Rows are printed (and appended to `--jsonl`) as they come, so a
        # run cut short keeps what it measured.
        with (
            tempfile.TemporaryFile("w+") as stderr,
            subprocess.Popen(
                command, stdout=subprocess.PIPE, stderr=stderr, text=True, env=env
            ) as worker_process,
        ):
            for line in worker_process.stdout:
                if not line.startswith("{"):
                    continue
                rows.append(json.loads(line))
                print(line.strip(), flush=True)
                if args.jsonl:
                    with open(args.jsonl, "a") as sink:
                        sink.write(line)
            worker_process.wait()
            stderr.seek(0)
            errors = stderr.read()
        if worker_process.returncode != 0:
            tail = errors.strip().splitlines()[-3:]
            print(f"{backend}: failed: " + " | ".join(tail), flush=True)
    print()
    print(_table(rows))
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as out:
            json.dump({"header": header, "rows": rows}, out, indent=1)
    return rows


if __name__ == "__main__":
    main()
