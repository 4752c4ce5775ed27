"""Trains a tiny zoo model with `keras.callbacks.BackupAndRestore` or a run directory.

Started by `test_fault_tolerance.py` (BackupAndRestore, TensorFlow) and
`test_resume_backends.py` (`--run-dir`: the zoo's run directory,
`zoo.training.run_directory.Stage`, on each backend): once straight through, once with
`--kill-epoch E --kill-step S` (the process SIGKILLs itself at the start of
step S of epoch E, 0-based, as a preemption would), and once more to resume
from the backup or run directory. Prints `epoch E step S` before each step, and at the end
writes the model weights and optimizer variables to `--out` (`.npz`) and
prints one JSON line.

The data order is the same every epoch (no shuffling; with `--shuffle` a
seeded new order each epoch, which only the run directory resumes), and the
model has no dropout: a resumed process restarts the interrupted epoch from
its first batch with the weights, optimizer state and epoch counter of the
last completed epoch, so the only state it must get back is in the backup.

Usage:

    python tests/zoo/training/fault_tolerance_worker.py --backup DIR --out w.npz \
        [--double-checkpoint] [--kill-epoch 2 --kill-step 1]
    python tests/zoo/training/fault_tolerance_worker.py --run-dir DIR --out w.npz \
        [--shuffle] [--kill-epoch 2 --kill-step 1]
"""

import argparse
import json
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import tiny_models  # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--backup", help="BackupAndRestore folder")
    where.add_argument("--run-dir", help="the stage folder of a zoo run directory")
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
    p.add_argument("--shuffle", action="store_true", help="a new order each epoch")
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
    seed = args.seed if args.shuffle else None
    data = tiny_models.dataset(x, y, args.batch_size, shuffle_seed=seed)
    if args.run_dir:
        from zoo.training.run_directory import Stage

        history = Stage(args.run_dir).fit(model, data, args.epochs, [steps], verbose=0)
    else:
        history = model.fit(
            data,
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
