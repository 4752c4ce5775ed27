"""Checkpoint averaging: the mean of the weights of the last N checkpoints.

Vaswani et al. (2017, section 6.1) evaluate the average of the last 5
checkpoints (written every 10 minutes) of the base model. `Checkpoints`
writes `.weights.h5` files during `fit` every few minutes and keeps the
last `keep`; `average_checkpoints` loads their mean into a model.
"""

import glob
import os
import time

import keras
import numpy as np


class Checkpoints(keras.callbacks.Callback):
    """Saves the model weights every `minutes` during `fit`, keeping `keep`.

    Files are `directory/checkpoint_<step>.weights.h5` (weights only, no
    optimizer state); the oldest are deleted beyond `keep`. A last one is
    written when training ends.

    Args:
        directory: str. Where to write.
        minutes: float. Wall-clock interval between checkpoints.
        keep: int. Checkpoints kept on disk. Defaults to `5`.
    """

    def __init__(self, directory, minutes, keep=5):
        super().__init__()
        if keep < 1 or minutes <= 0:
            raise ValueError(
                "`keep` and `minutes` must be positive. Received: "
                f"keep={keep}, minutes={minutes}"
            )
        self.directory = directory
        self.seconds = minutes * 60
        self.keep = keep
        self.paths = []
        self._last = None

    def on_train_begin(self, logs=None):
        os.makedirs(self.directory, exist_ok=True)
        self._last = time.time()

    def on_train_batch_end(self, batch, logs=None):
        if time.time() - self._last >= self.seconds:
            self.save()

    def on_train_end(self, logs=None):
        self.save()

    def save(self):
        step = int(self.model.optimizer.iterations.numpy())
        path = os.path.join(self.directory, f"checkpoint_{step}.weights.h5")
        if self.paths and self.paths[-1] == path:
            return
        self.model.save_weights(path, overwrite=True)
        self.paths.append(path)
        while len(self.paths) > self.keep:
            os.remove(self.paths.pop(0))
        self._last = time.time()


def checkpoint_paths(directory):
    """The `checkpoint_<step>.weights.h5` files of a directory, oldest first."""
    paths = glob.glob(os.path.join(directory, "checkpoint_*.weights.h5"))
    return sorted(paths, key=lambda p: int(p.rsplit("_", 1)[1].split(".")[0]))


def average_checkpoints(model, paths):
    """Loads the element-wise mean of the checkpoints' weights into `model`.

    Args:
        model: a built `keras.Model` of the architecture of the checkpoints.
        paths: list of `.weights.h5` paths (e.g. the last N of
            `checkpoint_paths(directory)`).

    Returns:
        `model`, holding the averaged weights (accumulated in float64).

    Example:
    >>> average_checkpoints(model, checkpoint_paths("runs/ckpt")[-5:])
    """
    if not paths:
        raise ValueError("No checkpoints to average. Received: paths=[]")
    total = None
    for path in paths:
        model.load_weights(path)
        values = [np.asarray(w, "float64") for w in model.get_weights()]
        total = values if total is None else [t + v for t, v in zip(total, values)]
    model.set_weights([t / len(paths) for t in total])
    return model
