"""One worker of a MultiWorkerMirroredStrategy training of a tiny zoo model.

Started by `test_multi_worker.py`, once per worker, each with its own
`TF_CONFIG` (cluster of workers on 127.0.0.1, this worker's index). The
strategy comes from `keras_attention.training.get_strategy("auto")`, which
must pick `MultiWorkerMirroredStrategy` from `TF_CONFIG`. Trains
`tiny_models.MULTI_WORKER_CASE` with `model.fit` for a few steps on real
samples (global batch size), then writes the weights before and after
(`worker_<index>.npz`) and prints one JSON line.

Usage:

    TF_CONFIG='{"cluster": {"worker": [...]}, "task": {...}}' \
        python tests/zoo/training/multi_worker_worker.py --out DIR
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import tiny_models  # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="folder for worker_<index>.npz")
    p.add_argument("--case", default=tiny_models.MULTI_WORKER_CASE)
    p.add_argument("--samples", type=int, default=16)
    p.add_argument("--batch-size", type=int, default=4, help="global batch size")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    index = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
    # The strategy must exist before any other TensorFlow op runs.
    from keras_attention.training import get_strategy

    strategy = get_strategy("auto")
    import keras
    import numpy as np
    import tensorflow as tf

    build, batch, loss = tiny_models.CASES[args.case]
    x, y = batch(args.samples)
    with strategy.scope():
        model = build(args.seed)
        model.compile(optimizer=keras.optimizers.Adam(1e-2), loss=loss())
    before = {v.path: v.numpy() for v in model.weights}
    history = model.fit(tiny_models.dataset(x, y, args.batch_size), epochs=1, verbose=0)
    after = {v.path: v.numpy() for v in model.weights}
    np.savez(
        os.path.join(args.out, f"worker_{index}.npz"),
        **{f"before:{k}": v for k, v in before.items()},
        **{f"after:{k}": v for k, v in after.items()},
    )
    print(
        json.dumps(
            {
                "index": index,
                "multi_worker": isinstance(
                    strategy, tf.distribute.MultiWorkerMirroredStrategy
                ),
                "replicas": strategy.num_replicas_in_sync,
                "steps": int(model.optimizer.iterations.numpy()),
                "loss": [float(v) for v in history.history["loss"]],
            }
        )
    )


if __name__ == "__main__":
    main()
