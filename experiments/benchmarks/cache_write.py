"""One decoding step's cache write on TensorFlow, three ways (issue #51).

The self-attention cache of `transformer_bible_en_es`'s decoder,
`(rows, 4 heads, 64 positions, 64)`, gets one position written inside a
`tf.function` (no XLA), as `keras_attention.layers.kv_cache.write_cache`
does: `ops.slice_update` (TensorFlow's `XlaDynamicUpdateSlice`, run
outside XLA by compiling the op on demand), a `where` on the position
(what the JAX backend runs), and `tf.tensor_scatter_nd_update`. Rows 64
(greedy, a batch of 64) and 256 (beam 4). Best of 5 rounds of 200 writes
of 6 caches (3 layers, keys and values), the three ways alternating; all
three return the same values (checked).

    python experiments/benchmarks/cache_write.py
"""

import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ["KERAS_BACKEND"] = "tensorflow"
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from keras import ops  # noqa: E402
from machine import describe  # noqa: E402

CACHES = 6
WRITES = 200


def slice_update(cache, new, index):
    return ops.slice_update(cache, [0, 0, index, 0], new)


def where(cache, new, index):
    here = tf.reshape(tf.range(cache.shape[2]) == index, (1, 1, -1, 1))
    return tf.where(here, new, cache)


def scatter(cache, new, index):
    moved = tf.transpose(cache, (2, 0, 1, 3))
    moved = tf.tensor_scatter_nd_update(
        moved, [[index]], tf.transpose(new, (2, 0, 1, 3))
    )
    return tf.transpose(moved, (1, 2, 0, 3))


def loop(write):
    @tf.function
    def run(caches, new):
        def body(i, caches):
            return i + 1, [write(c, new, i % 64) for c in caches]

        return tf.while_loop(lambda i, c: i < WRITES, body, (0, caches))[1]

    return run


def main():
    print(f"{describe()}; python {' '.join(sys.argv)}")
    ways = {"slice_update": slice_update, "where": where, "scatter": scatter}
    print("| rows | " + " | ".join(f"{w} ms/step" for w in ways) + " |")
    print("|---:|" + "---:|" * len(ways))
    for rows in (64, 256):
        rng = np.random.default_rng(0)
        caches = [
            tf.constant(rng.normal(size=(rows, 4, 64, 64)).astype("float32"))
            for _ in range(CACHES)
        ]
        new = tf.constant(rng.normal(size=(rows, 4, 1, 64)).astype("float32"))
        runs = {name: loop(write) for name, write in ways.items()}
        results = {name: run(caches, new) for name, run in runs.items()}
        for name in ways:
            for a, b in zip(results[name], results["slice_update"]):
                np.testing.assert_array_equal(a.numpy(), b.numpy())
        best = {name: float("inf") for name in ways}
        for r in range(5):
            for name in list(ways) if r % 2 == 0 else list(ways)[::-1]:
                start = time.perf_counter()
                runs[name](caches, new)[0].numpy()
                best[name] = min(best[name], time.perf_counter() - start)
        cells = " | ".join(f"{best[n] / WRITES * 1e3:.2f}" for n in ways)
        print(f"| {rows} | {cells} |")
    print(describe())


if __name__ == "__main__":
    main()
