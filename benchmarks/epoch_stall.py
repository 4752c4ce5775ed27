"""Idle time at each epoch start of `model.fit`, with tf.data's autotuning on and off.

Keras makes a new dataset iterator each epoch and drops the previous one;
with tf.data's autotuning model thread running, dropping it can leave the
core idle (see `zoo.data.pipeline`). For each model of `zoo.ram.train`'s
table (`--rows`), this fits a fresh copy on the zoo's Fashion-MNIST training
pipeline (`fashion_mnist.as_dataset`, which ends with `pipeline.finish`) for
`--epochs` epochs twice in one process: once as the zoo builds it
(`autotune.enabled = False`) and once with autotuning set back on. Per
epoch it prints the wall time, the process CPU time, and the idle wait
before the first batch: the wall time from `on_epoch_begin` to the start
of the first batch minus the CPU time spent in it (where the previous
iterator is dropped and the next one made). Same seed, same data
order, same weights: the two fits compute the same thing.

Usage (one core, as the tables train):
    taskset -c 0 python benchmarks/epoch_stall.py
    taskset -c 0 python benchmarks/epoch_stall.py --rows fc_centered --epochs 5
    taskset -c 0 python benchmarks/epoch_stall.py --json experiments/benchmarks/logs/epoch_stall.json
"""

import argparse
import json
import os
import resource
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402
from machine import cpu_model  # noqa: E402

from zoo.data import fashion_mnist  # noqa: E402
from zoo.ram import train  # noqa: E402
from zoo.training.harness import compile_classifier  # noqa: E402

SETTINGS = ("off (zoo)", "on (tf.data default)")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--rows",
        nargs="+",
        default=["ram_centered_6", "fc_centered", "conv_centered"],
        choices=[name for name in train.ROWS if "centered" in name],
    )
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument(
        "--ram-options",
        default="--cell lstm --patch-size 14 --num-scales 2 --num-glimpses 8",
        help="zoo.ram.train options of the RAM rows (default: the card's "
        "8-glimpse centred row)",
    )
    p.add_argument("--data", default="full", choices=["full", "sample"])
    p.add_argument("--json", help="also write the results here")
    args = p.parse_args(argv)
    if args.epochs < 2:
        p.error(
            f"--epochs must be at least 2 (the stall is at an epoch start). "
            f"Received: {args.epochs}"
        )
    return args


def cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class EpochClock(keras.callbacks.Callback):
    """Per epoch: wall and CPU seconds, and the idle wait before the first batch."""

    def __init__(self):
        super().__init__()
        self.epochs = []

    def on_epoch_begin(self, epoch, logs=None):
        self._wall, self._cpu = time.perf_counter(), cpu_seconds()

    def on_train_batch_begin(self, batch, logs=None):
        if batch == 0:
            self._first_wall = time.perf_counter()
            self._first_cpu = cpu_seconds()

    def on_epoch_end(self, epoch, logs=None):
        wall = time.perf_counter() - self._wall
        cpu = cpu_seconds() - self._cpu
        waited = (self._first_wall - self._wall) - (self._first_cpu - self._cpu)
        self.epochs.append(
            {
                "wall_s": round(wall, 2),
                "cpu_s": round(cpu, 2),
                "idle_start_s": round(waited, 2),
            }
        )


def dataset(images, labels, autotune):
    ds = fashion_mnist.as_dataset(images, labels, 128, seed=0)
    if autotune:
        options = tf.data.Options()
        options.autotune.enabled = True
        ds = ds.with_options(options)
    return ds


def fit(row, images, labels, args, autotune):
    _, kind, _ = train.ROWS[row]
    row_args = train.parse_args(args.ram_options.split() + ["--seed", "0"])
    keras.utils.set_random_seed(0)
    model = train.build_model(kind, train.row_options(row, row_args), 28, row_args)
    compile_classifier(model, row_args.learning_rate)
    clock = EpochClock()
    model.fit(
        dataset(images, labels, autotune),
        epochs=args.epochs,
        callbacks=[clock],
        shuffle=False,
        verbose=0,
    )
    return clock.epochs


def main(argv=None):
    args = parse_args(argv)
    images, labels = fashion_mnist.load("train", sample=args.data == "sample")
    load = os.getloadavg()[0]
    print(
        f"CPU: {cpu_model()}; load average at start {load:.2f}; "
        f"{len(os.sched_getaffinity(0))} core(s) for this process"
    )
    print(f"{len(images)} training images, batch 128, {args.epochs} epochs per fit")
    results = []
    for row in args.rows:
        for autotune, setting in zip((False, True), SETTINGS):
            epochs = fit(row, images, labels, args, autotune)
            later = epochs[1:]
            mean = {k: sum(e[k] for e in later) / len(later) for k in later[0]}
            results.append({"row": row, "autotune": autotune, "epochs": epochs})
            print(f"\n{row}, autotuning {setting}:")
            for i, e in enumerate(epochs):
                print(
                    f"  epoch {i + 1}: {e['wall_s']:6.2f} s wall, {e['cpu_s']:6.2f} s CPU, "
                    f"{e['idle_start_s']:5.2f} s idle before the first batch"
                )
            print(
                f"  epochs 2-{args.epochs} mean: {mean['wall_s']:.2f} s wall, "
                f"{mean['idle_start_s']:.2f} s idle"
            )
    print("\nwall time of epochs 2.. with autotuning on / off (zoo):")
    for row in args.rows:
        off, on = (
            sum(e["wall_s"] for e in r["epochs"][1:])
            for r in results
            if r["row"] == row
        )
        print(f"  {row}: {on / off:.2f}x")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(
                {
                    "cpu": cpu_model(),
                    "load_at_start": load,
                    "args": vars(args),
                    "results": results,
                },
                f,
                indent=1,
            )


if __name__ == "__main__":
    main()
