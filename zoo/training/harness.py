"""The training harness: what every `zoo train` script shares.

A script parses its arguments (the shared ones from
`zoo.training.flags.add_training_arguments`, plus its own), opens a
`TrainingRun`, builds its data and model, and hands `fit` to the run:

```
args = parse_args(argv)
run = TrainingRun("zoo.seq2seq.train", args, argv)   # checks outputs, seeds,
with run.strategy.scope():                           # run directory, strategy
    model = ...
fit = run.fit(model, train_ds, validation_data=val_ds)  # budgets, resumption
metadata = run.metadata("translation en->es", data, fit.metrics())
run.save_preset(model, metadata)                     # --results, --history
run.finish()
```

The run owns: the command line (recorded exactly), output checks before any
data is loaded (a bad path exits 2 with one `error:` line), the random seed,
the strategy (`zoo.training.strategy`: a `tf.distribute` strategy on
TensorFlow, `keras.distribution.DataParallel` on JAX), static shapes, the time and step budgets
(`--max-minutes`, `--max-steps`), the run directory that resumes a killed
run (`zoo.training.run_directory`), history rounding, and the metadata every preset
records as data: the command, options, seed, library versions and the
hardware detected (devices, CPU model, usable cores). The per-epoch history
goes to its own file (`--history`, see `history_file`), which the metadata
names as `metrics.history_file`: a preset holds provenance, not a run log.
"""

import dataclasses
import importlib
import json
import os
import platform
import shlex
import sys
import warnings

import keras

from keras_attention.presets.durable import write_json
from zoo.training.callbacks import StepBudget, TimeBudget
from zoo.training.flags import check_file, check_folder, fail
from zoo.training.run_directory import RunDirectory, Stage, default_run_dir
from zoo.training.strategy import strategy_for

__all__ = [
    "Fit",
    "RunDirectory",
    "Stage",
    "TrainingRun",
    "command_line",
    "compile_classifier",
    "hardware",
    "history_file",
    "round_history",
    "strategy_for",
    "versions",
]

HISTORY_DIGITS = 4


def command_line(module, argv=None):
    """The command that ran `python -m module` with `argv`, shell-quoted.

    Args:
        module: str. The script's module, e.g. `"zoo.ram.train"`.
        argv: list of str, or `None` for `sys.argv[1:]`.

    Example:
    >>> command_line("zoo.ram.train", ["--out", "my preset"])
    "python -m zoo.ram.train --out 'my preset'"
    """
    argv = sys.argv[1:] if argv is None else argv
    return " ".join(["python", "-m", module, *(shlex.quote(a) for a in argv)])


def round_history(history, digits=HISTORY_DIGITS):
    """A Keras history (`History` or its dict) with floats of `digits` decimals.

    Example:
    >>> round_history({"loss": [0.123456, 0.1]})
    {'loss': [0.1235, 0.1]}
    """
    history = getattr(history, "history", history)
    return {
        k: [round(float(v), digits) for v in values] for k, values in history.items()
    }


def history_file(out):
    """Where the per-epoch history of the preset `out` goes by default.

    A preset written into a checkout's package, `zoo/<family>/presets/<name>`,
    has its history in that checkout's `experiments/<family>/history/
    <name>.json` (returned relative to the checkout, as its metadata records
    it); any other preset beside itself, in `<out>.history.json`.

    Args:
        out: str. The preset folder (`--out`).

    Returns:
        `(path, recorded)`: where to write, and the path the metadata names.

    Example:
    >>> path, recorded = history_file("/src/zoo/ram/presets/ram_small")
    >>> path, recorded
    ('/src/experiments/ram/history/ram_small.json', 'experiments/ram/history/ram_small.json')
    >>> history_file("runs/my_preset")
    ('runs/my_preset.history.json', 'runs/my_preset.history.json')
    """
    folder = os.path.abspath(out)
    presets = os.path.dirname(folder)
    family = os.path.dirname(presets)
    package = os.path.dirname(family)
    if os.path.basename(presets) == "presets" and os.path.basename(package) == "zoo":
        name = os.path.basename(folder)
        recorded = f"experiments/{os.path.basename(family)}/history/{name}.json"
        return os.path.join(os.path.dirname(package), *recorded.split("/")), recorded
    path = os.path.normpath(out) + ".history.json"
    return path, path


def _cpu_model():
    """The CPU's model name from `/proc/cpuinfo`, else `platform.processor()`."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Hardware", "cpu model"):
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or None


def _usable_cores():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # Not Linux.
        return os.cpu_count()


def hardware():
    """The machine this process runs on, as data.

    Returns:
        dict: `machine` (e.g. `"x86_64"`), `cpu` (the model name, or `None`),
        `cores` (the cores this process may run on, `os.sched_getaffinity`),
        `cpu_count` (the machine's), and `devices`: one dict per device
        TensorFlow sees (`tf.config.list_physical_devices`): its `name`,
        `type` (`"CPU"`, `"GPU"`, `"TPU"`) and, where TensorFlow knows it, the
        `model` (e.g. the GPU's name). Without TensorFlow (a run from
        token-id arrays), the devices Keras's backend lists
        (`keras.distribution.list_devices`; none on PyTorch), by `name` and
        `type`.

    Example:
    >>> info = hardware()
    >>> sorted(info)
    ['cores', 'cpu', 'cpu_count', 'devices', 'machine']
    >>> "CPU" in [device["type"] for device in info["devices"]]
    True
    """
    try:
        import tensorflow as tf
    except ImportError:
        devices = _keras_devices()
    else:
        devices = _tensorflow_devices(tf)
    return {
        "machine": platform.machine(),
        "cpu": _cpu_model(),
        "cores": _usable_cores(),
        "cpu_count": os.cpu_count(),
        "devices": devices,
    }


def _keras_devices():
    """The devices Keras's backend lists, by `name` and `type` (none on PyTorch,
    which has no `keras.distribution`)."""
    try:
        names = keras.distribution.list_devices()
    except (AttributeError, NotImplementedError):
        return []
    return [{"name": name, "type": name.split(":")[0].upper()} for name in names]


def _tensorflow_devices(tf):
    """One dict per device TensorFlow sees: `name`, `type`, and `model`."""
    devices = []
    for device in tf.config.list_physical_devices():
        entry = {"name": device.name, "type": device.device_type}
        if device.device_type != "CPU":
            try:
                details = tf.config.experimental.get_device_details(device)
            except (ValueError, RuntimeError):
                details = {}
            if details.get("device_name"):
                entry["model"] = details["device_name"]
        devices.append(entry)
    return devices


def versions():
    """The versions of Python and the libraries a run trained with.

    TensorFlow and keras-hub are named when they import: a run from token-id
    arrays (`train transformer --data FILE.npz`) trains without them.

    Example:
    >>> sorted(versions())
    ['keras', 'keras_attention', 'keras_hub', 'numpy', 'python', 'tensorflow']
    """
    import numpy as np

    import keras_attention

    found = {"python": platform.python_version(), "keras": keras.__version__}
    for name in ("keras_hub", "tensorflow"):
        try:
            found[name] = importlib.import_module(name).__version__
        except ImportError:
            continue
    found["numpy"] = np.__version__
    found["keras_attention"] = keras_attention.__version__
    return found


def compile_classifier(model, learning_rate, clipnorm=None, weighted=False):
    """Compiles `model` with Adam, sparse cross-entropy on logits and accuracy.

    The recipe the zoo's classifiers and captioners share.

    Args:
        model: a Keras model whose outputs are logits.
        learning_rate: float. Adam's learning rate.
        clipnorm: float or `None`. Adam's gradient norm clipping.
        weighted: bool. Accuracy as a `weighted_metrics` entry (weighted by
            the sample weights, e.g. padding masks) instead of `metrics`.

    Example:
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(3)])
    >>> compile_classifier(model, 0.01, clipnorm=1.0)
    >>> type(model.optimizer).__name__, float(model.optimizer.clipnorm)
    ('Adam', 1.0)
    """
    accuracy = {"weighted_metrics" if weighted else "metrics": ["accuracy"]}
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate, clipnorm=clipnorm),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        **accuracy,
    )


@dataclasses.dataclass
class Fit:
    """What one `TrainingRun.fit` did.

    Attributes:
        history: dict. The per-epoch logs of the whole fit (epochs before a
            kill included), rounded to `HISTORY_DIGITS` decimals.
        seconds: float. Training seconds (a resumed fit counts the time
            before the kill).
        epochs: int. Epochs run.
        steps: int. Optimizer steps run.

    Example:
    >>> fit = Fit(history={"loss": [0.5, 0.25]}, seconds=90.0, epochs=2, steps=40)
    >>> fit.metrics()  # the history goes to its own file (`--history`)
    {'train_minutes': 1.5, 'epochs': 2, 'steps': 40}
    """

    history: dict
    seconds: float
    epochs: int
    steps: int

    def metrics(self, minutes_digits=1):
        """`train_minutes`, `epochs` and `steps`, for metadata.

        Args:
            minutes_digits: int. Decimals of `train_minutes`. Defaults to `1`.

        Example:
        >>> fit = Fit(history={"loss": [0.5]}, seconds=10.0, epochs=1, steps=8)
        >>> fit.metrics()["train_minutes"], fit.metrics(minutes_digits=3)["train_minutes"]
        (0.2, 0.167)
        """
        return {
            "train_minutes": round(self.seconds / 60, minutes_digits),
            "epochs": self.epochs,
            "steps": self.steps,
        }


class TrainingRun:
    """One run of a training script: outputs, seed, strategy, budgets, metadata.

    Opening a run checks the output paths (`--out` a preset folder,
    `--results` a file, and the script's own `folders` and `files`) before
    anything is loaded, picks the `--strategy` (`zoo.training.strategy`; a
    `--batch-size` it cannot split is refused), opens the run directory
    (`--run-dir`, by default `<out>.run`, else `<results>.run`, else none)
    and seeds Keras's random generators with `--seed`. Build and compile
    the model within `run.strategy.scope()`; `fit` runs within it.

    Args:
        module: str. The script's module (`"zoo.seq2seq.train"`), for the
            recorded command.
        args: `argparse.Namespace` with the options of
            `zoo.training.flags.add_training_arguments`.
        argv: list of str, or `None` for `sys.argv[1:]`: the command line.
        folders: `(option, path)` pairs of other folders the script writes.
        files: `(option, path)` pairs of other files the script writes.

    Example:
    >>> import argparse
    >>> import numpy as np
    >>> from zoo.training.flags import add_training_arguments
    >>> parser = argparse.ArgumentParser()
    >>> add_training_arguments(parser, epochs=3, verbose=0, out_required=False)
    >>> argv = ["--max-steps", "2"]
    >>> run = TrainingRun("my.train", parser.parse_args(argv), argv)
    >>> run.command
    'python -m my.train --max-steps 2'
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile("sgd", "mse")
    >>> fit = run.fit(model, np.ones((8, 2)), y=np.ones((8, 1)), batch_size=2)
    trained 1 epochs (2 steps) in 0.0 min
    stopped after 2 steps: the step budget (--max-steps)
    >>> sorted(run.metadata("regression", {}, fit.metrics())["hardware"])
    ['cores', 'cpu', 'cpu_count', 'devices', 'machine']
    """

    def __init__(self, module, args, argv=None, folders=(), files=()):
        self.args = args
        self.command = command_line(module, argv)
        if args.out:
            check_folder(args.out, "--out", preset=True)
        if args.results:
            check_file(args.results, "--results")
        self.history_file = None  # (path, as recorded) of `--history`.
        if args.history and not args.out:
            fail(f"--history {args.history} needs --out (the preset it is of)")
        if args.out:
            self.history_file = (
                (args.history, args.history) if args.history else history_file(args.out)
            )
            check_file(self.history_file[0], "--history")
        for option, path in folders:
            if path:
                check_folder(path, option)
        for option, path in files:
            if path:
                check_file(path, option)
        self.strategy = strategy_for(args.strategy)
        try:
            self.strategy.check_batch_size(getattr(args, "batch_size", None))
        except ValueError as e:
            fail(str(e))
        run_dir = args.run_dir
        if run_dir is None and (args.out or args.results):
            run_dir = default_run_dir(args.out or args.results)
        self.directory = RunDirectory(run_dir, vars(args), self.command)
        keras.utils.set_random_seed(args.seed)
        self._static = set()
        self.last_fit = None  # Its history is the preset's (`save_preset`).
        self._stages = {}

    @property
    def replicas(self):
        """The strategy's number of replicas.

        Example:
        >>> import argparse
        >>> from zoo.training.flags import add_training_arguments
        >>> parser = argparse.ArgumentParser()
        >>> add_training_arguments(parser, epochs=3, verbose=0, out_required=False)
        >>> run = TrainingRun("my.train", parser.parse_args([]), [])
        >>> run.replicas  # the default strategy on one device
        1
        """
        return self.strategy.num_replicas_in_sync

    def describe_strategy(self):
        """`"strategy <Name> with <n> replica(s)"`, for a script's log.

        Example:
        >>> import argparse
        >>> from zoo.training.flags import add_training_arguments
        >>> parser = argparse.ArgumentParser()
        >>> add_training_arguments(parser, epochs=3, verbose=0, out_required=False)
        >>> run = TrainingRun("my.train", parser.parse_args([]), [])
        >>> run.describe_strategy()
        'strategy ... with 1 replica(s)'
        """
        return f"strategy {self.strategy.name} with {self.replicas} replica(s)"

    def static_shapes(self, model=None):
        """Whether to train on static shapes: `--static-shapes`, or the strategy's.

        A TPU wants one batch shape; JAX's `DataParallel` over several
        devices splits every batch evenly (`zoo.training.strategy`).

        When so, `model.use_static_shapes()` is turned on (for a zoo task;
        pass `model=None` for a plain Keras model) until its `fit` ends; the
        script then batches with `drop_remainder=True`.

        Returns:
            bool.

        Example:
        >>> import argparse
        >>> from zoo.training.flags import add_training_arguments
        >>> parser = argparse.ArgumentParser()
        >>> add_training_arguments(parser, epochs=3, verbose=0, out_required=False)
        >>> from zoo.base.task import Task
        >>> argv = ["--static-shapes"]
        >>> run = TrainingRun("my.train", parser.parse_args(argv), argv)
        >>> ids = keras.Input((), dtype="int64", name="ids")
        >>> model = Task(ids, keras.layers.Embedding(4, 2)(ids))
        >>> run.static_shapes(model), model.static_shapes
        static shapes: fixed-size batches padded to the full length
        (True, True)
        """
        static = bool(self.args.static_shapes) or self.strategy.needs_static_shapes
        if static and model is not None:
            model.use_static_shapes()
            self._static.add(id(model))
            print("static shapes: fixed-size batches padded to the full length")
        return static

    def stage(self, name="train"):
        """The `Stage` of the fit `name` in the run directory (one per name).

        Its `path` (`None` without a run directory) holds files that resume
        with it, such as the transformer's checkpoints.

        Example:
        >>> import argparse
        >>> from zoo.training.flags import add_training_arguments
        >>> parser = argparse.ArgumentParser()
        >>> add_training_arguments(parser, epochs=3, verbose=0, out_required=False)
        >>> import os, tempfile
        >>> folder = tempfile.TemporaryDirectory()
        >>> argv = ["--run-dir", os.path.join(folder.name, "run")]
        >>> run = TrainingRun("my.train", parser.parse_args(argv), argv)
        run directory .../run
        >>> stage = run.stage("pretrain")
        >>> os.path.basename(stage.path), run.stage("pretrain") is stage
        ('pretrain', True)
        >>> run.finish()
        >>> folder.cleanup()
        """
        if name not in self._stages:
            self._stages[name] = self.directory.stage(name)
        return self._stages[name]

    def budgets(self):
        """The callbacks of `--max-minutes` and `--max-steps` (new ones).

        Example:
        >>> import argparse
        >>> from zoo.training.flags import add_training_arguments
        >>> parser = argparse.ArgumentParser()
        >>> add_training_arguments(parser, epochs=3, verbose=0, out_required=False)
        >>> argv = ["--max-minutes", "30", "--max-steps", "1000"]
        >>> run = TrainingRun("my.train", parser.parse_args(argv), argv)
        >>> [type(callback).__name__ for callback in run.budgets()]
        ['TimeBudget', 'StepBudget']
        >>> run.budgets()[1].steps
        1000
        """
        callbacks = []
        if self.args.max_minutes:
            callbacks.append(TimeBudget(self.args.max_minutes))
        if self.args.max_steps:
            callbacks.append(StepBudget(self.args.max_steps))
        return callbacks

    def fit(
        self,
        model,
        x,
        *,
        stage="train",
        epochs=None,
        callbacks=(),
        budgets=True,
        **kwargs,
    ):
        """`model.fit` resumed from the run directory, within the budgets.

        Args:
            model: a compiled Keras model.
            x: the training data (a `tf.data` dataset, resumed in its order).
            stage: str. The name of this fit in the run directory.
            epochs: int. Defaults to `--epochs`.
            callbacks: the script's own callbacks; the budgets follow them.
            budgets: bool. Whether `--max-minutes` and `--max-steps` apply.
            **kwargs: other `fit` arguments (`validation_data`, ...);
                `verbose` defaults to `--verbose`.

        Returns:
            A `Fit`. A model on static shapes (`static_shapes`) is back on
            dynamic ones, as presets are saved.

        Example:
        >>> import argparse
        >>> from zoo.training.flags import add_training_arguments
        >>> parser = argparse.ArgumentParser()
        >>> add_training_arguments(parser, epochs=3, verbose=0, out_required=False)
        >>> import numpy as np
        >>> argv = ["--max-steps", "5"]
        >>> run = TrainingRun("my.train", parser.parse_args(argv), argv)
        >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        >>> model.compile("sgd", "mse")
        >>> fit = run.fit(model, np.ones((8, 2)), y=np.ones((8, 1)), batch_size=2)
        trained 2 epochs (5 steps) in ... min
        stopped after 5 steps: the step budget (--max-steps)
        >>> fit.epochs, fit.steps, sorted(fit.history)  # the step budget stopped it
        (2, 5, ['loss'])
        """
        limits = self.budgets() if budgets else []
        callbacks = list(callbacks) + limits
        kwargs.setdefault("verbose", self.args.verbose)
        epochs = self.args.epochs if epochs is None else epochs
        run_stage = self.stage(stage)
        if kwargs["verbose"]:  # Keras's bar shows nothing before a step ends
            print("training: the first step compiles the model...", flush=True)
        with self.strategy.scope(), warnings.catch_warnings():
            # The zoo's datasets are finite and of unknown length (batched by
            # length), so Keras learns an epoch's end by reaching it and then
            # warns "Your input ran out of data", which is not what happened.
            warnings.filterwarnings("ignore", message="Your input ran out of data")
            history = run_stage.fit(
                model, x, epochs=epochs, callbacks=callbacks, **kwargs
            )
        if id(model) in self._static:
            model.use_static_shapes(False)  # The preset trims padding again.
            self._static.discard(id(model))
        optimizer = model.optimizer
        fit = self.last_fit = Fit(
            history=round_history(history),
            seconds=run_stage.seconds,
            epochs=len(history.history.get("loss", [])),
            steps=int(optimizer.iterations.numpy()) if optimizer is not None else 0,
        )
        print(
            f"trained {fit.epochs} epochs ({fit.steps} steps) in "
            f"{fit.seconds / 60:.1f} min"
        )
        for budget in limits:
            if budget.stopped:
                print(f"stopped after {fit.steps} steps: {budget.reason}")
        return fit

    def metadata(self, task, data, metrics, **extra):
        """The `metadata.json` of the preset, as data.

        Args:
            task: str. What the model does, e.g. `"translation en->es"`.
            data: dict. The data trained and tested on: source, sizes, split,
                variant, seeds (values, not prose to parse).
            metrics: dict. What the run measured.
            **extra: other top-level entries (e.g. RAM's `table`).

        Returns:
            dict with `task`, `command`, `data`, `metrics`, `seed`, `options`
            (every command-line option), `strategy` (name, replicas),
            `versions` and `hardware` (see `hardware()`), and `extra`.

        Example:
        >>> import argparse
        >>> from zoo.training.flags import add_training_arguments
        >>> parser = argparse.ArgumentParser()
        >>> add_training_arguments(parser, epochs=3, verbose=0, out_required=False)
        >>> argv = ["--seed", "7"]
        >>> run = TrainingRun("my.train", parser.parse_args(argv), argv)
        >>> fit = Fit(history={"loss": [0.5]}, seconds=60.0, epochs=1, steps=8)
        >>> metadata = run.metadata("regression", {"rows": 8}, fit.metrics(), table=[])
        >>> metadata["command"], metadata["seed"], metadata["metrics"]["steps"]
        ('python -m my.train --seed 7', 7, 8)
        >>> sorted(metadata)
        ['command', 'data', 'hardware', 'metrics', 'options', 'seed', 'strategy', 'table', 'task', 'versions']
        """
        options = json.loads(json.dumps(vars(self.args), default=str))
        return {
            "task": task,
            "command": self.command,
            "data": data,
            "seed": self.args.seed,
            "options": options,
            "strategy": {
                "name": self.strategy.name,
                "replicas": self.replicas,
            },
            "versions": versions(),
            "hardware": hardware(),
            "metrics": metrics,
            **extra,
        }

    def save_and_finish(self, model, task, data, metrics, **extra):
        """Saves the preset (`save_preset`) and ends the run (`finish`).

        Args:
            model: the trained zoo task.
            task, data, metrics, **extra: as in `metadata`.

        Returns:
            The preset's metadata (dict).

        Example:
        >>> import argparse
        >>> from zoo.training.flags import add_training_arguments
        >>> parser = argparse.ArgumentParser()
        >>> add_training_arguments(parser, epochs=3, verbose=0, out_required=False)
        >>> import json, os, tempfile
        >>> from zoo.base.task import Task
        >>> ids = keras.Input((), dtype="int64", name="ids")
        >>> model = Task(ids, keras.layers.Embedding(4, 2)(ids))
        >>> folder = tempfile.TemporaryDirectory()
        >>> out = os.path.join(folder.name, "preset")
        >>> results = os.path.join(folder.name, "results.json")
        >>> argv = ["--out", out, "--results", results]
        >>> run = TrainingRun("my.train", parser.parse_args(argv), argv)
        run directory .../preset.run
        >>> metadata = run.save_and_finish(model, "embedding", {}, {"loss": 0.5})
        preset written to .../preset
        >>> sorted(os.listdir(folder.name))  # the run directory is gone
        ['preset', 'results.json']
        >>> Task.from_preset(out).preset_metadata["task"]
        'embedding'
        >>> folder.cleanup()
        """
        metadata = self.save_preset(model, self.metadata(task, data, metrics, **extra))
        self.finish()
        return metadata

    def save_preset(self, model, metadata, history=None):
        """Writes `model` to `--out` with `metadata`, and it to `--results`.

        The per-epoch `history` goes to its own file (`--history`), which
        the written metadata names as `metrics.history_file`.

        Args:
            model: the trained zoo task.
            metadata: dict. As `metadata` returns it.
            history: dict or `None`. The per-epoch history; `None` for the
                last `fit`'s (none when nothing was fit).

        Returns:
            The metadata written (dict).

        Example:
        >>> import argparse
        >>> from zoo.training.flags import add_training_arguments
        >>> parser = argparse.ArgumentParser()
        >>> add_training_arguments(parser, epochs=3, verbose=0, out_required=False)
        >>> import json, os, tempfile
        >>> from zoo.base.task import Task
        >>> ids = keras.Input((), dtype="int64", name="ids")
        >>> model = Task(ids, keras.layers.Embedding(4, 2)(ids))
        >>> folder = tempfile.TemporaryDirectory()
        >>> out = os.path.join(folder.name, "preset")
        >>> results = os.path.join(folder.name, "results.json")
        >>> argv = ["--out", out, "--results", results]
        >>> run = TrainingRun("my.train", parser.parse_args(argv), argv)
        run directory .../preset.run
        >>> metadata = {"task": "embedding", "metrics": {"epochs": 2}}
        >>> metadata = run.save_preset(model, metadata, {"loss": [0.5, 0.25]})
        training history written to .../preset.history.json
        preset written to .../preset
        >>> with open(results) as f:
        ...     json.load(f)["metrics"]["history_file"] == out + ".history.json"
        True
        >>> sorted(os.listdir(folder.name))  # the run stays until `finish`
        ['preset', 'preset.history.json', 'preset.run', 'results.json']
        >>> run.finish()
        >>> folder.cleanup()
        """
        metadata = self.write_history(metadata, history)
        model.save_to_preset(self.args.out, metadata=metadata)
        print(f"preset written to {self.args.out}")
        self.write_results(metadata)
        return metadata

    def write_history(self, metadata, history=None):
        """Writes the preset's history file; returns `metadata` naming it.

        Args:
            metadata: dict. The preset's metadata (`metadata`).
            history: dict or `None`. The per-epoch history; `None` for the
                last `fit`'s. With no history nothing is written.

        Returns:
            A copy of `metadata` with `metrics.history_file` (the path as
            `--history` gave it, or relative to the checkout: see
            `history_file`), or `metadata` itself when nothing was written.

        Example:
        >>> import argparse
        >>> from zoo.training.flags import add_training_arguments
        >>> parser = argparse.ArgumentParser()
        >>> add_training_arguments(parser, epochs=3, verbose=0, out_required=False)
        >>> import json, os, tempfile
        >>> folder = tempfile.TemporaryDirectory()
        >>> history = os.path.join(folder.name, "logs", "history.json")
        >>> argv = ["--out", os.path.join(folder.name, "p"), "--history", history]
        >>> run = TrainingRun("my.train", parser.parse_args(argv), argv)
        run directory .../p.run
        >>> metadata = run.write_history({"metrics": {}}, {"loss": [0.5]})
        training history written to .../logs/history.json
        >>> metadata["metrics"]["history_file"] == history
        True
        >>> with open(history) as f:
        ...     sorted(json.load(f).items())
        [('command', 'python -m my.train --out ... --history ...'), ('history', {'loss': [0.5]}), ('preset', 'p')]
        >>> run.finish()
        >>> folder.cleanup()
        """
        if history is None and self.last_fit is not None:
            history = self.last_fit.history
        if history is None or self.history_file is None:
            return metadata
        path, recorded = self.history_file
        preset = os.path.basename(os.path.normpath(self.args.out))
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        write_json(
            path,
            {"preset": preset, "command": self.command, "history": history},
            atomic=False,
        )
        print(f"training history written to {path}")
        metrics = {**metadata.get("metrics", {}), "history_file": recorded}
        return {**metadata, "metrics": metrics}

    def write_results(self, value):
        """Writes a JSON value to `--results`, if given.

        Example:
        >>> import argparse
        >>> from zoo.training.flags import add_training_arguments
        >>> parser = argparse.ArgumentParser()
        >>> add_training_arguments(parser, epochs=3, verbose=0, out_required=False)
        >>> import json, os, tempfile
        >>> folder = tempfile.TemporaryDirectory()
        >>> results = os.path.join(folder.name, "table", "results.json")
        >>> argv = ["--results", results, "--run-dir", os.path.join(folder.name, "run")]
        >>> run = TrainingRun("my.train", parser.parse_args(argv), argv)
        run directory .../run
        >>> run.write_results([{"glimpses": 4, "error": 0.2}])
        >>> with open(results) as f:
        ...     json.load(f)
        [{'glimpses': 4, 'error': 0.2}]
        >>> run.finish()
        >>> folder.cleanup()
        """
        if self.args.results:
            os.makedirs(
                os.path.dirname(os.path.abspath(self.args.results)), exist_ok=True
            )
            write_json(self.args.results, value, atomic=False)

    def finish(self):
        """Deletes the run directory: its work is in the written outputs.

        Example:
        >>> import argparse
        >>> from zoo.training.flags import add_training_arguments
        >>> parser = argparse.ArgumentParser()
        >>> add_training_arguments(parser, epochs=3, verbose=0, out_required=False)
        >>> import os, tempfile
        >>> folder = tempfile.TemporaryDirectory()
        >>> argv = ["--results", os.path.join(folder.name, "results.json")]
        >>> run = TrainingRun("my.train", parser.parse_args(argv), argv)
        run directory .../results.json.run
        >>> os.listdir(folder.name)
        ['results.json.run']
        >>> run.finish()
        >>> os.listdir(folder.name)
        []
        >>> folder.cleanup()
        """
        self.directory.finish()
