"""Where chunking starts to pay on this machine: full vs chunked, one process.

`keras_attention.layers.MultiHeadAttention` self-attention, batch 1, 8
heads of 64 (d_model 512), float32, at each `--lengths` T: the full path
(`chunk_threshold=None`) and the chunked path (`chunk_threshold=0`) with
each `--chunks` block size. Every variant is compiled first (`jax.jit` /
`tf.function(jit_compile=True)`; PyTorch runs eagerly), forward and
forward + backward (gradients of `sum(output)` w.r.t. the input and the
weights); then `--rounds` rounds time each variant once in turn, each
round starting one variant later, so a load that drifts during the run
and the place in a round weigh on all of them alike. `keras` is
`keras.layers.MultiHeadAttention` and `default` our layer as constructed
(the path its dispatch picks), timed in the same rounds. Prints the median
times and each variant's ratios to the full path at the same T (below 1:
chunking is faster) and to Keras's layer, with the machine's load before
and after.
`--modes eager,graph,compiled` times the same variants op by op (a layer
called outside `fit`), in a `tf.function` without XLA (TensorFlow) and
compiled, in one run; each ratio is to the full path of its own mode.

This is what `keras_attention.layers.dispatch.CPU_CHUNK_THRESHOLD` and
`CPU_CHUNK_SIZE` come from.

Usage:
    python benchmarks/attention_crossover.py                     # 512..4096
    python benchmarks/attention_crossover.py --lengths 1024,2048 --chunks 256,512
    KERAS_BACKEND=jax python benchmarks/attention_crossover.py
    python benchmarks/attention_crossover.py --lengths 4096 --chunks 256 --modes eager,graph,compiled
"""

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import keras  # noqa: E402
import numpy as np  # noqa: E402
from machine import describe  # noqa: E402

from keras_attention.layers import MultiHeadAttention  # noqa: E402

HEADS, KEY_DIM = 8, 64


def eager(layer, x):
    """`(forward, forward_and_backward)` of `layer(x, x)` run op by op, as a
    user calls a layer outside `fit` (TensorFlow and PyTorch eager, JAX
    without `jit`)."""
    backend = keras.config.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        x = tf.constant(x)

        def both():
            with tf.GradientTape() as tape:
                tape.watch(x)
                out = tf.reduce_sum(layer(x, x))
            return [
                g.numpy() for g in tape.gradient(out, [x, *layer.trainable_variables])
            ]

        return (lambda: layer(x, x).numpy()), both
    if backend == "jax":
        import jax

        def both():
            def loss(x):
                return layer(x, x).sum()

            return jax.block_until_ready(jax.grad(loss)(x))

        return (lambda: jax.block_until_ready(layer(x, x))), both
    return compiled(layer, x)  # PyTorch: always eager


def graph(layer, x, jit_compile=False):
    """`(forward, forward_and_backward)` in a `tf.function`, without XLA
    unless `jit_compile`."""
    import tensorflow as tf

    x = tf.constant(x)

    @tf.function(jit_compile=jit_compile)
    def forward():
        return layer(x, x)

    @tf.function(jit_compile=jit_compile)
    def both():
        with tf.GradientTape() as tape:
            tape.watch(x)
            out = tf.reduce_sum(layer(x, x))
        return tape.gradient(out, [x, *layer.trainable_variables])

    return (lambda: forward().numpy()), (lambda: [g.numpy() for g in both()])


def compiled(layer, x):
    """`(forward, forward_and_backward)` callables of `layer(x, x)`."""
    backend = keras.config.backend()
    if backend == "jax":
        import jax

        trainable = [v.value for v in layer.trainable_variables]
        fixed = [v.value for v in layer.non_trainable_variables]

        def pure(params, x):
            out, _ = layer.stateless_call(params, fixed, x, x)
            return out

        # The weights are arguments, as in `fit` and `predict`, not
        # constants folded into the program.
        forward = jax.jit(pure)
        grads = jax.jit(jax.grad(lambda p, x: pure(p, x).sum(), (0, 1)))

        def run(fn):
            return lambda: jax.block_until_ready(fn())

        return run(lambda: forward(trainable, x)), run(lambda: grads(trainable, x))
    if backend == "tensorflow":
        return graph(layer, x, jit_compile=True)
    if backend == "torch":
        import torch

        x = torch.tensor(x, requires_grad=True)

        def forward():
            with torch.no_grad():
                return layer(x, x)

        def both():
            layer.zero_grad()
            out = layer(x, x).sum()
            out.backward()

        return forward, both
    raise SystemExit(f"Unsupported backend {backend!r}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", default="512,1024,2048,3072,4096")
    parser.add_argument("--chunks", default="512")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--modes",
        default="compiled",
        help="comma-separated: compiled (jit / XLA), eager (op by op), "
        "graph (tf.function without XLA, TensorFlow only)",
    )
    args = parser.parse_args(argv)
    modes = args.modes.split(",")
    runners = {"compiled": compiled, "eager": eager, "graph": graph}
    if not set(modes) <= set(runners):
        parser.error(f"--modes takes {', '.join(runners)}; got {args.modes!r}")
    lengths = [int(t) for t in args.lengths.split(",")]
    chunks = [int(c) for c in args.chunks.split(",")]
    print(f"backend: {keras.config.backend()}; keras {keras.__version__}")
    print(describe())
    print(f"batch 1, {HEADS} heads x {KEY_DIM}, float32, {args.rounds} rounds")
    rows = []
    for length in lengths:
        x = np.random.default_rng(0).normal(size=(1, length, HEADS * KEY_DIM))
        x = x.astype("float32")
        variants = {}
        for mode in modes:
            # Ratios are to Keras's layer and to the full path of the same mode.
            variants[(mode, "keras")] = keras.layers.MultiHeadAttention, {}
            variants[(mode, "default")] = MultiHeadAttention, {}
            variants[(mode, "full")] = MultiHeadAttention, {"chunk_threshold": None}
            for chunk in chunks:
                variants[(mode, f"chunked c={chunk}")] = (
                    MultiHeadAttention,
                    {
                        "chunk_threshold": 0,
                        "chunk_size": chunk,
                    },
                )
        runs = {}
        for (mode, name), (layer_class, config) in variants.items():
            keras.utils.set_random_seed(0)
            layer = layer_class(HEADS, KEY_DIM, **config)
            layer(x[:, :8], x[:, :8])
            forward, both = runners[mode](layer, x)
            forward(), both()  # compile and warm up
            runs[(mode, name)] = (forward, both)
        times = {name: ([], []) for name in runs}
        order = list(runs.items())
        for round_index in range(args.rounds):
            # Each round starts one variant later: no variant always runs
            # first (after another T's variants) or after the same one.
            shift = round_index % len(order)
            for name, (forward, both) in order[shift:] + order[:shift]:
                for fn, out in zip((forward, both), times[name], strict=True):
                    start = time.perf_counter()
                    fn()
                    out.append(time.perf_counter() - start)
        for (mode, name), (fwd, bwd) in times.items():
            full = [statistics.median(t) for t in times[(mode, "full")]]
            upstream = [statistics.median(t) for t in times[(mode, "keras")]]
            fwd, bwd = statistics.median(fwd), statistics.median(bwd)
            rows.append(
                f"| {length} | {mode} | {name} | {fwd * 1e3:.1f} | {bwd * 1e3:.1f} | "
                f"{fwd / full[0]:.2f} | {bwd / full[1]:.2f} | "
                f"{fwd / upstream[0]:.2f} | {bwd / upstream[1]:.2f} |"
            )
        print(f"T={length} done; {describe()}", flush=True)
    print()
    print(
        "| T | mode | path | fwd ms | fwd+bwd ms | fwd / full | fwd+bwd / full "
        "| fwd / keras | fwd+bwd / keras |"
    )
    print("|---:|:---|:---|---:|---:|---:|---:|---:|---:|")
    print("\n".join(rows))
    print(describe())


if __name__ == "__main__":
    main()
