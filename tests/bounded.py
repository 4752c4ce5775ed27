"""Runs Python code in a child process that cannot exhaust the machine.

A test of an attack on the loader must stop by itself even where the code
under test would explode (allocate GiBs, fill the disk, loop for ever), so
that it fails rather than hangs on such code. The child is watched: it is
killed when its resident memory passes `memory` or it runs past `seconds`;
`RLIMIT_FSIZE` stops it writing any file larger than `file_size`, and
`RLIMIT_AS` stops one allocation too fast for the watch.

Load it as the tests load `tiny_models.py` (pytest imports tests with
`--import-mode=importlib`):

    spec = importlib.util.spec_from_file_location("bounded", path)
"""

import dataclasses
import os
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# What importing TensorFlow or JAX maps without using it (2.3-3.2 GiB of
# address space, under 1 GiB resident), on top of the memory allowed.
_ADDRESS_SPACE = 5 << 30


@dataclasses.dataclass
class Outcome:
    """How a bounded child ended.

    Attributes:
        returncode: int. The child's exit status (negative: a signal).
        output: str. Its stdout and stderr together.
        peak_memory: int. Its largest resident memory seen, in bytes.
        seconds: float. Its wall-clock time.
        stopped: `None`, or why the watch killed it: `"memory"` or `"time"`.
    """

    returncode: int
    output: str
    peak_memory: int
    seconds: float
    stopped: str = None

    def __str__(self):
        return (
            f"exit {self.returncode}, stopped by {self.stopped}, "
            f"{self.peak_memory / 2**20:.0f} MiB, {self.seconds:.1f} s:\n"
            f"{self.output[-3000:]}"
        )


def _resident(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def run(code, memory=3 << 30, seconds=120, file_size=256 << 20, env=None):
    """Runs `python -c code` from the repository root under the bounds.

    Args:
        code: str. The program; it sees this checkout's packages first.
        memory: int. Resident bytes at which the child is killed.
        seconds: float. Wall-clock seconds at which it is killed.
        file_size: int. The largest file it may write (`RLIMIT_FSIZE`).
        env: optional dict of environment variables to add.

    Returns:
        An `Outcome`.
    """

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))
        space = memory + _ADDRESS_SPACE
        resource.setrlimit(resource.RLIMIT_AS, (space, space))

    environment = {**os.environ, **(env or {})}
    environment["PYTHONPATH"] = os.pathsep.join(
        [ROOT, *filter(None, [environment.get("PYTHONPATH")])]
    )
    environment.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    with tempfile.TemporaryFile("w+") as output:
        start = time.monotonic()
        child = subprocess.Popen(
            [sys.executable, "-c", code],
            cwd=ROOT,
            env=environment,
            stdout=output,
            stderr=subprocess.STDOUT,
            preexec_fn=limit,
        )
        peak, stopped = 0, None
        while child.poll() is None:
            peak = max(peak, _resident(child.pid))
            if peak > memory:
                stopped = "memory"
            elif time.monotonic() - start > seconds:
                stopped = "time"
            if stopped:
                child.kill()
                child.wait()
                break
            time.sleep(0.02)
        elapsed = time.monotonic() - start
        output.seek(0)
        return Outcome(child.returncode, output.read(), peak, elapsed, stopped)
