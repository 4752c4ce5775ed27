"""Cost of scoring in float32 under `mixed_float16` (the range fix of #14.17).

Under a float16 compute dtype `keras_attention.scores` multiplies query and
key in float32 (`scores.precision.dot_scores`), so that the scores stay
finite for any finite float16 input; before, the product ran in float16 and
overflowed to NaN at about 100x unit scale. This script times the two on
one attention step, forward and backward:

    scores = score(q, k)             # "float16": q / sqrt(d) @ k^T in float16
                                     # "float32": scores.ScaledDot()(q, k)
    weights = masked_softmax(scores) # float32, as in `Attention`
    context = weights (as float16) @ v

with `q, k, v` float16 of shape `(batch, T, d)` and the loss `sum(context *
g)`, gradients with respect to `q, k, v`. The step is a `tf.function` (or
`jax.jit`), traced once per path. After a warm-up the two paths take turns
(the order swapped every round); each row gives the median step time of
each and the ratio float32 / float16 (above 1: the fix costs time). It also
prints the CPU model and the load average before and after, because the
numbers depend on what else the machine runs.

Usage:
    python benchmarks/score_precision.py                  # T 128 and 512
    python benchmarks/score_precision.py --lengths 128 --steps 5
    KERAS_BACKEND=jax python benchmarks/score_precision.py
"""

import argparse
import math
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402
from keras import ops  # noqa: E402

try:
    from keras_attention import scores
except ImportError:  # a source checkout without `pip install -e .`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from keras_attention import scores
from machine import cpu_model, load_average  # noqa: E402

from keras_attention.layers.masking import masked_softmax  # noqa: E402


def float16_scores(query, key):
    """The previous `ScaledDot`: the scaled query times the key, in float16."""
    scale = 1.0 / math.sqrt(key.shape[-1])
    query = ops.multiply(query, ops.cast(scale, query.dtype))
    return ops.matmul(query, ops.swapaxes(key, -1, -2))


def attention_step(score):
    """`loss = sum(context * g)` of one attention step with `score`."""

    def loss(query, key, value, g):
        weights = masked_softmax(score(query, key))
        context = ops.matmul(ops.cast(weights, value.dtype), value)
        return ops.sum(ops.cast(context, "float32") * g)

    return loss


def compile_step(loss):
    """A compiled function `(q, k, v, g) -> (loss, dq, dk, dv)`."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        @tf.function
        def step(query, key, value, g):
            with tf.GradientTape() as tape:
                tape.watch([query, key, value])
                total = loss(query, key, value, g)
            return total, *tape.gradient(total, [query, key, value])

        return step
    if backend == "jax":
        import jax

        grad = jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2)))
        return lambda *args: grad(*args)
    raise SystemExit(f"no benchmark for the {backend} backend")


def block(outputs):
    """Waits for every output (JAX dispatches asynchronously)."""
    for x in outputs if isinstance(outputs, (list, tuple)) else [outputs]:
        if isinstance(x, (list, tuple)):
            block(x)
        else:
            ops.convert_to_numpy(x)


def time_pair(steps, inputs, warmup, rounds):
    """Median seconds per step of each compiled step, taking turns."""
    for step in steps.values():
        for _ in range(warmup):
            block(step(*inputs))
    times = {name: [] for name in steps}
    names = list(steps)
    for i in range(rounds):
        for name in names if i % 2 == 0 else names[::-1]:
            start = time.perf_counter()
            block(steps[name](*inputs))
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--lengths", type=int, nargs="+", default=[128, 512])
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()

    keras.config.set_dtype_policy("mixed_float16")
    print(
        f"keras {keras.__version__}, backend {keras.backend.backend()}, "
        f"{cpu_model()}, {os.cpu_count()} CPUs"
    )
    print(f"load average before (1, 5, 15 min): {load_average()}")
    print(
        f"mixed_float16, batch {args.batch}, d {args.dim}, forward + backward, "
        f"median of {args.steps} steps each after {args.warmup} warm-up steps"
    )
    steps = {
        "float16": compile_step(attention_step(float16_scores)),
        "float32": compile_step(attention_step(scores.ScaledDot())),
    }
    print(f"{'T':>5} {'float16 ms':>11} {'float32 ms':>11} {'float32/float16':>16}")
    rng = np.random.default_rng(0)
    for length in args.lengths:
        shape = (args.batch, length, args.dim)
        inputs = [
            ops.convert_to_tensor(rng.normal(size=shape).astype("float16"))
            for _ in range(3)
        ]
        g = rng.normal(size=shape).astype("float32")
        inputs.append(ops.convert_to_tensor(g))
        median = time_pair(steps, inputs, args.warmup, args.steps)
        ratio = median["float32"] / median["float16"]
        print(
            f"{length:>5} {1e3 * median['float16']:>11.1f} "
            f"{1e3 * median['float32']:>11.1f} {ratio:>16.2f}"
        )
    print(f"load average after (1, 5, 15 min): {load_average()}")


if __name__ == "__main__":
    main()
