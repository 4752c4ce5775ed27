"""One compiled decoding step of the Transformer preset, and its output dot.

Session 28 found that under JAX the test-split evaluation spends most of
its time running the compiled search, not compiling it (warm greedy pass
about 3x TensorFlow's on one core). This probe times one `next` step of
`transformer_bible_en_es` (batch 64, source 48, cache 64 positions),
compiled for the current backend (`jax.jit` or `tf.function`) and, with
`--dots`, under JAX the step's largest dot, the tied output projection
`x @ E.T` (64 x 256 x 10824), against the same product with `E.T` stored
transposed, and with `--loop` the step inside the compiled greedy search
(`jax.jit` of `run_search`, all 64 steps) with the copies of the
self-attention caches XLA put in its loop. Run it once per backend:

    KERAS_BACKEND=jax nice -n 10 taskset -c 1 python \\
        experiments/benchmarks/jax_decoding_step.py --dots --loop
    KERAS_BACKEND=tensorflow nice -n 10 taskset -c 1 python \\
        experiments/benchmarks/jax_decoding_step.py
"""

import argparse
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))

from machine import load_average  # noqa: E402

BATCH, SOURCE, STEPS = 64, 48, 64


def milliseconds(call, repeats):
    """Mean milliseconds of `call()` after two warm-up calls."""
    for _ in range(2):
        call()
    start = time.perf_counter()
    for _ in range(repeats):
        call()
    return (time.perf_counter() - start) / repeats * 1000


def step_call(model):
    """A no-argument call of one compiled `next` step, its result on the host."""
    import keras
    import numpy as np
    from keras import ops

    rng = np.random.default_rng(0)
    source = rng.integers(4, 1000, (BATCH, SOURCE)).astype("int32")
    prompt = np.zeros((BATCH, STEPS + 1), "int32")
    prompt[:, :40] = rng.integers(4, 1000, (BATCH, 40))
    cache = model.encode(source, STEPS)
    if keras.backend.backend() == "jax":
        import jax

        variables = model.variables

        @jax.jit
        def step(values, prompt, cache):
            with keras.StatelessScope(state_mapping=list(zip(variables, values))):
                return model.next(prompt, cache, 20)[0]

        values = [v.value for v in variables]
        return lambda: ops.convert_to_numpy(step(values, prompt, cache))
    import tensorflow as tf

    step = tf.function(lambda prompt, cache: model.next(prompt, cache, 20)[0])
    prompt = tf.constant(prompt)
    return lambda: ops.convert_to_numpy(step(prompt, cache))


def loop_call(model):
    """`(call, copies)`: the greedy search of one batch, compiled by `jax.jit`.

    The source is random ids, so no row writes `[END]` early and the loop
    runs all `STEPS` steps; `copies` counts the copies of a whole
    self-attention cache (keys or values of one layer) in the optimized
    HLO, which run at every step.
    """
    import re

    import jax
    import keras
    import numpy as np

    from keras_attention.decoding import GreedySearch

    pre = model.preprocessor
    rng = np.random.default_rng(0)
    source = rng.integers(4, 1000, (BATCH, SOURCE)).astype("int32")
    prompt = np.full((BATCH, STEPS + 1), pre.pad_id, "int32")
    prompt[:, 0] = pre.start_id
    variables = model.variables

    def search(values, source, prompt):
        with keras.StatelessScope(state_mapping=list(zip(variables, values))):
            return model.run_search(
                GreedySearch(), source, prompt, stop_token_ids=[pre.end_id]
            )

    values = [v.value for v in variables]
    compiled = jax.jit(search).lower(values, source, prompt).compile()
    heads = model.num_heads
    shape = rf"f32\[{BATCH},{heads},{STEPS},\d+\]\S* copy\("
    copies = len(re.findall(shape, compiled.as_text()))
    return lambda: np.asarray(compiled(values, source, prompt)), copies


def dot_calls():
    """`{name: call}` of the output projection, `E` as stored and transposed."""
    import jax
    import numpy as np

    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, 256), dtype=np.float32)
    table = rng.standard_normal((10824, 256), dtype=np.float32)
    transposed = np.ascontiguousarray(table.T)
    as_stored = jax.jit(lambda x, e: x @ e.T)
    stored_transposed = jax.jit(lambda x, k: x @ k)
    return {
        "x @ E.T, E (10824, 256) as stored": lambda: as_stored(
            x, table
        ).block_until_ready(),
        "x @ K, K = E.T stored (256, 10824)": lambda: stored_transposed(
            x, transposed
        ).block_until_ready(),
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--dots", action="store_true", help="JAX: time the output dot")
    p.add_argument("--loop", action="store_true", help="JAX: time the greedy loop")
    args = p.parse_args()

    import keras

    from zoo.base.task import Task

    model = Task.from_preset("transformer_bible_en_es")
    backend = keras.backend.backend()
    ms = milliseconds(step_call(model), args.repeats)
    print(
        f"{backend}: one decoding step, batch {BATCH}: {ms:.1f} ms; "
        f"load average {load_average()}",
        flush=True,
    )
    if args.loop:
        call, copies = loop_call(model)
        ms = milliseconds(call, 3) / STEPS
        print(
            f"{backend}: greedy search loop, batch {BATCH}, {STEPS} steps: "
            f"{ms:.1f} ms a step; {copies} copies of a whole self-attention "
            f"cache in the compiled loop; load average {load_average()}",
            flush=True,
        )
    if args.dots:
        for name, call in dot_calls().items():
            ms = milliseconds(call, 5 * args.repeats)
            print(f"{backend}: {name}: {ms:.2f} ms; load average {load_average()}")


if __name__ == "__main__":
    main()
