"""Profiles `zoo serve` under one protocol's load from `benchmarks/serving_load.py`.

Starts `profile_serve.py` (the server with stage timers and a stack
sampler), runs CLIENTS clients for SECONDS after a 2 s warm-up, then prints
the rate, the latencies, the CPU time of each process and the server's
profile:

    python experiments/serving/profile_load.py /tmp/sload/ram rest-binary 16 8
"""

import functools
import os
import signal
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "benchmarks"))

import serving_load  # noqa: E402


def main():
    from zoo.serving.export import load
    from zoo.serving.requests import Signatures
    from zoo.serving.server import saved_model_folder

    path, protocol = sys.argv[1], sys.argv[2]
    clients, seconds = int(sys.argv[3]), float(sys.argv[4])
    port, grpc_port = serving_load.free_port(), serving_load.free_port()
    command = [sys.executable, os.path.join(HERE, "profile_serve.py"), path]
    process = subprocess.Popen(
        command + [str(port), str(grpc_port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert "Serving" in process.stdout.readline(), process.stderr.read()
    row = serving_load.one_row(Signatures(load(saved_model_folder(path)[0])))
    address = ("127.0.0.1", port)
    make = {
        "rest-json": functools.partial(serving_load.rest_json, address, *row),
        "rest-binary": functools.partial(serving_load.rest_binary, address, *row),
        "grpc": functools.partial(
            serving_load.grpc_predict, f"127.0.0.1:{grpc_port}", *row
        ),
    }[protocol]
    own = sum(os.times()[:2])
    latencies, errors, _, server_cpu, _ = serving_load.load(
        make, clients, 2.0, seconds, process.pid
    )
    latencies = np.array(latencies)
    print(
        f"{protocol}, {clients} clients: {len(latencies) / seconds:.1f} rows/s, "
        f"{errors} errors, p50/p90/p99/max "
        f"{np.percentile(latencies, [50, 90, 99, 100]).round(3).tolist()} s; "
        f"CPU s: server {server_cpu:.1f}, clients {sum(os.times()[:2]) - own:.1f} "
        f"(with the warm-up); load {os.getloadavg()}"
    )
    process.send_signal(signal.SIGUSR1)
    print(process.communicate(timeout=60)[1][-5000:])


if __name__ == "__main__":
    main()
