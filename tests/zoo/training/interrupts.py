"""A kill in the middle of `fit`, for the resumption tests.

`StopAt(epoch)` raises `Interrupt` at the start of that epoch, after the
run directory saved the state of the epochs before it. `start_worker` and
`finish` run a training worker (which may SIGKILL itself) in a process.
"""

import os
import subprocess
import sys

import keras


class Interrupt(Exception):
    """Raised by `StopAt`: stands for a kill of the training process."""


class StopAt(keras.callbacks.Callback):
    """Raises `Interrupt` at the start of epoch `epoch` (counted from 0)."""

    def __init__(self, epoch):
        super().__init__()
        self.epoch = epoch

    def on_epoch_begin(self, epoch, logs=None):
        if epoch == self.epoch:
            raise Interrupt()


def start_worker(script, arguments, backend):
    """`python script arguments...` on `backend`, from the repository root.

    Its stdout and stderr are piped; collect them with `finish`.
    """
    root = os.path.dirname(
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    )
    env = dict(os.environ, KERAS_BACKEND=backend, CUDA_VISIBLE_DEVICES="")
    return subprocess.Popen(
        [sys.executable, script, *arguments],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(process, timeout=300):
    """`(returncode, stdout, stderr)` of a started worker; killed after `timeout` s."""
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return process.returncode, stdout, stderr
