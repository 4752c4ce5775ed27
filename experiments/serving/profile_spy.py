"""Samples `zoo serve` with py-spy under one protocol's load: where the CPU of a request goes.

Starts `python -m zoo serve EXPORT` as `benchmarks/serving_load.py` does,
runs CLIENTS one-row clients for 2 s of warm-up and SECONDS more while
`py-spy record --gil` samples the server (only the thread holding the GIL:
the Python work that the two cores serialize), then prints the rate, the
server's CPU time a row, and the functions that hold the GIL most, by own
samples and by samples under them:

    PY_SPY=/path/to/py-spy python experiments/serving/profile_spy.py \\
        /tmp/sload/ram rest-binary 64 8 [--workers 16]
"""

import argparse
import collections
import functools
import os
import subprocess
import sys
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "benchmarks"))

import serving_load  # noqa: E402


def summary(collapsed, top=25):
    """Own and total samples a function, from py-spy's collapsed stacks."""
    own, total, samples = collections.Counter(), collections.Counter(), 0
    for line in collapsed.splitlines():
        stack, _, count = line.rpartition(" ")
        frames = [
            frame.split(" (")[0] + " " + frame.split("/")[-1].split(":")[0]
            for frame in stack.split(";")
        ]
        count = int(count)
        samples += count
        own[frames[-1]] += count
        for frame in set(frames):
            total[frame] += count
    lines = [f"{samples} samples holding the GIL"]
    for title, counter in (("own", own), ("under", total)):
        lines.append(f"== {title}")
        lines += [
            f"{n:7d} {100 * n / samples:5.1f}%  {f}"
            for f, n in counter.most_common(top)
        ]
    return "\n".join(lines)


def main():
    from zoo.serving.export import load
    from zoo.serving.requests import Signatures
    from zoo.serving.server import saved_model_folder

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("export")
    parser.add_argument("protocol", choices=["rest-json", "rest-binary", "grpc"])
    parser.add_argument("clients", type=int)
    parser.add_argument("seconds", type=float)
    parser.add_argument("--workers", type=int, default=16)
    args = parser.parse_args()
    port, grpc_port = serving_load.free_port(), serving_load.free_port()
    process = serving_load.serve(args.export, port, grpc_port, 64, args.workers)
    row = serving_load.one_row(Signatures(load(saved_model_folder(args.export)[0])))
    make = {
        "rest-json": functools.partial(
            serving_load.rest_json, ("127.0.0.1", port), *row
        ),
        "rest-binary": functools.partial(
            serving_load.rest_binary, ("127.0.0.1", port), *row
        ),
        "grpc": functools.partial(
            serving_load.grpc_predict, f"127.0.0.1:{grpc_port}", *row
        ),
    }[args.protocol]
    out = tempfile.mktemp(suffix=".txt")
    spy = [os.environ.get("PY_SPY", "py-spy"), "record", "--gil", "--format", "raw"]
    spy += [
        "-r",
        "200",
        "-d",
        str(int(args.seconds)),
        "-o",
        out,
        "-p",
        str(process.pid),
    ]
    timer = threading.Timer(2.0, lambda: subprocess.run(spy, capture_output=True))
    timer.start()
    try:
        latencies, errors, _, cpu, own = serving_load.load(
            make, args.clients, 2.0, args.seconds, process.pid
        )
        timer.join()
    finally:
        process.terminate()
        process.wait(60)
    print(
        f"{args.protocol}, {args.clients} clients, --workers {args.workers}: "
        f"{len(latencies) / args.seconds:.1f} rows/s, {errors} errors, server CPU "
        f"{1000 * cpu / max(len(latencies), 1):.2f} ms a row, clients' CPU "
        f"{1000 * own / max(len(latencies), 1):.2f} ms a row; load {os.getloadavg()}"
    )
    with open(out, encoding="utf-8") as f:
        print(summary(f.read()))


if __name__ == "__main__":
    main()
