"""MultiWorkerMirroredStrategy: 2 worker processes on 127.0.0.1 stay in sync.

Starts `multi_worker_worker.py` twice with a `TF_CONFIG` naming both workers
(free local ports), lets `get_strategy("auto")` pick the strategy from it,
trains the tiny Transformer (`tiny_models.MULTI_WORKER_CASE`) with
`model.fit` for a few steps, and checks that both workers end with
bit-identical weights that differ from the initial ones.
"""

import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

pytestmark = pytest.mark.tensorflow_only

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
WORKERS = 2
SAMPLES, BATCH_SIZE = 16, 4  # 4 optimizer steps on 16 real verse pairs.


def free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def start_workers(out):
    cluster = {"worker": [f"127.0.0.1:{port}" for port in free_ports(WORKERS)]}
    processes = []
    for index in range(WORKERS):
        env = dict(
            os.environ,
            KERAS_BACKEND="tensorflow",
            CUDA_VISIBLE_DEVICES="",
            TF_CONFIG=json.dumps(
                {"cluster": cluster, "task": {"type": "worker", "index": index}}
            ),
        )
        command = [
            sys.executable,
            os.path.join(HERE, "multi_worker_worker.py"),
            "--out",
            str(out),
            "--samples",
            str(SAMPLES),
            "--batch-size",
            str(BATCH_SIZE),
        ]
        processes.append(
            subprocess.Popen(
                command,
                cwd=ROOT,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    return processes


# `zoo.Task` works around the two Keras 3.15 bugs that stop `model.fit`
# under MultiWorkerMirroredStrategy: the first batch's inputs (a dict) are
# averaged across workers for the symbolic build (keras-team/keras#20329),
# and the step's scalar logs are averaged with `reduce(MEAN, axis=0)`
# (tensorflow/tensorflow#72388).
def test_two_workers_end_with_identical_weights(tmp_path):
    processes = start_workers(tmp_path)
    reports = []
    try:
        for process in processes:
            stdout, stderr = process.communicate(timeout=300)
            assert process.returncode == 0, stderr[-3000:]
            reports.append(json.loads(stdout.strip().splitlines()[-1]))
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
    for index, report in enumerate(reports):
        assert report["index"] == index
        assert report["multi_worker"]
        assert report["replicas"] == WORKERS
        assert report["steps"] == SAMPLES // BATCH_SIZE
        assert np.isfinite(report["loss"]).all()
    weights = [np.load(tmp_path / f"worker_{i}.npz") for i in range(WORKERS)]
    names = sorted(weights[0].files)
    assert names == sorted(weights[1].files)
    trained = [n for n in names if n.startswith("after:")]
    assert len(trained) > 10
    changed = 0
    for name in trained:
        np.testing.assert_array_equal(weights[0][name], weights[1][name], name)
        initial = "before:" + name[len("after:") :]
        np.testing.assert_array_equal(weights[0][initial], weights[1][initial])
        changed += not np.array_equal(weights[0][name], weights[0][initial])
    # Every trainable variable moved (the optimizer's step counter aside).
    assert changed >= len(trained) // 2
