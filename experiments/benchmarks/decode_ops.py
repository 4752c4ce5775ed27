"""Which TensorFlow ops `translate()`'s search spends its time in (issue #51).

Traces one warm call of `transformer_bible_en_es`'s compiled search (the
`tf.function` `generate_with` runs) on `--limit` test verses in
`translate`'s length-sorted chunks of 64, with `tf.profiler`, and sums the
host's op events of the trace by op type (the `XPlane` protobuf read
directly; no TensorBoard plugin needed), beside the call's wall time. Prints the top `--top` op types
with their share of the summed op time, for greedy and for beam `--beam`.

    python experiments/benchmarks/decode_ops.py --limit 128 \
        --log experiments/benchmarks/logs/decode_ops_s30.log
"""

import argparse
import collections
import glob
import os
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
sys.path.insert(0, os.path.dirname(__file__))

from decode_profile import PRESET, chunks_of  # noqa: E402
from machine import describe, printer  # noqa: E402

#: Op types whose events hold other ops' events (counted once, inside).
CONTAINERS = {"While", "StatefulPartitionedCall", "PartitionedCall", "If"}


def op_times(directory, by_name=False):
    """`{op type: [microseconds, count]}` of the ops run by TF's compute threads.

    The trace's events on the host's `tf_Compute` lines are named
    `op_name:OpType`; the executor's own regions (`ExecutorState::...`)
    and the container ops (`CONTAINERS`) are left out.
    """
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    (path,) = glob.glob(f"{directory}/**/*.xplane.pb", recursive=True)
    space = xplane_pb2.XSpace()
    with open(path, "rb") as f:
        space.ParseFromString(f.read())
    totals = collections.defaultdict(lambda: [0.0, 0])
    for plane in space.planes:
        if not plane.name.startswith("/host:CPU"):
            continue
        for line in plane.lines:
            if not line.name.startswith("tf_Compute"):
                continue
            for event in line.events:
                name = plane.event_metadata[event.metadata_id].name
                if "::" in name or ":" not in name:
                    continue  # the executor's own regions
                op, kind = name.rsplit(":", 1)
                if kind in CONTAINERS:
                    continue
                if by_name:  # the op's name in its layer, loop prefixes cut
                    kind = "/".join(op.split("/")[-3:]) + ":" + kind
                totals[kind][0] += event.duration_ps / 1e6
                totals[kind][1] += 1
    return totals


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--limit", type=int, default=128)
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--top", type=int, default=15)
    p.add_argument("--by-name", action="store_true", help="sum by op, not type")
    p.add_argument("--log")
    args = p.parse_args(argv)
    os.environ["KERAS_BACKEND"] = "tensorflow"
    import tensorflow as tf

    from zoo.base.generation import make_search
    from zoo.base.task import Task
    from zoo.data import bible

    say = printer(args.log)

    say(f"{describe()}; {' '.join(['python', *sys.argv])}")
    model = Task.from_preset(PRESET)
    length = model.preprocessor.target_sequence_length
    verses = [en for en, _, _ in bible.load_pairs("test")[: args.limit]]
    chunks = chunks_of(model, verses)
    for width in (1, args.beam):
        search = make_search(width, length_penalty=0.6)

        def run(search):
            for _, batch in chunks:
                model.generate_with(search, batch, length, 64)

        run(search)  # traced and warm
        with tempfile.TemporaryDirectory() as directory:
            tf.profiler.experimental.start(directory)
            start = time.perf_counter()
            run(search)
            wall = time.perf_counter() - start
            tf.profiler.experimental.stop()
            totals = op_times(directory, args.by_name)
        total = sum(t for t, _ in totals.values())
        decoding = "greedy" if width == 1 else f"beam {width}"
        say(
            f"\n{decoding}: {wall:.2f} s wall (traced); {total / 1e6:.2f} s summed "
            "over the ops (both cores)"
        )
        op_table(totals, args.top, say)
    say(f"\n{describe()}")


def op_table(totals, top, say):
    """Prints the `top` op types of `totals` (`op_times`) as a markdown table."""
    total = sum(t for t, _ in totals.values())
    say("| op type | ms | share | calls |")
    say("|---|---:|---:|---:|")
    ranked = sorted(totals.items(), key=lambda kv: -kv[1][0])
    for kind, (micros, count) in ranked[:top]:
        say(f"| {kind} | {micros / 1e3:.0f} | {micros / total:.1%} | {count} |")


if __name__ == "__main__":
    main()
