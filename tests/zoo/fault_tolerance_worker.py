"""Trains a tiny zoo model with `keras.callbacks.BackupAndRestore`.

Started by `test_fault_tolerance.py`: once straight through, once with
`--kill-epoch E --kill-step S` (the process SIGKILLs itself at the start of
step S of epoch E, 0-based, as a preemption would), and once more to resume
from the backup. Prints `epoch E step S` before each step, and at the end
writes the model weights and optimizer variables to `--out` (`.npz`) and
prints one JSON line.

The data order is the same every epoch (no shuffling), and the model has no
dropout: a resumed process restarts the interrupted epoch from its first
batch with the weights, optimizer state and epoch counter of the last
completed epoch, so the only state it must get back is in the backup.

Usage:

    python tests/zoo/fault_tolerance_worker.py --backup DIR --out w.npz \
        [--double-checkpoint] [--kill-epoch 2 --kill-step 1]
"""

import argparse
import json
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tiny_models  # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backup", required=True, help="BackupAndRestore folder")
    p.add_argument("--out", required=True, help=".npz of the final weights")
    p.add_argument("--case", default="seq2seq", choices=sorted(tiny_models.CASES))
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--samples", type=int, default=12)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--save-freq", default="epoch", help="'epoch' or steps")
    p.add_argument(
        "--double-checkpoint",
        action="store_true",
        help="keep the previous backup too (`.bkp`), restored if the latest "
        "cannot be read",
    )
    p.add_argument("--kill-epoch", type=int, default=None)
    p.add_argument("--kill-step", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    import keras
    import numpy as np

    class Steps(keras.callbacks.Callback):
        """Logs each step; SIGKILLs this process at the chosen one."""

        def __init__(self):
            super().__init__()
            self.epoch = None
            self.epochs = []

        def on_epoch_begin(self, epoch, logs=None):
            self.epoch = epoch
            self.epochs.append(epoch)

        def on_train_batch_begin(self, batch, logs=None):
            print(f"epoch {self.epoch} step {batch}", flush=True)
            if (self.epoch, batch) == (args.kill_epoch, args.kill_step):
                os.kill(os.getpid(), signal.SIGKILL)

    build, batch, loss = tiny_models.CASES[args.case]
    x, y = batch(args.samples)
    model = build(args.seed)
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss=loss())
    save_freq = args.save_freq if args.save_freq == "epoch" else int(args.save_freq)
    steps = Steps()
    history = model.fit(
        tiny_models.dataset(x, y, args.batch_size),
        epochs=args.epochs,
        callbacks=[
            keras.callbacks.BackupAndRestore(
                args.backup, save_freq, double_checkpoint=args.double_checkpoint
            ),
            steps,
        ],
        verbose=0,
    )
    state = {f"model:{v.path}": v.numpy() for v in model.weights}
    state.update({f"optimizer:{v.path}": v.numpy() for v in model.optimizer.variables})
    np.savez(args.out, **state)
    print(
        json.dumps(
            {
                "epochs_run": steps.epochs,
                "iterations": int(model.optimizer.iterations.numpy()),
                "loss": [float(v) for v in history.history["loss"]],
            }
        )
    )


if __name__ == "__main__":
    main()
