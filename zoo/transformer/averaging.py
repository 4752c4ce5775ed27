"""Checkpoint averaging: the mean of the weights of the last N checkpoints.

Vaswani et al. (2017, section 6.1) evaluate the average of the last 5
checkpoints (written every 10 minutes) of the base model. `Checkpoints`
writes `.weights.h5` files during `fit` every few minutes and keeps the
last `keep`; `average_checkpoints` loads their mean into a model.

A checkpoint is written under a hidden name and renamed into place, so a
killed process leaves no torn `checkpoint_<step>.weights.h5`. `Checkpoints`
keeps its list in `get_state()` / `set_state()`: a resumed run
(`zoo.training.harness`) averages only its own checkpoints, and drops unreadable
ones and those of the part of the run a kill threw away before training.
"""

import glob
import os
import sys
import time

import keras
import numpy as np


class Checkpoints(keras.callbacks.Callback):
    """Saves the model weights every `minutes` during `fit`, keeping `keep`.

    Files are `directory/checkpoint_<step>.weights.h5` (the weights, and
    the optimizer state of a compiled model); the oldest are deleted beyond
    `keep`. A last one is written when training ends. `paths` lists this
    run's checkpoints, oldest first.

    Args:
        directory: str. Where to write.
        minutes: float. Wall-clock interval between checkpoints.
        keep: int. Checkpoints kept on disk. Defaults to `5`.

    Example (a checkpoint after every step, the last two kept, averaged):
    >>> import os, tempfile
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile("sgd", "mse")
    >>> folder = tempfile.TemporaryDirectory()
    >>> checkpoints = Checkpoints(folder.name, minutes=1e-9, keep=2)
    >>> history = model.fit(np.ones((8, 2)), np.ones((8, 1)), batch_size=2,
    ...     callbacks=[checkpoints], verbose=0)
    >>> [os.path.basename(path) for path in checkpoints.paths]
    ['checkpoint_3.weights.h5', 'checkpoint_4.weights.h5']
    >>> sorted(os.listdir(folder.name)) == sorted(map(os.path.basename, checkpoints.paths))
    True
    >>> model = average_checkpoints(model, checkpoints.paths)
    >>> folder.cleanup()
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
        """Writes the checkpoint of the current step (once) and drops old ones.

        `fit` calls it every `minutes` and when training ends.

        Example:
        >>> import os, tempfile
        >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        >>> model.compile("sgd", "mse")
        >>> folder = tempfile.TemporaryDirectory()
        >>> checkpoints = Checkpoints(folder.name, minutes=60, keep=2)
        >>> checkpoints.set_model(model)
        >>> for step in range(3):
        ...     _ = model.train_on_batch(np.ones((2, 2)), np.ones((2, 1)))
        ...     checkpoints.save()
        >>> checkpoints.save()  # the same step: nothing new
        >>> sorted(os.listdir(folder.name))
        ['checkpoint_2.weights.h5', 'checkpoint_3.weights.h5']
        >>> folder.cleanup()
        """
        step = int(self.model.optimizer.iterations.numpy())
        name = f"checkpoint_{step}.weights.h5"
        path = os.path.join(self.directory, name)
        if self.paths and self.paths[-1] == path:
            return
        work = os.path.join(self.directory, f".writing-{name}")
        self.model.save_weights(work, overwrite=True)
        os.replace(work, path)
        self.paths.append(path)
        while len(self.paths) > self.keep:
            os.remove(self.paths.pop(0))
        self._last = time.time()

    def get_state(self):
        return {"paths": list(self.paths), "since": time.time() - self._last}

    def set_state(self, state):
        """Takes the checkpoint list of a saved run; deletes the other files.

        Listed checkpoints that cannot be read whole are skipped (with a
        warning); checkpoint files not listed (written after the state was
        saved) are deleted.
        """
        self.paths = []
        for name in state["paths"]:
            path = os.path.join(self.directory, os.path.basename(name))
            if readable(path):
                self.paths.append(path)
            else:
                print(f"warning: skipping torn checkpoint {path}", file=sys.stderr)
        for name in os.listdir(self.directory):
            path = os.path.join(self.directory, name)
            if path not in self.paths and os.path.isfile(path):
                os.remove(path)
        self._last = time.time() - state["since"]


def readable(path):
    """Whether every dataset of an HDF5 file can be read."""
    import h5py

    def read(name, item):
        if isinstance(item, h5py.Dataset):
            item[()]

    try:
        with h5py.File(path, "r") as f:
            f.visititems(read)
    except (OSError, ValueError, RuntimeError):
        return False
    return True


def checkpoint_paths(directory):
    """The `checkpoint_<step>.weights.h5` files of a directory, oldest first."""
    paths = glob.glob(os.path.join(directory, "checkpoint_*.weights.h5"))
    steps = {p: p[: -len(".weights.h5")].rsplit("_", 1)[1] for p in paths}
    return sorted((p for p in paths if steps[p].isdigit()), key=lambda p: int(steps[p]))


def average_checkpoints(model, paths):
    """Loads the element-wise mean of the checkpoints' weights into `model`.

    Args:
        model: a built `keras.Model` of the architecture of the checkpoints.
        paths: list of `.weights.h5` paths (e.g. the last N of
            `checkpoint_paths(directory)`).

    Returns:
        `model`, holding the averaged weights (accumulated in float64).

    Example:
    >>> import os
    >>> import tempfile
    >>> import keras
    >>> import numpy as np
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> with tempfile.TemporaryDirectory() as directory:
    ...     for step, value in [(10, 1.0), (20, 2.0), (30, 6.0)]:
    ...         model.set_weights([np.full((2, 1), value), np.zeros(1)])
    ...         model.save_weights(f"{directory}/checkpoint_{step}.weights.h5")
    ...     last_two = checkpoint_paths(directory)[-2:]
    ...     model = average_checkpoints(model, last_two)
    >>> [os.path.basename(path) for path in last_two]
    ['checkpoint_20.weights.h5', 'checkpoint_30.weights.h5']
    >>> model.get_weights()[0].ravel().tolist()  # (2 + 6) / 2
    [4.0, 4.0]
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
