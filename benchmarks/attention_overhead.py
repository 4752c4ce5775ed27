"""Per-call overhead of our MultiHeadAttention against Keras's, at small shapes.

At small shapes a call costs its Python and the dispatch of its ops more
than its arithmetic; this compares that cost. `keras.layers.MultiHeadAttention`
and `keras_attention.layers.MultiHeadAttention` (defaults) with Keras's
weights, self-attention `layer(x, x, **mask)`, float32, for each case of
`CASES` (batch, length, heads x head width, mask: none, `value_mask`
padding, `use_causal_mask=True`) and each mode of the backend:

- PyTorch: eager forward under `torch.no_grad()`, and eager forward +
  `loss.backward()` (the weights' and the input's gradients);
- TensorFlow: eager forward, eager `GradientTape` forward + gradients, and
  both in a `tf.function(jit_compile=True)`;
- JAX: `jax.jit` of `stateless_call`, forward and forward + `jax.grad`.

One process per backend (`KERAS_BACKEND`). Per case and mode: a warm-up
(and compilation), then `--rounds` rounds in which the two layers take
turns (who goes first alternates), each timing `n` calls, `n` chosen so
that one sample lasts about `--sample-ms`. Printed: the median time per
call of each, and the median over the rounds of the ratio ours / Keras
(the two share every round's load), with the machine and its load. In
eager modes also the Python function calls per call of each layer
(cProfile's count over 5 calls, load-independent: the Python side of the
overhead); under PyTorch the ATen operators dispatched per call too (each a
kernel launch on a GPU, where eager small shapes wait on the launches).

Each backend computes on `--threads` threads (default 1: the per-call cost
is Python and op dispatch, and one thread keeps two processes of a shared
machine from fighting over the cores; `0` keeps the libraries' defaults).

`--library DIR` imports `keras_attention` from `DIR` (another checkout, to
compare two versions under the same script), instead of this checkout.

Usage:
    python benchmarks/attention_overhead.py                    # every backend
    python benchmarks/attention_overhead.py --backends torch --rounds 31
    python benchmarks/attention_overhead.py --cases "B1 T32 8x32" --threads 0
    python benchmarks/attention_overhead.py --library /tmp/base --backends torch
"""

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from machine import describe  # noqa: E402

BACKENDS = ("tensorflow", "jax", "torch")
#: name -> (batch, length, heads, head width, mask)
CASES = {
    "B16 T128 8x32": (16, 128, 8, 32, "none"),
    "B16 T128 4x64": (16, 128, 4, 64, "none"),
    "B16 T128 8x32 padding": (16, 128, 8, 32, "padding"),
    "B16 T128 8x32 causal": (16, 128, 8, 32, "causal"),
    "B1 T32 8x32": (1, 32, 8, 32, "none"),
    "B1 T32 8x32 padding": (1, 32, 8, 32, "padding"),
    "B1 T32 8x32 causal": (1, 32, 8, 32, "causal"),
}
MODES = {
    "torch": ("eager fwd", "eager fwd+bwd"),
    "tensorflow": ("eager fwd", "eager fwd+bwd", "xla fwd", "xla fwd+bwd"),
    "jax": ("jit fwd", "jit fwd+bwd"),
}


def _inputs(batch, length, dim, mask):
    """`x` `(batch, length, dim)` and the call's mask arguments (NumPy)."""
    import numpy as np

    rng = np.random.default_rng(0)
    x = rng.normal(size=(batch, length, dim)).astype("float32")
    if mask == "causal":
        return x, {"use_causal_mask": True}
    if mask == "padding":
        kept = rng.integers(length // 2, length + 1, size=batch)
        return x, {"value_mask": np.arange(length)[None, :] < kept[:, None]}
    return x, {}


def _layers(heads, width, x):
    """Keras's layer and ours, built, ours holding Keras's weights."""
    import keras

    from keras_attention.layers import MultiHeadAttention

    keras.utils.set_random_seed(0)
    theirs = keras.layers.MultiHeadAttention(heads, width)
    ours = MultiHeadAttention(heads, width)
    for layer in (theirs, ours):
        layer(x[:, :4], x[:, :4])
    ours.set_weights(theirs.get_weights())
    return theirs, ours


def _torch_runner(layer, x, kwargs, backward):
    import torch

    x = torch.tensor(x, requires_grad=backward)
    kwargs = {
        k: torch.tensor(v) if hasattr(v, "shape") else v for k, v in kwargs.items()
    }
    if not backward:

        def forward():
            with torch.no_grad():
                return layer(x, x, **kwargs)

        return forward

    def both():
        layer.zero_grad()
        x.grad = None
        out = layer(x, x, **kwargs)
        out.sum().backward()
        return out

    return both


def _tensorflow_runner(layer, x, kwargs, backward, compiled):
    import tensorflow as tf

    x = tf.constant(x)
    kwargs = {
        k: tf.constant(v) if hasattr(v, "shape") else v for k, v in kwargs.items()
    }

    def forward():
        return layer(x, x, **kwargs)

    def both():
        with tf.GradientTape() as tape:
            tape.watch(x)
            out = tf.reduce_sum(layer(x, x, **kwargs))
        return tape.gradient(out, [x, *layer.trainable_variables])

    fn = both if backward else forward
    return tf.function(fn, jit_compile=True) if compiled else fn


def _jax_runner(layer, x, kwargs, backward):
    import jax
    import jax.numpy as jnp

    trainable = [v.value for v in layer.trainable_variables]
    fixed = [v.value for v in layer.non_trainable_variables]
    x = jnp.asarray(x)
    kwargs = {
        k: jnp.asarray(v) if hasattr(v, "shape") else v for k, v in kwargs.items()
    }

    def pure(params, x):
        out, _ = layer.stateless_call(params, fixed, x, x, **kwargs)
        return out

    if backward:
        grads = jax.jit(jax.grad(lambda p, x: pure(p, x).sum(), (0, 1)))
        return lambda: grads(trainable, x)
    forward = jax.jit(lambda p, x: pure(p, x))
    return lambda: forward(trainable, x)


def _runner(backend, mode, layer, x, kwargs):
    backward = mode.endswith("fwd+bwd")
    if backend == "torch":
        return _torch_runner(layer, x, kwargs, backward)
    if backend == "jax":
        return _jax_runner(layer, x, kwargs, backward)
    return _tensorflow_runner(layer, x, kwargs, backward, mode.startswith("xla"))


def _finish(result):
    """Waits for `result` (JAX dispatches asynchronously)."""
    import jax

    return jax.block_until_ready(result)


def _sample(fn, number, sync):
    start = time.perf_counter()
    for _ in range(number):
        out = fn()
    sync(out)
    return (time.perf_counter() - start) / number


def _python_calls(fn, number=5):
    """Python function calls per call of `fn` (cProfile's count)."""
    import cProfile
    import pstats

    profile = cProfile.Profile()
    profile.enable()
    for _ in range(number):
        fn()
    profile.disable()
    return round(pstats.Stats(profile).total_calls / number)


def _aten_ops(fn):
    """ATen operators one call of `fn` dispatches (PyTorch)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        ops = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            Count.ops += 1
            return func(*args, **(kwargs or {}))

    with Count():
        fn()
    return Count.ops


def worker(args):
    """Prints one table row per case and mode of this process's backend."""
    import keras
    import numpy as np

    import keras_attention

    backend = keras.config.backend()
    if args.threads and backend == "torch":
        import torch

        torch.set_num_threads(args.threads)
    elif args.threads and backend == "tensorflow":
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    sync = _finish if backend == "jax" else (lambda out: None)
    version = getattr(sys.modules.get(backend), "__version__", "?")
    print(
        f"{backend} {version}, keras {keras.__version__}; keras_attention from "
        f"{os.path.dirname(os.path.dirname(keras_attention.__file__))}; "
        f"{args.threads or 'default'} thread(s); {describe()}",
        flush=True,
    )
    print()
    print(
        "| backend | case | mode | Keras ms/call | ours ms/call | ours / Keras "
        "| Python calls/call (Keras, ours) | ATen ops/call (Keras, ours) "
        "| calls/sample | max abs diff |"
    )
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|", flush=True)
    cases = args.cases.split(",") if args.cases else list(CASES)
    for name in cases:
        batch, length, heads, width, mask = CASES[name]
        x, kwargs = _inputs(batch, length, heads * width, mask)
        theirs, ours = _layers(heads, width, x)
        out = [
            keras.ops.convert_to_numpy(each(x, x, **kwargs)) for each in (theirs, ours)
        ]
        diff = float(np.max(np.abs(out[0] - out[1])))
        for mode in MODES[backend]:
            runs = [_runner(backend, mode, each, x, kwargs) for each in (theirs, ours)]
            for run in runs:  # compile, warm up
                for _ in range(3):
                    sync(run())
            single = statistics.median(_sample(run, 1, sync) for run in runs * 5)
            number = max(1, round(args.sample_ms / 1e3 / single))
            times, ratios = ([], []), []
            for i in range(args.rounds):
                order = (0, 1) if i % 2 == 0 else (1, 0)
                sample = {j: _sample(runs[j], number, sync) for j in order}
                times[0].append(sample[0])
                times[1].append(sample[1])
                ratios.append(sample[1] / sample[0])
            counts, aten = "-", "-"
            if mode.startswith("eager"):
                counts = ", ".join(str(_python_calls(run)) for run in runs)
            if backend == "torch":
                aten = ", ".join(str(_aten_ops(run)) for run in runs)
            keras_ms = statistics.median(times[0]) * 1e3
            ours_ms = statistics.median(times[1]) * 1e3
            print(
                f"| {backend} | {name} | {mode} | {keras_ms:.3f} | {ours_ms:.3f} | "
                f"{statistics.median(ratios):.3f} | {counts} | {aten} | {number} "
                f"| {diff:.1e} |",
                flush=True,
            )
    print()
    print(f"{backend} done; {describe()}", flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--cases", help=f"comma-separated among {', '.join(CASES)}")
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--sample-ms", type=float, default=20.0)
    parser.add_argument("--threads", type=int, default=1, help="0: the default")
    parser.add_argument("--library", default=ROOT, help="where keras_attention is")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    unknown = [c for c in (args.cases or "").split(",") if c and c not in CASES]
    if unknown:
        parser.error(f"--cases: unknown {unknown}; choose among {list(CASES)}")
    if args.worker:
        sys.path.insert(0, args.library)
        worker(args)
        return
    print(describe(), flush=True)
    print(
        f"{args.rounds} rounds of ~{args.sample_ms:g} ms samples; float32", flush=True
    )
    for backend in args.backends.split(","):
        if importlib.util.find_spec(backend) is None:
            print(f"{backend}: not installed", flush=True)
            continue
        command = [
            sys.executable,
            os.path.abspath(__file__),
            "--worker",
            f"--rounds={args.rounds}",
            f"--sample-ms={args.sample_ms}",
            f"--threads={args.threads}",
            f"--library={os.path.abspath(args.library)}",
        ]
        if args.cases:
            command.append(f"--cases={args.cases}")
        env = {**os.environ, "KERAS_BACKEND": backend}
        if args.threads:
            env["OMP_NUM_THREADS"] = str(args.threads)
        if args.threads == 1:  # XLA's CPU client (JAX)
            flags = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
            env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} {flags}".strip()
        done = subprocess.run(command, env=env, check=False)
        if done.returncode:
            print(f"{backend}: worker failed with exit status {done.returncode}")
    print(describe(), flush=True)


if __name__ == "__main__":
    main()
