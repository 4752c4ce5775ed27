"""Our MultiHeadAttention against Keras's on every installed backend and device.

For each installed backend among JAX and PyTorch (one subprocess each, with
`KERAS_BACKEND` set), on its default device: self-attention, 8 heads of 64
(d_model 512), batch 1 (16 at T <= 128), float32 and `mixed_bfloat16`,
forward + backward (gradients of `sum(output)` w.r.t. the weights and the
input), `keras.layers.MultiHeadAttention` against
`keras_attention.layers.MultiHeadAttention` (default `chunk_threshold=
"auto"`) given Keras's weights. JAX: one `jax.jit` program per layer;
PyTorch: eager `backward()`. Time: the median of `--repeats` runs after a
warm-up, Keras's layer and ours timed in the same rounds (each round starting
with the other one). Memory: JAX, the compiled program's temporary bytes (XLA memory
analysis); PyTorch on CUDA, the peak allocated bytes during one run; on a
CPU, the growth of the resident set during one run (Linux `VmHWM`).

Rows: T in `--lengths` without a mask, and the `--masks` at `--mask-lengths`:
`causal`, `padding` (the last 10% of the keys hidden, `value_mask`) and
`shared-padding` (the same mask for queries and keys, one tensor, as Keras
passes an `Embedding(mask_zero=True)` mask into `mha(x, x)`: ours gets it as
`query_mask` and `value_mask`, Keras's layer as the query's Keras mask and
`value_mask`; the difference is taken on the kept rows, where Keras's fused
path averages the values on a row with nothing to attend to). `--layers`
adds two other layers beside their Keras equivalents, on the same rows:
`attention`, `keras_attention.layers.Attention(score="dot")` against
`keras.layers.Attention()` (the same unscaled dot product), one head of 64,
called as Keras's list call `layer([x, x], mask=[...])`; `image`,
`ImageSelfAttention` (score `"dot"`, `gamma` 1) on a `(1, side, side, 128)`
map for each of `--image-sides` against the same block built from Keras
layers (1x1 `Conv2D`s, `keras.layers.Attention` over the flattened
positions: key width 16, values 64), given our weights; `gqa`,
`GroupedQueryAttention` (8 query / 2 key-value heads of 64) against
`keras.layers.GroupQueryAttention`, and `gqa-alibi`, `gqa-relative`,
`gqa-softcap`, ours with that score hook (their difference column is the
hook's effect, not rounding). On a CPU, a Keras row whose
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
    python benchmarks/attention_devices.py --layers attention,image \
        --masks shared-padding --image-sides 90,128

`--interpret` checks the script's JAX rows on a CPU: a stubbed GPU, JAX's
Triton kernel in Pallas's interpreter (tiny lengths, with
`--chunk-threshold` below them; the times mean nothing).

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
import math
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
IMAGE_CHANNELS = 128
LENGTHS = (128, 2048, 8192, 32768, 65536)
MASK_LENGTHS = (8192, 32768)
MASKS = ("causal", "padding", "shared-padding")
DEFAULT_MASKS = ("causal", "padding")
# Grouped-query attention (8 query / 2 key-value heads of 64) beside Keras's
# `GroupQueryAttention`, plain and with each score hook (whose outputs then
# differ from Keras's by the hook: read their difference column as such).
GQA_HOOKS = {
    "gqa": None,
    "gqa-alibi": ("ALiBi", {}),
    "gqa-relative": ("RelativePositionBias", {}),
    "gqa-softcap": ("SoftCap", {"cap": 50.0}),
}
KV_HEADS = 2
LAYERS = ("mha", "attention", "image", *GQA_HOOKS)
IMAGE_SIDES = (90, 96, 128)
SMOKE_LENGTHS = (128, 256)
DTYPES = ("float32", "mixed_bfloat16")
BACKENDS = ("jax", "torch")


def _batch(length):
    return 16 if length <= 128 else 1


def _rows(lengths, mask_lengths, masks=DEFAULT_MASKS, layers=("mha",), sides=()):
    """`(layer, T, mask)` of every row; an image row's T is `side**2`."""
    rows = []
    for layer in layers:
        if layer == "image":
            rows += [(layer, side * side, "none") for side in sides]
            continue
        rows += [(layer, length, "none") for length in lengths]
        rows += [(layer, length, mask) for length in mask_lengths for mask in masks]
    return rows


def _inputs(layer, length, mask):
    """The input `x` of a row and its padding mask (None without one)."""
    import numpy as np

    rng = np.random.default_rng(0)
    if layer == "image":
        side = math.isqrt(length)
        x = rng.normal(size=(1, side, side, IMAGE_CHANNELS))
        return x.astype("float32"), None
    batch = _batch(length)
    width = HEADS * KEY_DIM if layer == "mha" or layer in GQA_HOOKS else KEY_DIM
    x = rng.normal(size=(batch, length, width)).astype("float32")
    if mask not in ("padding", "shared-padding"):
        return x, None
    padding = np.ones((batch, length), bool)
    padding[:, length - max(length // 10, 1) :] = False
    return x, padding


def _arguments(layer, name, mask, x, padding):
    """`(args, kwargs)` of one call of `name` ("keras" or "ours") on a row.

    Built from the tensors the call gets (under `jax.jit`, its tracers), so
    a shared mask is one object wherever it goes.
    """
    causal = mask == "causal"
    if layer == "image":
        return (x,), {}
    if layer == "attention":
        kwargs = {"use_causal_mask": causal}
        if mask == "padding":
            kwargs["mask"] = [None, padding]
        elif mask == "shared-padding":
            kwargs["mask"] = [padding, padding]
        return ([x, x],), kwargs
    kwargs = {"use_causal_mask": causal}
    if mask in ("padding", "shared-padding"):
        kwargs["value_mask"] = padding
    if mask == "shared-padding":
        if name == "keras":
            # Keras's layer reads the query mask from the query only.
            from keras.src.backend import set_keras_mask

            set_keras_mask(x, padding)
        else:
            kwargs["query_mask"] = padding
    return (x, x), kwargs


def _pair(layer, dtype, chunk_threshold):
    """Keras's layer and ours, built and holding the same weights."""
    import keras
    import numpy as np

    from keras_attention.layers import (
        Attention,
        ImageSelfAttention,
        MultiHeadAttention,
    )

    if layer == "mha":
        theirs = keras.layers.MultiHeadAttention(HEADS, KEY_DIM, dtype=dtype)
        ours = MultiHeadAttention(
            HEADS, KEY_DIM, dtype=dtype, chunk_threshold=chunk_threshold
        )
        small = (np.zeros((1, 8, HEADS * KEY_DIM), "float32"),) * 2
    elif layer in GQA_HOOKS:
        from keras_attention import layers

        sizes = dict(
            head_dim=KEY_DIM, num_query_heads=HEADS, num_key_value_heads=KV_HEADS
        )
        theirs = keras.layers.GroupQueryAttention(**sizes, dtype=dtype)
        hook = GQA_HOOKS[layer]
        ours = layers.GroupedQueryAttention(
            **sizes,
            dtype=dtype,
            chunk_threshold=chunk_threshold,
            score_mod=None if hook is None else getattr(layers, hook[0])(**hook[1]),
        )
        small = (np.zeros((1, 8, HEADS * KEY_DIM), "float32"),) * 2
    elif layer == "attention":
        theirs = keras.layers.Attention(dtype=dtype)
        ours = Attention(score="dot", dtype=dtype, chunk_threshold=chunk_threshold)
        small = ([np.zeros((1, 8, KEY_DIM), "float32")] * 2,)
    else:
        theirs = _keras_image_attention(dtype)
        ours = ImageSelfAttention(
            dtype=dtype, gamma_initializer="ones", chunk_threshold=chunk_threshold
        )
        small = (np.zeros((1, 4, 4, IMAGE_CHANNELS), "float32"),)
    for each in (theirs, ours):
        each(*small)
    if layer == "image":
        theirs.set_weights(ours.get_weights())
    else:
        ours.set_weights(theirs.get_weights())
    return theirs, ours


def _keras_image_attention(dtype):
    """SAGAN's block from Keras's own layers, weights in our layer's order:
    1x1 convolutions, `keras.layers.Attention` (unscaled dot product) over
    the flattened positions, a 1x1 output convolution, `x + gamma * out`."""
    import keras
    from keras import ops

    class KerasImageAttention(keras.layers.Layer):
        def build(self, input_shape):
            channels = input_shape[-1]
            widths = {
                "query": channels // 8,
                "key": channels // 8,
                "value": channels // 2,
                "output": channels,
            }
            self.convs = {}
            for name, width in widths.items():
                conv = keras.layers.Conv2D(width, 1, dtype=self.dtype_policy, name=name)
                source = input_shape
                if name == "output":
                    source = (*input_shape[:3], widths["value"])
                conv.build(source)
                self.convs[name] = conv
            self.attention = keras.layers.Attention(dtype=self.dtype_policy)
            self.gamma = self.add_weight(name="gamma", shape=(), initializer="ones")

        def call(self, x):
            shape = ops.shape(x)

            def flat(name):
                y = self.convs[name](x)
                return ops.reshape(y, (shape[0], shape[1] * shape[2], y.shape[-1]))

            query, key, value = flat("query"), flat("key"), flat("value")
            context = self.attention([query, value, key])
            context = ops.reshape(context, (shape[0], shape[1], shape[2], -1))
            output = self.convs["output"](context)
            return x + ops.cast(self.gamma, self.compute_dtype) * output

    return KerasImageAttention(dtype=dtype)


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


class _PathSpy:
    """Which path our layer takes, seen while its call runs (or is traced):
    the Triton kernel, the chunked loop, the fused kernel, else explicit."""

    def __enter__(self):
        import keras

        from keras_attention.layers import (
            attention,
            dispatch,
            image_attention,
            multi_head_paths,
        )

        self.seen = set()
        self.saved = []
        targets = [
            (dispatch, "triton_flash_attention", "triton flash"),
            (keras.ops, "dot_product_attention", "fused"),
        ]
        targets += [
            (module, "chunked_attention", "chunked")
            for module in (multi_head_paths, attention, image_attention)
        ]
        for module, name, path in targets:
            function = getattr(module, name)
            self.saved.append((module, name, function))
            setattr(module, name, self._spy(function, path))
        return self

    def _spy(self, function, path):
        def spy(*args, **kwargs):
            self.seen.add(path)
            return function(*args, **kwargs)

        return spy

    def __exit__(self, *error):
        for module, name, function in self.saved:
            setattr(module, name, function)

    @property
    def path(self):
        for path in ("triton flash", "chunked", "fused"):
            if path in self.seen:
                return path
        return "explicit"


def _jax_prepare(layer, x, padding, arguments, spy=None):
    """Compiles one forward + backward of `layer` under `jax.jit`.

    Returns `(run, memory, out)`: `run()` runs it once and waits for it,
    `memory()` is the compiled program's temporary bytes (or the resident
    set's growth where XLA does not report them), `out` the layer's output.
    """
    import contextlib

    import jax
    import jax.numpy as jnp

    trainable = [v.value for v in layer.trainable_variables]
    fixed = [v.value for v in layer.non_trainable_variables]

    def loss(params, x, padding):
        args, kwargs = arguments(x, padding)
        out, _ = layer.stateless_call(params, fixed, *args, **kwargs)
        return jnp.sum(out.astype("float32")), out

    step = jax.jit(jax.grad(loss, (0, 1), has_aux=True))
    x = jnp.asarray(x)
    padding = None if padding is None else jnp.asarray(padding)
    with spy or contextlib.nullcontext():
        compiled = step.lower(trainable, x, padding).compile()

    def run():
        return jax.block_until_ready(compiled(trainable, x, padding))

    def memory():
        try:
            return compiled.memory_analysis().temp_size_in_bytes
        except Exception:  # noqa: BLE001 - not every platform reports it
            return _rss_growth(run)

    _, out = run()
    return run, memory, out


def _torch_prepare(layer, x, padding, arguments, spy=None):
    """Eager forward + `backward()` of `layer`: `(run, memory, out)` as in
    `_jax_prepare`; memory is the CUDA peak allocated during one run, or on a
    CPU the resident set's growth."""
    import contextlib

    import torch

    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    x = torch.tensor(x, device=device, requires_grad=True)
    padding = None if padding is None else torch.tensor(padding, device=device)

    def run():
        layer.zero_grad()
        x.grad = None
        args, kwargs = arguments(x, padding)
        out = layer(*args, **kwargs)
        out.float().sum().backward()
        if cuda:
            torch.cuda.synchronize()
        return out

    def memory():
        if not cuda:
            return _rss_growth(run)
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        run()
        return torch.cuda.max_memory_allocated() - before

    with spy or contextlib.nullcontext():
        out = run()
    return run, memory, out.detach()


def _interleaved_medians(runs, repeats):
    """Median seconds of each of `runs` (name -> function), timed in the
    same `repeats` rounds, each round starting one run later than the last,
    so that a drift of the clock or the load falls on every run alike."""
    names = list(runs)
    times = {name: [] for name in names}
    for round_ in range(repeats):
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            start = time.perf_counter()
            runs[name]()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(each) for name, each in times.items()}


def _rss_growth(run):
    """Bytes the resident set grows by during `run()`, or None where it
    cannot be read: Linux only, and only in a process that glibc maps every
    large buffer afresh for (`MALLOC_MMAP_THRESHOLD_` set, as the memory
    pass of `main` does), else freed buffers are reused unseen. Timing runs
    in a process without it: with it, each large buffer costs a fresh
    mapping and page faults (session 27 measured 35% on a CPU)."""
    from machine import reset_peak, status_kib

    if not os.environ.get("MALLOC_MMAP_THRESHOLD_"):
        return None
    before = status_kib("VmRSS")
    if not reset_peak():
        return None
    run()
    return (status_kib("VmHWM") - before) * 1024


def worker(args):
    """Runs every row on this process's backend; prints one JSON line per row.

    Both layers of a row are compiled (or warmed up) first, then timed in
    the same interleaved rounds, then their memory is measured.
    """
    import functools

    import keras
    import numpy as np

    from keras_attention.layers import dispatch

    backend = keras.config.backend()
    if args.interpret:
        # A CPU check of the rows: a stubbed GPU, the Triton kernel interpreted.
        dispatch.platform = lambda tensor=None: "gpu"
        dispatch.TRITON_INTERPRET = True
    prepare = _jax_prepare if backend == "jax" else _torch_prepare
    device = dispatch.platform()
    budget = _available_bytes()
    host = _device_bytes() is None
    rows = _rows(
        args.lengths, args.mask_lengths, args.masks, args.layers, args.image_sides
    )
    for dtype in args.dtypes.split(","):
        for layer, length, mask in rows:
            x, padding = _inputs(layer, length, mask)
            row = {
                "layer": layer,
                "backend": backend,
                "device": device,
                "dtype": dtype,
                "T": length,
                "B": x.shape[0],
                "mask": mask,
            }
            theirs, ours = _pair(layer, dtype, args.chunk_threshold)
            heads = HEADS if layer == "mha" or layer in GQA_HOOKS else 1
            need = 3 * x.shape[0] * heads * length * length * 4
            prepared, outputs = {}, {}
            spy = _PathSpy()
            for name, each in (("keras", theirs), ("ours", ours)):
                # On a CPU an explicit path that does not fit would swap or be
                # killed: skipped. An accelerator answers with an error.
                if name == "keras" and host and budget is not None and need > budget:
                    row[name] = "out of memory (estimate)"
                    continue
                arguments = functools.partial(_arguments, layer, name, mask)
                try:
                    prepared[name] = prepare(
                        each, x, padding, arguments, spy if name == "ours" else None
                    )
                except Exception as error:  # noqa: BLE001 - reported in the row
                    if not _is_oom(error):
                        raise
                    row[name] = "out of memory"
                    continue
                outputs[name] = np.asarray(
                    keras.ops.convert_to_numpy(
                        keras.ops.cast(prepared[name][2], "float32")
                    )
                )
            medians = {}
            if not args.memory_only:
                medians = _interleaved_medians(
                    {name: each[0] for name, each in prepared.items()}, args.repeats
                )
            for name, (_, memory, _) in prepared.items():
                bytes_ = memory()
                row[name] = {
                    "ms": medians[name] * 1e3 if medians else None,
                    "mib": None if bytes_ is None else bytes_ / 2**20,
                }
            row["path"] = spy.path if "ours" in outputs else "-"
            if len(outputs) == 2:
                difference = np.abs(outputs["keras"] - outputs["ours"])
                if mask == "shared-padding":
                    difference = difference[padding]  # the kept rows
                row["max_abs_diff"] = float(np.max(difference))
                if medians:
                    row["ratio"] = row["ours"]["ms"] / row["keras"]["ms"]
            print(json.dumps(row), flush=True)


def _cell(result):
    if not isinstance(result, dict):
        return str(result)
    memory = "" if result["mib"] is None else f", {result['mib']:.0f} MiB"
    return f"{result['ms']:.2f} ms{memory}"


def _table(rows):
    lines = [
        "| layer | backend, device | dtype | T (B) | mask | Keras | ours | "
        "ours / Keras time | our path | max abs diff |",
        "|---|---|---|---:|---|---:|---:|---:|---|---:|",
    ]
    for row in rows:
        ratio = f"{row['ratio']:.2f}" if "ratio" in row else "only ours runs"
        if not isinstance(row.get("ours"), dict):
            ratio = "-"
        diff = f"{row['max_abs_diff']:.1e}" if "max_abs_diff" in row else ""
        lines.append(
            f"| {row.get('layer', 'mha')} | {row['backend']}, {row['device']} | "
            f"{row['dtype']} | "
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


def _key(row):
    return row["layer"], row["dtype"], row["T"], row["mask"]


def _needs_resident_memory(row):
    return (
        any(
            isinstance(row.get(name), dict) and row[name]["mib"] is None
            for name in ("keras", "ours")
        )
        and row["device"] == "cpu"
    )


def _worker(backend, command, env, on_row):
    """Runs one worker process, calling `on_row(row, line)` for each row it
    prints; says so when it fails."""
    with (
        tempfile.TemporaryFile("w+") as stderr,
        subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=stderr, text=True, env=env
        ) as worker_process,
    ):
        for line in worker_process.stdout:
            if line.startswith("{"):
                on_row(json.loads(line), line.strip())
        worker_process.wait()
        stderr.seek(0)
        errors = stderr.read()
    if worker_process.returncode != 0:
        tail = errors.strip().splitlines()[-3:]
        print(f"{backend}: failed: " + " | ".join(tail), flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--dtypes", default=",".join(DTYPES))
    parser.add_argument("--lengths", help="T without a mask, comma-separated")
    parser.add_argument("--mask-lengths", help="T with the --masks")
    parser.add_argument(
        "--masks",
        default=",".join(DEFAULT_MASKS),
        help=f"masks of the --mask-lengths rows, among {', '.join(MASKS)}",
    )
    parser.add_argument(
        "--layers",
        default="mha",
        help=f"layers beside Keras's, among {', '.join(LAYERS)}",
    )
    parser.add_argument(
        "--image-sides",
        default=",".join(map(str, IMAGE_SIDES)),
        help="sides of the square feature maps of the image rows",
    )
    parser.add_argument(
        "--chunk-threshold",
        default="auto",
        help="our layers' chunk_threshold (default auto)",
    )
    parser.add_argument(
        "--interpret",
        action="store_true",
        help="CPU check: a stubbed GPU, the Triton kernel interpreted",
    )
    parser.add_argument("--max-length", type=int, help="drop the rows above this T")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="T <= 256, 1 repeat")
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument("--jsonl", help="append each row to this file as it comes")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--memory-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    def ints(text, default):
        if text is None:
            return default
        return tuple(int(t) for t in text.split(",") if t)

    args.lengths = ints(args.lengths, SMOKE_LENGTHS if args.smoke else LENGTHS)
    args.mask_lengths = ints(
        args.mask_lengths, SMOKE_LENGTHS[-1:] if args.smoke else MASK_LENGTHS
    )
    args.masks = tuple(m for m in args.masks.split(",") if m)
    args.layers = tuple(m for m in args.layers.split(",") if m)
    for name, values, allowed in (
        ("masks", args.masks, MASKS),
        ("layers", args.layers, LAYERS),
    ):
        unknown = [v for v in values if v not in allowed]
        if unknown:
            parser.error(f"--{name}: unknown {unknown}; choose among {allowed}")
    args.image_sides = ints(args.image_sides, IMAGE_SIDES)
    if args.chunk_threshold != "auto":
        args.chunk_threshold = int(args.chunk_threshold)
    if args.smoke:
        args.repeats = 1
    if args.max_length:
        args.lengths = tuple(t for t in args.lengths if t <= args.max_length)
        args.mask_lengths = tuple(t for t in args.mask_lengths if t <= args.max_length)
        args.image_sides = tuple(
            t for t in args.image_sides if t * t <= args.max_length
        )
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
            f"--masks={','.join(args.masks)}",
            f"--layers={','.join(args.layers)}",
            f"--image-sides={','.join(map(str, args.image_sides))}",
            f"--chunk-threshold={args.chunk_threshold}",
            f"--repeats={args.repeats}",
        ]
        if args.interpret:
            command.append("--interpret")
        env = {
            **os.environ,
            "KERAS_BACKEND": backend,
            "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
        }
        env.pop("MALLOC_MMAP_THRESHOLD_", None)
        timed = []

        def timed_row(row, line, timed=timed):
            # Printed (and appended to `--jsonl`) as it comes, so a run cut
            # short keeps what it measured.
            timed.append(row)
            print(line, flush=True)
            if args.jsonl:
                with open(args.jsonl, "a") as sink:
                    sink.write(line + "\n")

        _worker(backend, command, env, timed_row)
        rows += timed
        if any(_needs_resident_memory(row) for row in timed):
            # A CPU's memory: the resident set's growth, read in a second
            # process where glibc maps each large buffer afresh.
            env["MALLOC_MMAP_THRESHOLD_"] = "131072"
            by_key = {_key(row): row for row in timed}

            def memory_row(row, line, by_key=by_key):
                for name in ("keras", "ours"):
                    kept = by_key.get(_key(row), {}).get(name)
                    if isinstance(kept, dict) and isinstance(row.get(name), dict):
                        kept["mib"] = row[name]["mib"]

            _worker(backend, [*command, "--memory-only"], env, memory_row)
    print()
    print(_table(rows))
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as out:
            json.dump({"header": header, "rows": rows}, out, indent=1)
    return rows


if __name__ == "__main__":
    main()
