"""One training step of tiny zoo models on one device and mirrored.

Splits the CPU into `--replicas` logical devices (which must happen before
TensorFlow initialises, hence a process of its own), then, for each model
named, runs one `model.fit` step with plain SGD on the same global batch
twice: under the default strategy (one device, run eagerly: tracing the
step took most of the reference's time, 70% less eagerly) and under
`MirroredStrategy` over all the logical CPUs (a traced step, as `fit` runs it). SGD makes the step's gradient readable from the
weights: `g = (w_before - w_after) / learning_rate`. Prints one JSON line
per model with both losses and gradients' differences.

Usage (from the repository root):

    python tests/zoo/training/distribute_worker.py seq2seq ram --replicas 2
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import tiny_models  # noqa: E402

LEARNING_RATE = 1.0


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("cases", nargs="+", choices=sorted(tiny_models.CASES))
    p.add_argument("--replicas", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def train_step(strategy, case, seed, run_eagerly=False):
    """Returns `(loss, {variable path: gradient})` of one `fit` step."""
    import keras

    build, batch, loss = tiny_models.CASES[case]
    x, y = batch()
    with strategy.scope():
        model = build(seed)
        model.compile(
            optimizer=keras.optimizers.SGD(LEARNING_RATE),
            loss=loss(),
            run_eagerly=run_eagerly,
        )
    before = {v.path: v.numpy() for v in model.trainable_variables}
    history = model.fit(tiny_models.dataset(x, y, len(x)), epochs=1, verbose=0)
    gradients = {
        v.path: (before[v.path] - v.numpy()) / LEARNING_RATE
        for v in model.trainable_variables
    }
    return float(history.history["loss"][0]), before, gradients, model


def tokens_per_replica(model, case, replicas):
    """Loss-weighted positions (target tokens, or samples) of each replica.

    `tf.distribute` splits a global batch as evenly as it can, the first
    replicas taking one sample more when it does not divide.
    """
    import keras
    import numpy as np
    import tensorflow as tf

    _, batch, _ = tiny_models.CASES[case]
    x, y = batch()
    _, _, weights = keras.utils.unpack_x_y_sample_weight(
        model.preprocess_samples(tf.constant(x), tf.constant(y))
    )
    if weights is None:
        weights = np.ones(len(y))
    weights = np.array(weights).reshape(len(y), -1)
    return [float(w.sum()) for w in np.array_split(weights, replicas)]


def compare(case, mirrored, replicas, seed):
    """The report of one model: one device against `mirrored`."""
    import keras
    import numpy as np
    import tensorflow as tf

    keras.utils.clear_session(free_memory=False)  # Names as in a new process.
    one_loss, one_init, one_grads, model = train_step(
        tf.distribute.get_strategy(), case, seed, run_eagerly=True
    )
    loss, init, grads, _ = train_step(mirrored, case, seed)
    same_init = all(np.array_equal(one_init[k], init[k]) for k in one_init)
    differences = {
        k: float(np.abs(grads[k] - one_grads[k]).max()) for k in sorted(one_grads)
    }
    worst = sorted(differences, key=differences.get, reverse=True)[:3]
    return {
        "case": case,
        "replicas": mirrored.num_replicas_in_sync,
        "devices": list(mirrored.extended.worker_devices),
        "same_initial_weights": same_init,
        "tokens_per_replica": tokens_per_replica(model, case, replicas),
        "loss_one_device": one_loss,
        "loss_mirrored": loss,
        "gradient_max_abs": max(float(np.abs(g).max()) for g in one_grads.values()),
        "gradient_max_abs_difference": max(differences.values()),
        "worst_variables": {k: differences[k] for k in worst},
        "variables": len(one_grads),
    }


def main(argv=None):
    args = parse_args(argv)
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * args.replicas
    )
    mirrored = tf.distribute.MirroredStrategy(
        [d.name for d in tf.config.list_logical_devices("CPU")]
    )
    for case in args.cases:
        report = compare(case, mirrored, args.replicas, args.seed)
        print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
