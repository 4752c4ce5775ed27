"""`zoo serve` under sustained load, beside the same export run in-process with full batches.

For each export given (`--exports DIR ...`, written by `python -m zoo
export`; a translator's or a classifier's), in one run:

1. In-process: the export's `serving_default` (`zoo.serving.export.load`,
   `zoo.serving.requests.Signatures`) called back to back with full batches
   of `--max-batch` rows (the server's `max_batch`, 64) for `--duration`
   seconds: rows/s, and the time of one full call.
2. `python -m zoo serve DIR --port P --grpc-port G --max-batch B --workers
   W` in a subprocess (its RSS read from `/proc/PID/status`). A request
   holds a worker until it is answered, so a model call gathers at most W
   one-row requests (`--workers`, 16 by default, as `zoo serve`'s).
3. Unloaded: one client sending one-row requests back to back for
   `--idle-duration` seconds, per protocol: the median latency.
4. For each protocol and each client count (`--clients`, 16 and 64): that
   many threads, each sending one-row requests back to back (a new request
   as soon as its answer came) for `--warmup` + `--duration` seconds;
   counted after the warm-up: requests/s (= rows/s), their share of the
   in-process rows/s, p50 and p99 latency, errors, the server's RSS
   after the warm-up and at the end (sampled each second; "RSS drift" is
   the change in between), and the server's CPU time a row (user and
   system, from `/proc/PID/stat`) beside the in-process one (unlike rows/s,
   it hardly moves with the machine's load), and the clients' CPU time a
   row (this process's). On one machine the clients share the cores with
   the server: two cores bound the served rate at 2 s / (server's + the
   clients' CPU time a row).

The protocols: `rest-json` (TF Serving's REST `:predict`, `{"instances":
[row]}`), `rest-binary` (KServe v2's `infer` with binary tensor data, as
`tritonclient.http` sends by default) and `grpc` (TF Serving's gRPC
`PredictionService.Predict`, as `tensorflow-serving-api`'s stub sends). The
clients run in this process (threads: the GIL and the machine's cores are
shared with the server, so on a small machine the clients take CPU the
server would have).

Targets (issue #55 item 4, 2 cores): served rows/s >= 80% of in-process, 0
errors, RSS within 5% after the warm-up, a one-row request's p99 under load
<= 2x its unloaded latency plus one full model call ("p99 target").

    python benchmarks/serving_load.py --exports /tmp/sload/seq2seq /tmp/sload/ram \\
        --duration 10 > experiments/serving/logs/serving_load.log
"""

import argparse
import functools
import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import machine  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = "bench"
SENTENCE = "In the beginning God created the heavens and the earth."


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def one_row(signatures):
    """`(input name, one-row array)` for the export's `serving_default`."""
    (name, spec), *others = signatures.inputs["serving_default"].items()
    assert not others, "one-input signatures only"
    if spec.dtype.name == "string":
        return name, np.array([SENTENCE.encode()], object)
    side = [60 if d is None else d for d in spec.shape[1:3]]
    image = np.random.default_rng(0).integers(0, 256, (1, *side, 1), np.uint8)
    return name, image


def in_process(path, max_batch, duration):
    """`(rows/s, seconds of one full call, CPU seconds a row, (input name, one row))`."""
    from zoo.serving.export import load
    from zoo.serving.requests import Signatures
    from zoo.serving.server import saved_model_folder

    signatures = Signatures(load(saved_model_folder(path)[0]))
    name, row = one_row(signatures)
    batch = {name: np.concatenate([row] * max_batch)}
    signatures("serving_default", batch)  # Traced and warm.
    calls, started, cpu = 0, time.monotonic(), cpu_seconds(os.getpid())
    while time.monotonic() - started < duration:
        signatures("serving_default", batch)
        calls += 1
    elapsed = time.monotonic() - started
    cpu = (cpu_seconds(os.getpid()) - cpu) / (calls * max_batch)
    return calls * max_batch / elapsed, elapsed / calls, cpu, (name, row)


def rest_json(address, name, row, source):
    value = row[0]
    value = value.decode() if isinstance(value, bytes) else value.tolist()
    body = json.dumps({"instances": [value]}).encode()
    headers = {"Content-Type": "application/json"}
    path = f"/v1/models/{MODEL}:predict"
    return lambda: _post(address, source, path, body, headers)


def rest_binary(address, name, row, source):
    from zoo.serving.v2_binary import tensor_bytes
    from zoo.serving.v2_protocol import DATATYPES

    data = tensor_bytes(row)
    datatype = "BYTES" if row.dtype == object else DATATYPES[row.dtype.name]
    tensor = {"name": name, "shape": list(row.shape), "datatype": datatype}
    tensor["parameters"] = {"binary_data_size": len(data)}
    header = json.dumps(
        {"inputs": [tensor], "parameters": {"binary_data_output": True}}
    ).encode()
    headers = {
        "Content-Type": "application/octet-stream",
        "Inference-Header-Content-Length": str(len(header)),
    }
    path = f"/v2/models/{MODEL}/infer"
    return lambda: _post(address, source, path, header + data, headers)


def _post(address, source, path, body, headers):
    connection = http.client.HTTPConnection(
        *address, timeout=120, source_address=(source, 0)
    )
    try:
        connection.request("POST", path, body, headers)
        answer = connection.getresponse()
        answer.read()
        return answer.status == 200
    finally:
        connection.close()


def grpc_predict(grpc_address, name, row, source):
    import grpc
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

    channel = grpc.insecure_channel(grpc_address)
    stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
    request = predict_pb2.PredictRequest()
    request.model_spec.name = MODEL
    request.inputs[name].CopyFrom(tf.make_tensor_proto(row))

    def send():
        try:
            stub.Predict(request, timeout=120)
            return True
        except grpc.RpcError:
            return False

    return send


def rss_mib(pid):
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def cpu_seconds(pid):
    """The CPU time (user and system) process `pid` has used."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def load(make_client, clients, warmup, duration, pid):
    """Runs `clients` threads: the counted latencies, errors, RSS, server CPU s.

    And the CPU seconds of this process (the clients) over the counted time.
    """
    start = time.monotonic()
    counted_from, end = start + warmup, start + warmup + duration
    latencies, errors, lock = [], [0], threading.Lock()

    def client(index):
        # Each client its own loopback address, as distinct hosts would be
        # (the server caps the connections of one address).
        send = make_client(f"127.0.{1 + index // 250}.{1 + index % 250}")
        while (now := time.monotonic()) < end:
            try:
                ok = send()
            except Exception:  # noqa: BLE001 - counted as an error
                ok = False
            done = time.monotonic()
            if now >= counted_from:
                with lock:
                    if ok:
                        latencies.append(done - now)
                    else:
                        errors[0] += 1

    threads = [
        threading.Thread(target=client, args=(i,), daemon=True) for i in range(clients)
    ]
    for thread in threads:
        thread.start()
    rss = []

    def sample_until(moment):
        while (left := moment - time.monotonic()) > 0:
            time.sleep(min(1.0, left))
            rss.append((time.monotonic() - start, rss_mib(pid)))

    sample_until(counted_from)
    cpu, own = cpu_seconds(pid), cpu_seconds(os.getpid())
    sample_until(end)
    cpu, own = cpu_seconds(pid) - cpu, cpu_seconds(os.getpid()) - own
    for thread in threads:
        thread.join(180)
    return latencies, errors[0], rss, cpu, own


def serve(path, port, grpc_port, max_batch, workers):
    env = dict(os.environ, PYTHONPATH=ROOT)
    process = subprocess.Popen(
        [sys.executable, "-m", "zoo", "serve", path, "--port", str(port)]
        + ["--grpc-port", str(grpc_port), "--model-name", MODEL]
        + ["--max-batch", str(max_batch), "--workers", str(workers)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = process.stdout.readline()
    if "Serving" not in line:
        raise RuntimeError(process.stderr.read()[-3000:])
    return process


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exports", nargs="+", required=True)
    parser.add_argument("--clients", type=int, nargs="+", default=[16, 64])
    parser.add_argument(
        "--protocols", nargs="+", default=["rest-json", "rest-binary", "grpc"]
    )
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument("--idle-duration", type=float, default=5.0)
    parser.add_argument("--max-batch", type=int, default=64)
    parser.add_argument(
        "--workers",
        type=int,
        default=16,
        help="the server's worker threads: a request holds one until answered, "
        "so a model call gathers at most this many one-row requests",
    )
    args = parser.parse_args()
    print(machine.describe())
    print("command: python benchmarks/serving_load.py " + " ".join(sys.argv[1:]))
    table = []
    for path in args.exports:
        export = os.path.basename(os.path.normpath(path))
        speed, call_s, cpu_row, (name, row) = in_process(
            path, args.max_batch, args.duration
        )
        print(
            f"\n{export}: in-process {speed:.1f} rows/s in full batches of "
            f"{args.max_batch} ({call_s * 1000:.0f} ms a call); "
            f"load {machine.load_average()}",
            flush=True,
        )
        port, grpc_port = free_port(), free_port()
        process = serve(path, port, grpc_port, args.max_batch, args.workers)
        address, grpc_address = ("127.0.0.1", port), f"127.0.0.1:{grpc_port}"
        makers = {
            "rest-json": functools.partial(rest_json, address, name, row),
            "rest-binary": functools.partial(rest_binary, address, name, row),
            "grpc": functools.partial(grpc_predict, grpc_address, name, row),
        }
        runs = []
        try:
            for protocol in args.protocols:
                idle, *_ = load(
                    makers[protocol], 1, args.warmup, args.idle_duration, process.pid
                )
                unloaded = float(np.median(idle)) if idle else float("nan")
                for clients in args.clients:
                    latencies, errors, rss, cpu, own = load(
                        makers[protocol],
                        clients,
                        args.warmup,
                        args.duration,
                        process.pid,
                    )
                    runs.append(
                        (protocol, clients, latencies, errors, rss, unloaded, cpu, own)
                    )
                    print(
                        f"{export} {protocol} {clients} clients: "
                        f"{len(latencies) / args.duration:.1f} rows/s, {errors} errors; "
                        f"load {machine.load_average()}",
                        flush=True,
                    )
        finally:
            process.terminate()
            process.wait(120)
        # In-process again: the machine's load moves; the ratio uses the mean.
        again, call_again, cpu_again, _ = in_process(
            path, args.max_batch, args.duration
        )
        print(
            f"{export}: in-process again {again:.1f} rows/s "
            f"({call_again * 1000:.0f} ms a call)",
            flush=True,
        )
        speed, call_s = (speed + again) / 2, (call_s + call_again) / 2
        cpu_row = (cpu_row + cpu_again) / 2
        for protocol, clients, latencies, errors, rss, unloaded, cpu, own in runs:
            after = [mib for t, mib in rss if t >= args.warmup] or [np.nan]
            rate = len(latencies) / args.duration
            p50, p99 = np.percentile(latencies, [50, 99]) if latencies else [np.nan] * 2
            target = 2 * unloaded + call_s
            table.append(
                f"| {export} | {protocol} | {clients} | {rate:.1f} | {speed:.1f} "
                f"| {100 * rate / speed:.0f}% | {p50 * 1000:.0f} | {p99 * 1000:.0f} "
                f"| {target * 1000:.0f} | {errors} | {after[0]:.0f} -> {after[-1]:.0f} "
                f"({100 * (after[-1] - after[0]) / after[0]:+.1f}%) "
                f"| {1000 * cpu / max(len(latencies), 1):.2f} ({1000 * cpu_row:.2f}) "
                f"| {1000 * own / max(len(latencies), 1):.2f} |"
            )
    print(
        "\n| export | protocol | clients | served rows/s | in-process rows/s "
        "| served / in-process | p50 ms | p99 ms | p99 target ms "
        "(2x unloaded + 1 call) | errors | server RSS MiB after warm-up -> end "
        "| server CPU ms a row (in-process) | clients' CPU ms a row |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(table))
    print(f"\n{machine.describe()}")


if __name__ == "__main__":
    main()
