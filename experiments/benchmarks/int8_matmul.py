"""int8 x int8 -> int32 matmul against float32 on this CPU (issue #51 item 3).

`eager`: TensorFlow's `tf.linalg.matmul` (what Keras's int8 `Dense` runs on
TensorFlow, outside XLA) and Keras's int8 `Dense` against the float one;
`xla`: the same product compiled by XLA (TensorFlow `jit_compile=True`, and
JAX on XLA:CPU). Best of 5 rounds of 20 calls, the shapes of the
Transformer preset's projections, its feed-forward and its output layer.

    python experiments/benchmarks/int8_matmul.py eager
    python experiments/benchmarks/int8_matmul.py xla
"""

import sys
import time

import keras
import numpy as np
import tensorflow as tf

SHAPES = [(256, 256, 1024), (256, 1024, 256), (256, 256, 10824)]


def best(function, calls=20, rounds=5):
    function()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            function()
        times.append((time.perf_counter() - start) / calls)
    return min(times)


def operands(m, k, n, rng):
    a = rng.normal(size=(m, k)).astype("float32")
    b = rng.normal(size=(k, n)).astype("float32")
    ai = rng.integers(-127, 127, (m, k)).astype("int8")
    bi = rng.integers(-127, 127, (k, n)).astype("int8")
    return a, b, ai, bi


def eager(m, k, n, rng):
    a, b, ai, bi = map(tf.constant, operands(m, k, n, rng))

    @tf.function
    def f32():
        return tf.linalg.matmul(a, b)

    @tf.function
    def i8():
        return tf.linalg.matmul(ai, bi, output_type=tf.int32)

    dense = keras.layers.Dense(n)
    dense.build((None, k))
    quantized = keras.layers.Dense(n)
    quantized.build((None, k))
    quantized.set_weights(dense.get_weights())
    quantized.quantize("int8")

    @tf.function
    def dense_call():
        return dense(a)

    @tf.function
    def quantized_call():
        return quantized(a)

    t = {"f32": best(f32), "i8": best(i8)}
    t["dense"], t["qdense"] = best(dense_call), best(quantized_call)
    return (
        f"tf.matmul float32 {t['f32'] * 1e3:.2f} ms, int8->int32 "
        f"{t['i8'] * 1e3:.2f} ms ({t['i8'] / t['f32']:.2f}x); keras Dense float32 "
        f"{t['dense'] * 1e3:.2f} ms, int8 {t['qdense'] * 1e3:.2f} ms "
        f"({t['qdense'] / t['dense']:.2f}x)"
    )


def xla(m, k, n, rng):
    import jax
    import jax.numpy as jnp

    a, b, ai, bi = operands(m, k, n, rng)
    ta, tb, tai, tbi = map(tf.constant, (a, b, ai, bi))
    ja, jb, jai, jbi = map(jnp.asarray, (a, b, ai, bi))

    @tf.function(jit_compile=True)
    def tf_f32(x, y):
        return tf.linalg.matmul(x, y)

    @tf.function(jit_compile=True)
    def tf_i8(x, y):
        return tf.linalg.matmul(x, y, output_type=tf.int32)

    @jax.jit
    def jax_f32(x, y):
        return x @ y

    @jax.jit
    def jax_i8(x, y):
        return jax.lax.dot(x, y, preferred_element_type=jnp.int32)

    t = {
        "tf-xla f32": best(lambda: tf_f32(ta, tb).numpy()),
        "tf-xla i8": best(lambda: tf_i8(tai, tbi).numpy()),
        "jax f32": best(lambda: jax_f32(ja, jb).block_until_ready()),
        "jax i8": best(lambda: jax_i8(jai, jbi).block_until_ready()),
    }
    times = ", ".join(f"{key} {v * 1e3:.2f} ms" for key, v in t.items())
    return (
        f"{times}; int8/float32: tf-xla {t['tf-xla i8'] / t['tf-xla f32']:.2f}x, "
        f"jax {t['jax i8'] / t['jax f32']:.2f}x"
    )


def main(mode):
    rng = np.random.default_rng(0)
    for m, k, n in SHAPES:
        line = (eager if mode == "eager" else xla)(m, k, n, rng)
        print(f"{m}x{k} @ {k}x{n}: {line}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "eager")
