"""Probe: which float32 attention is fastest on a JAX GPU (issue #39, goal 2).

Attention alone (no projections), B=1, 8 heads of 64, float32, forward +
backward (gradient of `sum(out)` w.r.t. q, k, v) under `jax.jit`, median of
`--repeats` after a warm-up; memory = the compiled program's temporary
bytes. Candidates:

- `xla`: `jax.nn.dot_product_attention(implementation="xla")`, what Keras's
  layer runs on a GPU in float32 (holds the scores);
- `chunked-QxK`: `keras_attention.layers.chunked_attention` with query /
  key blocks Q and K (what `chunk_threshold="auto"` runs there);
- `pallas-BQxBK[-tf32]`: JAX's Triton flash kernel
  `jax.experimental.pallas.ops.gpu.attention.mha` (IEEE float32 dots, or
  TF32 under `jax.default_matmul_precision("tensorfloat32")`).

Each row also gives the largest difference of the output from a
`Precision.HIGHEST` XLA reference where that fits (T <= 16,384).

    python experiments/benchmarks/attention_gpu_probe.py --out probe.jsonl
"""

import argparse
import json
import os
import statistics
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "jax")

HEADS, DEPTH = 8, 64


def _measure(fn, args, repeats):
    import jax

    step = jax.jit(jax.grad(lambda q, k, v: fn(q, k, v).sum(), (0, 1, 2)))
    start = time.perf_counter()
    compiled = step.lower(*args).compile()
    compile_s = time.perf_counter() - start
    try:
        memory = compiled.memory_analysis().temp_size_in_bytes / 2**20
    except Exception:  # noqa: BLE001 - not every platform reports it
        memory = None
    jax.block_until_ready(compiled(*args))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3, memory, compile_s


def _candidates(length, causal, names):
    import jax
    import jax.numpy as jnp

    from keras_attention.layers import chunked_attention

    scale = DEPTH**-0.5
    out = {}
    if "xla" in names:
        out["xla"] = lambda q, k, v: jax.nn.dot_product_attention(
            q, k, v, is_causal=causal, implementation="xla"
        )
    for size in (1024, 2048, 4096, 8192):
        for q_size, k_size in ((size, size), (size, 2 * size), (2 * size, size)):
            name = f"chunked-{q_size}x{k_size}"
            if name in names and max(q_size, k_size) <= length:
                out[name] = lambda q, k, v, a=q_size, b=k_size: chunked_attention(
                    q,
                    k,
                    v,
                    use_causal_mask=causal,
                    query_chunk_size=a,
                    key_chunk_size=b,
                )
    try:
        from jax.experimental.pallas.ops.gpu import attention as pallas
    except Exception as error:  # noqa: BLE001 - reported
        print(json.dumps({"pallas_import": repr(error)}), flush=True)
        return out
    for bq, bk in ((128, 128), (64, 64), (128, 64)):
        for tf32 in (False, True):
            name = f"pallas-{bq}x{bk}" + ("-tf32" if tf32 else "")
            if name not in names:
                continue
            sizes = pallas.BlockSizes(
                block_q=bq,
                block_k=bk,
                block_q_dkv=64,
                block_kv_dkv=64,
                block_q_dq=64,
                block_kv_dq=64,
            )

            def run(q, k, v, sizes=sizes, tf32=tf32):
                call = lambda: pallas.mha(  # noqa: E731
                    q,
                    k,
                    v,
                    None,
                    sm_scale=scale,
                    causal=causal,
                    block_sizes=sizes,
                )
                if tf32:
                    with jax.default_matmul_precision("tensorfloat32"):
                        return call()
                return call()

            out[name] = run
    del jnp
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", default="8192,32768,65536")
    parser.add_argument("--causal-lengths", default="16384")
    parser.add_argument(
        "--names",
        default="xla,chunked-2048x2048,chunked-4096x4096,chunked-8192x8192,"
        "chunked-2048x4096,chunked-4096x2048,chunked-1024x4096,"
        "pallas-128x128,pallas-64x64,pallas-128x64-tf32,pallas-64x64-tf32",
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--budget-s", type=float, default=240)
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    import jax
    import jax.numpy as jnp
    import numpy as np

    names = args.names.split(",")
    began = time.perf_counter()
    sink = open(args.out, "a") if args.out else None  # noqa: SIM115
    print(json.dumps({"jax": jax.__version__, "device": str(jax.devices()[0])}))
    rows = [(int(t), False) for t in args.lengths.split(",") if t]
    rows += [(int(t), True) for t in args.causal_lengths.split(",") if t]
    for length, causal in rows:
        rng = np.random.default_rng(0)
        q, k, v = (
            jnp.asarray(rng.normal(size=(1, length, HEADS, DEPTH)), "float32")
            for _ in "qkv"
        )
        reference = None
        if length <= 16384:
            with jax.default_matmul_precision("highest"):
                reference = np.asarray(
                    jax.jit(
                        lambda q, k, v, causal=causal: jax.nn.dot_product_attention(
                            q, k, v, is_causal=causal, implementation="xla"
                        )
                    )(q, k, v)
                )
        for name, fn in _candidates(length, causal, names).items():
            if time.perf_counter() - began > args.budget_s:
                print(json.dumps({"stopped": "budget", "at": [length, name]}))
                return
            row = {"T": length, "causal": causal, "name": name}
            try:
                ms, mib, compile_s = _measure(fn, (q, k, v), args.repeats)
                row.update(ms=round(ms, 2), mib=mib, compile_s=round(compile_s, 1))
                if reference is not None:
                    out = np.asarray(jax.jit(fn)(q, k, v))
                    row["max_abs_diff"] = float(np.max(np.abs(out - reference)))
            except Exception as error:  # noqa: BLE001 - reported in the row
                row["error"] = f"{type(error).__name__}: {str(error)[:300]}"
            line = json.dumps(row)
            print(line, flush=True)
            if sink:
                sink.write(line + "\n")
                sink.flush()


if __name__ == "__main__":
    sys.exit(main())
