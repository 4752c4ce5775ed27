"""The run directory: training that resumes after a kill.

Every `zoo train` script writes its resumable state to a run directory
(`--run-dir`, by default `<out>.run` beside the preset). Rerunning the same
command resumes there, and the run directory is deleted once the outputs are
written. Its layout:

```
<run-dir>/
  run.json            the command, the Keras backend and the options; a
                      rerun must match them
  lock                held (flock) by the process training
  <stage>/            one per `fit`: "train", "pretrain", a RAM table row
    epoch_<n>/        the state after n epochs (the last two are kept)
      state.json      epochs done, whether training ended, history, seconds
                      of training, the callbacks' state
      variables.npz   model variables (random seed states included),
                      optimizer variables, EarlyStopping's best weights,
                      PyTorch's global random generators (its unseeded
                      dropout draws from them)
    checkpoints/      the transformer's --average-last checkpoints
  results.json        RAM: the results of the rows already trained
```

A state that reads but holds impossible values is an error naming the file
and the field (`StateError`, exit status 2 from `zoo train`): an epoch
beyond the fit's epochs or other than its folder's, a malformed history or
callback state, NaN in the state or NaN or infinite saved variables; a
corrupt `run.json` is one too. A torn file (a kill, a full disk) is not: the
stage resumes from the state before it.

An epoch's state is written into a hidden folder and renamed into place, so
a kill leaves the previous state or the new one, never half of one. A
resumed `fit` redoes the interrupted epoch from its first batch, with the
weights, optimizer state, random seed states and callback state of the last
finished epoch, and the shuffled order of that epoch (a `tf.data` shuffle
with `reshuffle_each_iteration` draws one order per iterator: the resumed
process draws the orders of the finished epochs first). So a resumed run
ends with the weights of an uninterrupted one on the same machine. Time
budgets count the training time of the finished epochs.
"""

import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
import zipfile

import keras
import numpy as np

from keras_attention.presets.durable import sync_directory, write_json
from zoo.training.flags import check_folder, fail

try:
    import fcntl
except ImportError:  # Windows: a run directory is not locked.
    fcntl = None

RUN_FILE = "run.json"
STATE_FILE = "state.json"
VARIABLES_FILE = "variables.npz"
KEPT_STATES = 2
# Options that may change between a run and its resumption.
FREE_OPTIONS = ("verbose", "run_dir")


def default_run_dir(out):
    """`<out>.run`: the run directory of the output `out` (a preset or a file)."""
    return os.path.abspath(out).rstrip(os.sep) + ".run"


class RunDirectory:
    """The folder of one training run: resumable `fit`s and their state.

    Args:
        path: str or `None`. The run directory; `None` keeps nothing (no
            resumption).
        options: dict. The run's options (e.g. `vars(args)`); a rerun in
            the same folder must have the same ones, except `FREE_OPTIONS`.
        command: str. The command line, recorded in `run.json`.

    Opening a folder of another command's run, or one that another process
    is using, exits with status 2.

    Example:
    >>> import os, tempfile
    >>> import numpy as np
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile("sgd", "mse")
    >>> folder = tempfile.TemporaryDirectory()
    >>> run = RunDirectory(os.path.join(folder.name, "run"), {"epochs": 2})
    run directory .../run
    >>> history = run.stage("train").fit(
    ...     model, np.ones((4, 2)), epochs=2, y=np.ones((4, 1)), verbose=0)
    >>> sorted(os.listdir(os.path.join(run.path, "train")))  # resumable
    ['epoch_1', 'epoch_2']
    >>> run.finish()  # the outputs are written: the state is no longer needed
    >>> os.path.exists(run.path)
    False
    >>> folder.cleanup()
    """

    def __init__(self, path, options, command=""):
        self.path = None if path is None else os.path.abspath(path)
        self._lock = None
        if self.path is None:
            return
        check_folder(self.path, "--run-dir")
        self._lock = self._take_lock()
        try:
            self._open(options, command)
        except SystemExit:  # refused: another process may take the folder
            if self._lock is not None:
                os.close(self._lock)
                self._lock = None
            raise

    def _open(self, options, command):
        """Records a new run in `run.json`, or checks a recorded one resumes."""
        options = json.loads(
            json.dumps({k: v for k, v in options.items() if k not in FREE_OPTIONS})
        )
        run_file = os.path.join(self.path, RUN_FILE)
        backend = keras.backend.backend()
        record = {"command": command, "backend": backend, "options": options}
        if os.path.exists(run_file):
            recorded, recorded_backend = _read_run_file(run_file)
            if recorded_backend != backend and _holds_work(self.path):
                # Its state would load, but the run would not go on as it
                # would have there (data order, random draws, rounding).
                fail(
                    f"--run-dir {self.path} holds a run trained on the "
                    f"{recorded_backend!r} backend; this process runs {backend!r}: "
                    f"resume it with KERAS_BACKEND={recorded_backend}, or delete "
                    "the folder"
                )
            changed = sorted(
                k
                for k in set(recorded) | set(options)
                if recorded.get(k) != options.get(k)
            )
            if changed and not _holds_work(self.path):
                # A run that failed before training (a typo in --data, say)
                # left only its options: the corrected command starts over.
                print(f"run directory {self.path}: nothing trained yet, starting over")
                write_json(run_file, record, indent=1)
            elif changed:
                shown = ", ".join(
                    f"{k}={recorded.get(k)!r} (now {options.get(k)!r})" for k in changed
                )
                fail(
                    f"--run-dir {self.path} holds a run of other options: {shown}; "
                    "rerun that command to resume it, or delete the folder"
                )
            else:
                print(f"run directory {self.path}: resuming")
        else:
            write_json(run_file, record, indent=1)
            print(f"run directory {self.path}")

    def _take_lock(self):
        if fcntl is None:
            return None
        fd = os.open(os.path.join(self.path, "lock"), os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            fail(f"--run-dir {self.path} is in use by another process")
        return fd

    def stage(self, name):
        """The `Stage` of one `fit` of the run (e.g. "train").

        Example:
        >>> import os, tempfile
        >>> folder = tempfile.TemporaryDirectory()
        >>> run = RunDirectory(os.path.join(folder.name, "run"), {})
        run directory .../run
        >>> stage = run.stage("pretrain")
        >>> os.path.relpath(stage.path, run.path), stage.initial_epoch
        ('pretrain', 0)
        >>> RunDirectory(None, {}).stage("train").path is None  # keeps nothing
        True
        >>> folder.cleanup()
        """
        return Stage(None if self.path is None else os.path.join(self.path, name))

    def read(self, name, default=None):
        """A JSON value the run stored with `write`, or `default`.

        Example:
        >>> import os, tempfile
        >>> folder = tempfile.TemporaryDirectory()
        >>> run = RunDirectory(os.path.join(folder.name, "run"), {})
        run directory .../run
        >>> run.read("results.json", default=[])  # nothing stored yet
        []
        >>> run.write("results.json", [{"glimpses": 4, "error": 0.25}])
        >>> run.read("results.json")
        [{'glimpses': 4, 'error': 0.25}]
        >>> folder.cleanup()
        """
        if self.path is None:
            return default
        path = os.path.join(self.path, name)
        if not os.path.exists(path):
            return default
        return _read_json(path)

    def write(self, name, value):
        """Stores a JSON value in the run directory (atomically).

        Example:
        >>> import os, tempfile
        >>> folder = tempfile.TemporaryDirectory()
        >>> run = RunDirectory(os.path.join(folder.name, "run"), {})
        run directory .../run
        >>> run.write("results.json", {"rows_done": 2})
        >>> sorted(os.listdir(run.path)), run.read("results.json")
        (['lock', 'results.json', 'run.json'], {'rows_done': 2})
        >>> RunDirectory(None, {}).write("results.json", {})  # keeps nothing
        >>> folder.cleanup()
        """
        if self.path is not None:
            write_json(os.path.join(self.path, name), value, indent=1)

    def finish(self):
        """Deletes the run directory: its work is in the written outputs.

        Example:
        >>> import os, tempfile
        >>> folder = tempfile.TemporaryDirectory()
        >>> run = RunDirectory(os.path.join(folder.name, "run"), {})
        run directory .../run
        >>> run.finish()
        >>> os.listdir(folder.name)  # the lock is released, the folder gone
        []
        >>> folder.cleanup()
        """
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None
        if self.path is not None:
            shutil.rmtree(self.path, ignore_errors=True)


class Stage:
    """One resumable `fit`: its state after each epoch, restored on a rerun.

    Created by `RunDirectory.stage`. `initial_epoch` and `seconds` tell
    where a resumed stage stands before `fit`.

    Example (a `fit` killed in its second epoch, then resumed):
    >>> import tempfile
    >>> import numpy as np
    >>> class Kill(keras.callbacks.Callback):
    ...     def on_epoch_end(self, epoch, logs=None):
    ...         if epoch == 1:  # before the stage saves epoch 2
    ...             raise RuntimeError("killed")
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile("sgd", "mse")
    >>> x, y = np.ones((4, 2)), np.ones((4, 1))
    >>> folder = tempfile.TemporaryDirectory()
    >>> try:
    ...     Stage(folder.name).fit(model, x, 3, [Kill()], y=y, verbose=0)
    ... except RuntimeError as error:
    ...     print(error)
    killed
    >>> stage = Stage(folder.name)  # a rerun of the command
    resuming ...: 1 epochs done in ... min
    >>> history = stage.fit(model, x, 3, y=y, verbose=0)
    >>> history.epoch, len(history.history["loss"])  # the whole stage
    ([0, 1, 2], 3)
    >>> folder.cleanup()
    """

    def __init__(self, path):
        self.path = path
        self.state = None
        self._arrays = None
        self.seconds = 0.0
        if path is None:
            return
        os.makedirs(path, exist_ok=True)
        for name in os.listdir(path):  # Folders a kill left half written.
            if name.startswith("."):
                shutil.rmtree(os.path.join(path, name), ignore_errors=True)
        for folder in self._saved()[::-1]:
            try:
                self.state, self._arrays = _read_state(folder)
                break
            except StateError:
                raise
            except (OSError, ValueError, KeyError, zipfile.BadZipFile) as e:
                print(
                    f"warning: skipping unreadable state {folder}: {e}", file=sys.stderr
                )
        if self.state is None:  # A fresh start: no files of a killed attempt.
            for name in os.listdir(path):
                _remove(os.path.join(path, name))
        else:
            self.seconds = self.state["seconds"]
            print(
                f"resuming {os.path.basename(path)}: {self.initial_epoch} epochs "
                f"done in {self.seconds / 60:.1f} min"
                + (", training ended" if self.state["finished"] else "")
            )

    @property
    def initial_epoch(self):
        """The epochs done before this process: where `fit` starts.

        Example:
        >>> import tempfile
        >>> import numpy as np
        >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        >>> model.compile("sgd", "mse")
        >>> folder = tempfile.TemporaryDirectory()
        >>> Stage(folder.name).initial_epoch  # a fresh stage
        0
        >>> history = Stage(folder.name).fit(
        ...     model, np.ones((4, 2)), 2, y=np.ones((4, 1)), verbose=0)
        >>> Stage(folder.name).initial_epoch
        resuming ...: 2 epochs done in ... min, training ended
        2
        >>> folder.cleanup()
        """
        return 0 if self.state is None else self.state["epoch"]

    def _state_file(self):
        return os.path.join(self.path, f"epoch_{self.initial_epoch}", STATE_FILE)

    @property
    def finished(self):
        """Whether the stage's training ended (all epochs, or a callback).

        A finished stage's `fit` runs no epoch again.

        Example:
        >>> import tempfile
        >>> import numpy as np
        >>> from zoo.training.callbacks import StepBudget
        >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        >>> model.compile("sgd", "mse")
        >>> folder = tempfile.TemporaryDirectory()
        >>> stage = Stage(folder.name)
        >>> history = stage.fit(model, np.ones((4, 2)), 5, [StepBudget(2)],
        ...     y=np.ones((4, 1)), batch_size=2, verbose=0)
        >>> stage.finished, Stage(folder.name).finished  # stopped by the budget
        resuming ...: 1 epochs done in ... min, training ended
        (False, True)
        >>> folder.cleanup()
        """
        return self.state is not None and self.state["finished"]

    def _saved(self):
        """The stage's `epoch_<n>` folders, oldest first."""
        epochs = []
        for name in os.listdir(self.path):
            number = name[len("epoch_") :]
            if name.startswith("epoch_") and number.isdigit():
                epochs.append(int(number))
        return [os.path.join(self.path, f"epoch_{n}") for n in sorted(epochs)]

    def fit(self, model, x, epochs, callbacks=(), **kwargs):
        """`model.fit(x, epochs=epochs, ...)`, resumed from the last state.

        A stage whose training had ended (all epochs, or a callback stopped
        it) runs no epoch: it restores the final state, and the callbacks'
        `on_train_end` (e.g. EarlyStopping restoring the best weights)
        runs again.

        Returns:
            The `keras.callbacks.History` of the whole stage, epochs before
            the kill included.

        Example (a rerun of a finished stage trains no more):
        >>> import tempfile
        >>> import numpy as np
        >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        >>> model.compile("sgd", "mse")
        >>> x, y = np.ones((4, 2)), np.ones((4, 1))
        >>> folder = tempfile.TemporaryDirectory()
        >>> history = Stage(folder.name).fit(model, x, 2, y=y, verbose=0)
        >>> steps = int(model.optimizer.iterations)
        >>> history = Stage(folder.name).fit(model, x, 2, y=y, verbose=0)
        resuming ...: 2 epochs done in ... min, training ended
        >>> len(history.history["loss"]), int(model.optimizer.iterations) == steps
        (2, True)
        >>> folder.cleanup()
        """
        callbacks = list(callbacks)
        if self.path is None:
            start = time.time()
            history = model.fit(x, epochs=epochs, callbacks=callbacks, **kwargs)
            self.seconds = time.time() - start
            return history
        initial_epoch = self.initial_epoch
        if initial_epoch > epochs:
            raise StateError(
                f"{self._state_file()}: epoch={initial_epoch} is beyond this "
                f"fit's {epochs} epochs, so it is not a state of this run. "
                f"Delete {self.path} to train this stage again."
            )
        if self.finished:
            epochs = initial_epoch
        elif hasattr(x, "element_spec"):  # A tf.data dataset.
            _draw_orders(x, initial_epoch)
        backup = _Backup(self, epochs, callbacks)
        history = model.fit(
            x,
            epochs=epochs,
            initial_epoch=initial_epoch,
            callbacks=callbacks + [backup],
            **kwargs,
        )
        self.seconds = backup.seconds()
        history.history = {k: list(v) for k, v in backup.history.items()}
        history.epoch = list(range(backup.epochs_done))
        return history

    def save(self, state, arrays):
        """Writes the state of `state["epoch"]` epochs, then drops old ones.

        Called after each epoch by `fit`; the last `KEPT_STATES` are kept.

        Example:
        >>> import os, tempfile
        >>> import numpy as np
        >>> folder = tempfile.TemporaryDirectory()
        >>> stage = Stage(folder.name)
        >>> for epoch in (1, 2, 3):
        ...     state = {"epoch": epoch, "finished": epoch == 3, "seconds": 0.0,
        ...              "history": {}, "callbacks": []}
        ...     stage.save(state, {"model/00000": np.zeros(2)})
        >>> sorted(os.listdir(folder.name))
        ['epoch_2', 'epoch_3']
        >>> Stage(folder.name).initial_epoch
        resuming ...: 3 epochs done in ... min, training ended
        3
        >>> folder.cleanup()
        """
        folder = os.path.join(self.path, f"epoch_{state['epoch']}")
        work = tempfile.mkdtemp(prefix=".saving-", dir=self.path)
        write_json(os.path.join(work, STATE_FILE), state, indent=1)
        with open(os.path.join(work, VARIABLES_FILE), "wb") as f:
            np.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        _remove(folder)
        os.rename(work, folder)
        sync_directory(self.path)
        for old in self._saved()[:-KEPT_STATES]:
            _remove(old)


class _Backup(keras.callbacks.Callback):
    """Saves a `Stage` after every epoch and restores it when `fit` begins.

    It comes last in the callback list, so it restores the state of
    EarlyStopping and ReduceLROnPlateau after their `on_train_begin` reset
    it, and saves after every other callback's `on_epoch_end`.
    """

    def __init__(self, stage, epochs, callbacks):
        super().__init__()
        self.stage = stage
        self.epochs = epochs
        self.callbacks = callbacks
        state = stage.state or {"history": {}, "epoch": 0}
        self.history = {k: list(v) for k, v in state["history"].items()}
        self.epochs_done = state["epoch"]
        self._start = time.time()

    def seconds(self):
        return self.stage.seconds + time.time() - self._start

    def on_train_begin(self, logs=None):
        self._start = time.time()
        if self.stage.state is None:
            return
        state, arrays = self.stage.state, self.stage._arrays
        optimizer = self.model.optimizer
        if optimizer is not None and not optimizer.built:
            optimizer.build(self.model.trainable_variables)
        _assign(self.model.variables, arrays, "model")
        if optimizer is not None:
            _assign(optimizer.variables, arrays, "optimizer")
        _set_global_generators(arrays)
        saved = state["callbacks"]
        stateful = [c for c in self.callbacks if _stateful(c)]
        if [type(c).__name__ for c in stateful] != [c["class"] for c in saved]:
            raise ValueError(
                "The callbacks differ from the saved run's. Received: "
                f"{[type(c).__name__ for c in stateful]}, saved "
                f"{[c['class'] for c in saved]}"
            )
        for index, (callback, entry) in enumerate(zip(stateful, saved)):
            best = _array_list(arrays, f"best{index}")
            _set_callback_state(callback, entry["state"], best)

    def on_epoch_end(self, epoch, logs=None):
        for key, value in (logs or {}).items():
            self.history.setdefault(key, []).append(float(value))
        self.epochs_done = epoch + 1
        arrays = _arrays("model", self.model.variables)
        arrays.update(_global_generators())
        if self.model.optimizer is not None:
            arrays.update(_arrays("optimizer", self.model.optimizer.variables))
        saved = []
        for index, callback in enumerate(c for c in self.callbacks if _stateful(c)):
            state, best = _callback_state(callback)
            saved.append({"class": type(callback).__name__, "state": state})
            if best is not None:
                arrays.update(
                    {f"best{index}/{i:05d}": np.asarray(w) for i, w in enumerate(best)}
                )
        state = {
            "epoch": epoch + 1,
            "finished": bool(self.model.stop_training) or epoch + 1 >= self.epochs,
            "seconds": self.seconds(),
            "history": self.history,
            "callbacks": saved,
        }
        self.stage.save(state, arrays)


def _draw_orders(dataset, epochs):
    """Draws the shuffled orders of `epochs` done epochs from a `tf.data` dataset.

    A shuffle with `reshuffle_each_iteration` draws a new order for each
    iterator. Keras's `fit` (3.x) makes one iterator an epoch; on TensorFlow
    two when it knows the dataset's number of batches (the next one is made
    at the end of each epoch). On JAX and PyTorch that next one is a Python
    generator over the dataset, which makes its iterator only when read:
    one an epoch. `test_training_resume.py` (TensorFlow) and
    `test_resume_backends.py` (JAX, PyTorch) check both cases.
    """
    sized = int(dataset.cardinality()) >= 0
    per_epoch = 2 if sized and keras.backend.backend() == "tensorflow" else 1
    for _ in range(per_epoch * epochs):
        iter(dataset)


# Callback state: zoo callbacks define get_state()/set_state(); two Keras
# callbacks keep state between epochs in public attributes.
_KERAS_STATE = {
    keras.callbacks.EarlyStopping: ("wait", "stopped_epoch", "best", "best_epoch"),
    keras.callbacks.ReduceLROnPlateau: ("wait", "best", "cooldown_counter"),
}


def _keras_fields(callback):
    for cls, fields in _KERAS_STATE.items():
        if isinstance(callback, cls):
            return fields
    return None


def _stateful(callback):
    return hasattr(callback, "get_state") or _keras_fields(callback) is not None


def _callback_state(callback):
    """`(json_state, best_weights or None)` of a stateful callback."""
    if hasattr(callback, "get_state"):
        return callback.get_state(), None
    state = {}
    for field in _keras_fields(callback):
        value = getattr(callback, field, None)
        state[field] = None if value is None else float(value)
    return state, getattr(callback, "best_weights", None)


def _set_callback_state(callback, state, best):
    if hasattr(callback, "set_state"):
        callback.set_state(state)
        return
    for field in _keras_fields(callback):
        value = state[field]
        if value is not None and field != "best":
            value = int(value)
        setattr(callback, field, value)
    if isinstance(callback, keras.callbacks.EarlyStopping):
        callback.best_weights = best


def _arrays(prefix, variables):
    return {f"{prefix}/{i:05d}": np.asarray(v.numpy()) for i, v in enumerate(variables)}


def _global_generators():
    """The states of the backend's global random generators, where Keras uses them.

    On PyTorch, a `keras.layers.Dropout` without a `seed` draws its masks
    from PyTorch's global generators (Keras's fast path), not from a seed
    state among the model's variables; other backends keep every layer's
    seed state in its variables.
    """
    if keras.backend.backend() != "torch":
        return {}
    import torch

    arrays = {"torch_cpu/00000": torch.get_rng_state().numpy()}
    if torch.cuda.is_available():
        for index, state in enumerate(torch.cuda.get_rng_state_all()):
            arrays[f"torch_cuda/{index:05d}"] = state.numpy()
    return arrays


def _set_global_generators(arrays):
    """Restores what `_global_generators` saved (nothing saved: nothing)."""
    if keras.backend.backend() != "torch":
        return
    import torch

    cpu = _array_list(arrays, "torch_cpu")
    if cpu:
        torch.set_rng_state(torch.from_numpy(cpu[0].copy()))
    cuda = _array_list(arrays, "torch_cuda")
    if cuda and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([torch.from_numpy(a.copy()) for a in cuda])


def _array_list(arrays, prefix):
    keys = sorted(k for k in arrays if k.startswith(prefix + "/"))
    return [arrays[k] for k in keys] if keys else None


def _assign(variables, arrays, prefix):
    values = _array_list(arrays, prefix) or []
    if len(values) != len(variables) or any(
        tuple(v.shape) != a.shape for v, a in zip(variables, values)
    ):
        raise ValueError(
            f"The saved {prefix} state does not fit this model: "
            f"{len(values)} arrays for {len(variables)} variables"
        )
    for variable, value in zip(variables, values):
        variable.assign(value)


class StateError(ValueError):
    """A file of a run directory that reads but holds impossible values.

    Unlike a torn file (a stage then falls back to its state before), it is
    an error: training on from an edited or diverged state would write a
    half-trained or NaN preset. The message names the file and the field.

    Example:
    >>> error = StateError("run/train/epoch_99/state.json: epoch 99 > epochs 4")
    >>> isinstance(error, ValueError)  # the CLI prints it in one line, exit 2
    True
    """


def _read_json(path):
    """A JSON file of the run directory, with errors naming it."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path} is not valid JSON: {e}") from e


def _read_run_file(path):
    """The recorded options and backend of `run.json` (a run recorded before
    the backend was, trained on TensorFlow); exits with status 2 if corrupt."""
    try:
        recorded = _read_json(path)
    except ValueError as e:
        fail(f"{e}; delete the run directory {os.path.dirname(path)} to start over")
    options = recorded.get("options") if isinstance(recorded, dict) else None
    if not isinstance(options, dict):
        fail(
            f"{path}: `options` must be a JSON object. Received: {options!r:.80}; "
            f"delete the run directory {os.path.dirname(path)} to start over"
        )
    backend = recorded.get("backend", "tensorflow")
    if not isinstance(backend, str):
        fail(
            f"{path}: `backend` must be a string. Received: {backend!r:.80}; "
            f"delete the run directory {os.path.dirname(path)} to start over"
        )
    return options, backend


def _number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_state(state, path, epoch):
    """Refuses a `state.json` of impossible values, naming the field."""

    def refuse(field, value, expected):
        raise StateError(
            f"{path}: `{field}` must be {expected}. Received: {value!r:.80}"
        )

    if not isinstance(state, dict):
        refuse("state", state, "a JSON object")
    if type(state.get("epoch")) is not int or state["epoch"] != epoch:
        refuse("epoch", state.get("epoch"), f"{epoch}, the number of its folder")
    if not isinstance(state.get("finished"), bool):
        refuse("finished", state.get("finished"), "true or false")
    seconds = state.get("seconds")
    if not _number(seconds) or not 0 <= seconds < float("inf"):
        refuse("seconds", seconds, "a finite number >= 0")
    history = state.get("history")
    if not isinstance(history, dict):
        refuse("history", history, "a JSON object")
    for key, values in history.items():
        if not isinstance(values, list) or len(values) > epoch:
            refuse(f"history.{key}", values, f"a list of at most {epoch} numbers")
        for index, value in enumerate(values):
            if not _number(value) or not np.isfinite(value):
                refuse(f"history.{key}[{index}]", value, "a finite number")
    callbacks = state.get("callbacks")
    if not isinstance(callbacks, list) or not all(
        isinstance(c, dict) and isinstance(c.get("class"), str) for c in callbacks
    ):
        refuse("callbacks", callbacks, "a list of {class, state} objects")
    for index, callback in enumerate(callbacks):
        for field, value in (callback.get("state") or {}).items():
            if isinstance(value, float) and np.isnan(value):
                refuse(f"callbacks[{index}].state.{field}", value, "a number, not NaN")


def _check_arrays(arrays, path):
    """Refuses saved variables that are not finite, naming the array."""
    for key, value in arrays.items():
        if value.dtype.kind in "fc" and not np.isfinite(value).all():
            raise StateError(
                f"{path}: {key} holds NaN or infinite values (the run diverged, "
                "or the file was edited); training on would train to NaN. "
                f"Delete {os.path.dirname(os.path.dirname(path))} to start over."
            )


def _read_state(folder):
    """`(state, arrays)` of an `epoch_<n>` folder, checked.

    Raises:
        StateError: the state holds impossible values (named).
        OSError, ValueError, zipfile.BadZipFile: a torn or missing file.
    """
    path = os.path.join(folder, STATE_FILE)
    state = _read_json(path)
    _check_state(state, path, int(os.path.basename(folder)[len("epoch_") :]))
    with np.load(os.path.join(folder, VARIABLES_FILE)) as data:
        arrays = {key: data[key] for key in data.files}
    _check_arrays(arrays, os.path.join(folder, VARIABLES_FILE))
    return state, arrays


def _holds_work(path):
    """Whether a run directory holds any state beyond `run.json` and the lock.

    Example:
    >>> import tempfile
    >>> folder = tempfile.TemporaryDirectory()
    >>> os.makedirs(os.path.join(folder.name, "train"))  # a stage, no epoch
    >>> open(os.path.join(folder.name, RUN_FILE), "w").close()
    >>> _holds_work(folder.name)
    False
    >>> open(os.path.join(folder.name, "results.json"), "w").close()
    >>> _holds_work(folder.name)
    True
    >>> folder.cleanup()
    """
    for root, _, files in os.walk(path):
        kept = set(files) - ({RUN_FILE, "lock"} if root == path else set())
        if kept:
            return True
    return False


def _remove(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)
