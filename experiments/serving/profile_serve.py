"""`zoo serve` with stage timers and a stack sampler; prints both on SIGUSR1.

Run by `profile_load.py`, which loads it as `benchmarks/serving_load.py`
does and reads what it prints (`experiments/serving/logs/serving_profile.log`):

    python experiments/serving/profile_serve.py EXPORT HTTP_PORT GRPC_PORT
"""

import collections
import os
import signal
import sys
import threading
import time

from zoo.serving import batcher, handler, requests, server

STAGES = [
    (handler.Handler, "handle", "handle (whole connection)"),
    (handler.Handler, "_answer", "handler._answer"),
    (handler.Handler, "_v2_body", "read + split the body"),
    (requests.Signatures, "parse_tf_serving", "parse (TF Serving JSON)"),
    (handler.Handler, "_run", "wait for the batcher"),
    (handler.Handler, "_send", "send the answer"),
    (batcher.Batcher, "_run", "batcher call (concatenate, run, split)"),
    (requests.Signatures, "__call__", "model call"),
]
#: Stacks are sampled this often (seconds).
EVERY = 0.003

stages = collections.defaultdict(lambda: [0, 0.0])
leaves, in_model_call = collections.Counter(), collections.Counter()
lock, stop = threading.Lock(), threading.Event()


def timed(owner, name, label):
    original = getattr(owner, name)

    def wrapper(*args, **kwargs):
        started = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            with lock:
                stage = stages[label]
                stage[0] += 1
                stage[1] += time.perf_counter() - started

    setattr(owner, name, wrapper)


def sample():
    me = threading.get_ident()
    while not stop.wait(EVERY):
        for thread, frame in sys._current_frames().items():
            if thread == me:
                continue
            names = []
            while frame is not None and len(names) < 40:
                code = frame.f_code
                names.append(f"{os.path.basename(code.co_filename)}:{code.co_name}")
                frame = frame.f_back
            leaves[names[0]] += 1
            if "requests.py:__call__" in names:
                in_model_call[" <- ".join(names[:3])] += 1


def report(*_):
    stop.set()
    print("== stages: calls, seconds in all, ms each", file=sys.stderr)
    for label, (count, seconds) in sorted(stages.items(), key=lambda s: -s[1][1]):
        mean = 1000 * seconds / max(count, 1)
        print(f"{label:42s} {count:7d} {seconds:8.2f} {mean:8.2f}", file=sys.stderr)
    print(
        f"== samples (every {EVERY * 1000:g} ms) inside a model call", file=sys.stderr
    )
    for where, count in in_model_call.most_common(5):
        print(f"{count:7d} {where}", file=sys.stderr)
    print("== samples: where each thread was", file=sys.stderr)
    for where, count in leaves.most_common(20):
        print(f"{count:7d} {where}", file=sys.stderr)
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    for owner, name, label in STAGES:
        timed(owner, name, label)
    threading.Thread(target=sample, daemon=True).start()
    signal.signal(signal.SIGUSR1, report)
    path, port, grpc_port = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    server.serve(path, port=port, grpc_port=grpc_port, model_name="bench")
