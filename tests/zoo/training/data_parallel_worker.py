"""Trains the tiny Transformer through the harness on one device and DataParallel.

Run by `test_distribution_backends.py` under `KERAS_BACKEND=jax` with
`XLA_FLAGS=--xla_force_host_platform_device_count=2` (the CPU as two JAX
devices, set before JAX starts, hence a process of its own). For each
`--strategy` (`default`: one device; `auto`: `DataParallel` over both), a
`TrainingRun` builds the tiny Transformer (`tiny_models.py`) within
`run.strategy.scope()` and fits it 2 SGD steps on a global batch of 4 real
verse pairs. Recorded: the strategy, the distribution `fit` ran in, the
devices each variable lives on, the loss and the weights (`--out`, `.npz`),
and the error line of a batch of 3, which does not split over 2 devices.
Then a probe model (a layer that reports the sharding of its input, with
`jax.debug.inspect_array_sharding`) trains one step under the same strategy:
the shape of the batch each device gets. Prints one JSON line.

Usage (from the repository root):

    XLA_FLAGS=--xla_force_host_platform_device_count=2 KERAS_BACKEND=jax \\
        python tests/zoo/training/data_parallel_worker.py --out /tmp/weights.npz
"""

import argparse
import contextlib
import io
import json
import os
import sys

import keras
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import tiny_models  # noqa: E402

CASE = "transformer"
BATCH = 4


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help=".npz of each run's weights")
    return p.parse_args(argv)


def open_run(strategy, batch_size=BATCH):
    from zoo.training.flags import training_parser
    from zoo.training.harness import TrainingRun

    parser = training_parser(
        "A tiny run.", epochs=1, batch_size=BATCH, out_required=False
    )
    argv = ["--strategy", strategy, "--batch-size", str(batch_size), "--verbose", "0"]
    return TrainingRun("data_parallel_worker", parser.parse_args(argv), argv)


class DistributionSeen(keras.callbacks.Callback):
    """Records the devices of Keras's current distribution at each step,
    and the loss of each epoch (unrounded)."""

    def __init__(self):
        super().__init__()
        self.devices = []
        self.losses = []

    def on_epoch_end(self, epoch, logs=None):
        self.losses.append(float(logs["loss"]))

    def on_train_batch_begin(self, batch, logs=None):
        distribution = keras.distribution.distribution()
        mesh = None if distribution is None else distribution.device_mesh
        self.devices.append(0 if mesh is None else int(mesh.devices.size))


def family_run(strategy):
    build, batch, loss = tiny_models.CASES[CASE]
    x, y = batch(2 * BATCH)
    run = open_run(strategy)
    with run.strategy.scope():
        model = build(seed=0)
        model.compile(optimizer=keras.optimizers.SGD(0.5), loss=loss())
    seen = DistributionSeen()
    fit = run.fit(model, tiny_models.dataset(x, y, BATCH), callbacks=[seen])
    variables = model.variables + model.optimizer.variables
    return {
        "strategy": run.strategy.name,
        "replicas": run.replicas,
        "static_shapes": run.static_shapes(),
        "distribution_devices": seen.devices,
        "variable_devices": sorted(
            {len(v.value.sharding.device_set) for v in variables}
        ),
        "replicated": all(v.value.sharding.is_fully_replicated for v in variables),
        "steps": fit.steps,
        "loss": seen.losses,
    }, {v.path: v.numpy() for v in model.trainable_variables}


def probe_run(strategy):
    """The shape of the part of a batch of 4 each device computes on."""
    import jax

    shards = []

    def probe(x):
        jax.debug.inspect_array_sharding(
            x, callback=lambda s: shards.append(list(s.shard_shape(x.shape)))
        )
        return x

    run = open_run(strategy)
    with run.strategy.scope():
        model = keras.Sequential(
            [keras.Input((3,)), keras.layers.Lambda(probe), keras.layers.Dense(1)]
        )
        model.compile("sgd", "mse")
    x = np.arange(BATCH * 3, dtype="float32").reshape(BATCH, 3)
    run.fit(model, x, y=np.ones((BATCH, 1)), batch_size=BATCH, budgets=False)
    return shards[-1]


def main(argv=None):
    args = parse_args(argv)
    report = {"devices": keras.distribution.list_devices()}
    weights = {}
    for strategy in ("default", "auto"):
        report[strategy], arrays = family_run(strategy)
        report[strategy]["batch_shard"] = probe_run(strategy)
        weights.update({f"{strategy}:{k}": v for k, v in arrays.items()})
    with contextlib.redirect_stderr(io.StringIO()) as err:
        try:
            open_run("auto", batch_size=3)
        except SystemExit:
            pass
    report["auto"]["odd_batch_refused"] = err.getvalue().strip()
    np.savez(args.out, **weights)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
