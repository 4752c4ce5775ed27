"""Where the time of one batch goes, for the families far from their floor (#51).

`benchmarks/decode_floors.py` times each family's preset against the GEMM
work it needs. This script traces one warm batch of each family of
`--families` with `tf.profiler` (its verb: `translate` of 64 test verses at
beam 4, `caption` of 64 test scenes at beam 3, `predict` of 256 test images
of RAM's default preset) and sums the host's op events by op type, as
`decode_ops.py` does, beside the call's wall time: the share of GEMM ops
(`MatMul`, `BatchMatMulV2`, `Conv2D`, `_Fused*`) against the rest.

    python experiments/benchmarks/floor_ops.py \
        --log experiments/benchmarks/logs/floor_ops_s31.log
"""

import argparse
import os
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ["KERAS_BACKEND"] = "tensorflow"
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
sys.path.insert(0, os.path.dirname(__file__))

from decode_floors import FAMILIES  # noqa: E402
from decode_ops import op_table, op_times  # noqa: E402
from machine import describe, printer  # noqa: E402

#: Op types that are matrix products or convolutions (oneDNN's `_Mkl*`
#: and `_MklNative*` names, and the fused ones, start so once cut).
GEMM = ("MatMul", "BatchMatMul", "Conv2D", "Einsum", "FusedMatMul", "FusedConv2D")


def is_gemm(kind):
    """Whether an op type is a matrix product or a convolution."""
    return (
        kind.replace("_MklNative", "").replace("_Mkl", "").lstrip("_").startswith(GEMM)
    )


def batch_call(family, model):
    """One batch of the family's verb, as a call without arguments."""
    if family in ("seq2seq", "transformer"):
        from zoo.data import bible

        verses = [en for en, _, _ in bible.load_pairs("test")[:64]]
        return lambda: model.translate(verses, beam_width=FAMILIES[family][1])
    if family == "ram":
        from zoo.data import fashion_mnist
        from zoo.ram.canvas import preset_data

        variant, seeds, size = preset_data(model.preset_metadata)
        images, _ = fashion_mnist.load(
            "test", variant, canvas_size=size, seed=seeds["test"]
        )
        return lambda: model.predict(images[:256], batch_size=256, verbose=0)
    from zoo.data import scenes

    images = scenes.load("test", num_scenes=64)["images"]
    return lambda: model.caption(images, beam_width=FAMILIES[family][1])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--families", default="seq2seq,show_attend_tell,transformer_captioner,ram"
    )
    p.add_argument("--top", type=int, default=10)
    p.add_argument("--log")
    args = p.parse_args(argv)
    import tensorflow as tf

    from zoo.base.task import Task

    say = printer(args.log)
    say(f"{describe()}; {' '.join(['python', *sys.argv])}")
    for family in args.families.split(","):
        call = batch_call(family, Task.from_preset(FAMILIES[family][0]))
        call()  # traced and warm
        with tempfile.TemporaryDirectory() as directory:
            tf.profiler.experimental.start(directory)
            start = time.perf_counter()
            call()
            wall = time.perf_counter() - start
            tf.profiler.experimental.stop()
            totals = op_times(directory)
        total = sum(t for t, _ in totals.values())
        gemm = sum(t for kind, (t, _) in totals.items() if is_gemm(kind))
        say(
            f"\n{family}: {wall:.2f} s wall (traced); {total / 1e6:.2f} s summed "
            f"over the ops (both cores); GEMM ops {gemm / total:.0%} of it"
        )
        op_table(totals, args.top, say)
    say(f"\n{describe()}")


if __name__ == "__main__":
    main()
