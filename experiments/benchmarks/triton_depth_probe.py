"""Probe: the head widths JAX's Triton kernel compiles and runs exactly for.

`keras_attention.layers.dispatch.TRITON_DEPTHS` bounds the head width of
the Triton path at 9-128 from the kernel's own rules (Triton's block
product needs 16 after the kernel rounds the width up to a power of two;
the kernel's tests run 32-128 in float16), where only 64 was measured
(session 25). This runs `dispatch.triton_flash_attention` forward +
backward at each `--depths` width and `--dtypes` dtype, with a padding
mask shared by queries and keys (segment ids) over a length not in whole
blocks (the padding path too), and prints one JSON line per case: the
milliseconds (median of `--repeats`), or the error's first line where the
kernel does not compile or run, and the largest difference of the output
and of the query's gradient from a float32 NumPy-order reference
(`jnp` softmax at `Precision.HIGHEST`, padded rows zero).

    python experiments/benchmarks/triton_depth_probe.py            # a GPU
    python experiments/benchmarks/triton_depth_probe.py --interpret \\
        --length 200 --depths 16                                   # a CPU
"""

import argparse
import json
import os
import statistics
import time

os.environ.setdefault("KERAS_BACKEND", "jax")


def _reference(query, key, value, mask, scale):
    """Softmax attention with `mask` for queries and keys; masked rows zero."""
    import jax
    import jax.numpy as jnp

    query, key, value = (x.astype("float32") for x in (query, key, value))
    with jax.default_matmul_precision("highest"):
        logits = jnp.einsum("bqhd,bkhd->bhqk", query, key) * scale
        keep = mask[:, None, :, None] & mask[:, None, None, :]
        weights = jax.nn.softmax(jnp.where(keep, logits, -jnp.inf), axis=-1)
        weights = jnp.where(keep, weights, 0.0)
        return jnp.einsum("bhqk,bkhd->bqhd", weights, value)


def _case(depth, dtype, args):
    import jax
    import jax.numpy as jnp
    import numpy as np

    from keras_attention.layers import dispatch

    keys = jax.random.split(jax.random.key(0), 3)
    shape = (args.batch, args.length, args.heads, depth)
    query, key, value = (jax.random.normal(k, shape, dtype) for k in keys)
    mask = np.ones((args.batch, args.length), bool)
    mask[0, args.length - args.length // 10 :] = False
    mask = jnp.asarray(mask)
    scale = depth**-0.5

    def triton(q, k, v):
        return dispatch.triton_flash_attention(
            q, k, v, False, scale, mask, shared_mask=True
        )

    def reference(q, k, v):
        return _reference(q, k, v, mask, scale)

    def grad(fn):
        return jax.jit(jax.grad(lambda *x: fn(*x).astype("float32").sum(), (0, 1, 2)))

    row = {"depth": depth, "dtype": dtype, "T": args.length, "B": args.batch}
    try:
        step = grad(triton)
        jax.block_until_ready(step(query, key, value))
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            grads = jax.block_until_ready(step(query, key, value))
            times.append(time.perf_counter() - start)
        out = jax.jit(triton)(query, key, value)
    except Exception as error:  # noqa: BLE001 - reported in the row
        row["error"] = f"{type(error).__name__}: {str(error).splitlines()[0][:300]}"
        return row
    want = reference(query, key, value)
    want_grads = grad(reference)(query, key, value)
    row["ms"] = statistics.median(times) * 1e3
    row["out_diff"] = float(jnp.max(jnp.abs(out.astype("float32") - want)))
    row["grad_q_diff"] = float(
        jnp.max(jnp.abs(grads[0].astype("float32") - want_grads[0]))
    )
    row["grad_q_scale"] = float(jnp.max(jnp.abs(want_grads[0])))
    return row


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depths", default="16,32,64,128,256")
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--length", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--interpret", action="store_true", help="a CPU check")
    parser.add_argument("--out", help="also append the rows to this file")
    args = parser.parse_args(argv)
    from keras_attention.layers import dispatch

    dispatch.TRITON_INTERPRET = args.interpret
    rows = []
    for depth in (int(d) for d in args.depths.split(",")):
        for dtype in args.dtypes.split(","):
            row = _case(depth, dtype, args)
            rows.append(row)
            print(json.dumps(row), flush=True)
            if args.out:
                with open(args.out, "a") as sink:
                    sink.write(json.dumps(row) + "\n")
    return rows


if __name__ == "__main__":
    main()
