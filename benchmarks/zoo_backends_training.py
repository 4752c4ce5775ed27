"""Loss curve and training throughput of the Transformer recipe on TensorFlow, JAX and PyTorch.

One process a backend (`KERAS_BACKEND=<backend>`, one after the other)
trains the model of `zoo/transformer/train.py` (its `build_model`: Adam
(0.9, 0.98, 1e-9) with the warmup / inverse-square-root schedule, label
smoothing 0.1) on the shipped sample (`--data sample`: 400 training pairs,
the joint WordPiece vocabulary learned on them) for `--steps` steps, with
what makes the runs comparable:

- the same data in the same order: the recipe's fixed-size batches (its
  `--static-shapes` path: `batch_tokens // max_length` pairs padded to
  `max_length`, reshuffled by `tf.data` each pass with the seed), read once
  in the worker and fed in that order;
- the same initial weights: the TensorFlow process writes its freshly
  initialised weights and the others load them (each backend's random
  initialisers draw other numbers from the same seed);
- no dropout (each backend would draw other masks).

The runs train one epoch of `--steps` steps. Each step's loss is recovered
from the running mean Keras logs after every batch (float32 sums: to about
1e-4 over a few hundred steps).

Each backend trains compiled as it can: TensorFlow a `tf.function` (the
recipe's default, no XLA), JAX `jax.jit` (XLA; the recipe's
`jit_compile=False` would run JAX op by op), PyTorch eagerly (the recipe's
default). Throughput: target subwords (real ones, not padding: the
TensorFlow run's `tokens` count of the same batches) per second over the
steps after `--warmup`, as wall time between the ends of steps (each step's
loss is read back, so the step has finished).

The table gives the loss at steps 1, 10, 25, 50, 100, ... and the last; for
JAX and PyTorch the largest relative difference of the curve from
TensorFlow's (the maximum over the steps of |loss - loss_TF| / loss_TF), the
final loss minus TensorFlow's, and the subwords/s of each backend.

    python benchmarks/zoo_backends_training.py --steps 200 \\
        --json experiments/benchmarks/logs/zoo_backends_training.json
    python benchmarks/zoo_backends_training.py --steps 20   # quick look
"""

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BACKENDS = ("tensorflow", "jax", "torch")
REPORTED_STEPS = (1, 10, 25, 50, 100, 200, 300, 400, 500, 750, 1000)


def recipe_arguments(args, vocabulary_dir):
    """The `zoo/transformer/train.py` options of the run."""
    from zoo.transformer import train

    return train.parse_args(
        [
            "--data", "sample",
            "--out", os.path.join(vocabulary_dir, "unused"),
            "--config", args.config,
            "--dropout", "0",
            "--batch-tokens", str(args.batch_tokens),
            "--max-length", str(args.max_length),
            "--warmup-steps", str(args.warmup_steps),
            "--seed", str(args.seed),
            "--vocabulary-dir", vocabulary_dir,
        ]
    )  # fmt: skip


def fixed_order(batches, args):
    """The recipe's first `args.steps` batches, as a dataset in that order.

    The recipe's batches are reshuffled for every `tf.data` iterator, and
    Keras makes another number of iterators before training on each backend;
    reading the batches once here gives every backend the same order.
    """
    import numpy as np
    import tensorflow as tf

    sources, targets = [], []
    for source, target in batches.repeat().take(args.steps):
        sources.append(source.numpy())
        targets.append(target.numpy())
    size = len(sources[0])
    pairs = (np.concatenate(sources), np.concatenate(targets))
    return tf.data.Dataset.from_tensor_slices(pairs).batch(size)


def step_values(logged, mean):
    """Each step's value from Keras's batch logs, which hold the epoch so far.

    `mean`: the logs hold the running mean over equal batches (the loss),
    else the running sum (the `tokens` count).
    """
    totals = [v * (i + 1) for i, v in enumerate(logged)] if mean else list(logged)
    return [b - a for a, b in zip([0.0] + totals[:-1], totals)]


def worker(args):
    """Trains on this process's backend; prints one JSON line."""
    import keras
    import numpy as np

    from zoo.transformer import train
    from zoo.translation import TranslationPreprocessor
    from zoo.translation.data import load_splits

    recipe = recipe_arguments(args, args.work)
    keras.utils.set_random_seed(recipe.seed)
    pairs, _, _ = load_splits(recipe)
    vocabulary = train.shared_vocabulary(pairs, recipe)
    preprocessor = TranslationPreprocessor(
        vocabulary, vocabulary, recipe.max_length, recipe.max_length
    )
    model = train.build_model(recipe, len(vocabulary), preprocessor)
    if keras.backend.backend() == "jax":
        model.jit_compile = True
    model.use_static_shapes()
    initial = os.path.join(args.work, "initial_weights.npz")
    if keras.backend.backend() == "tensorflow":
        weights = model.get_weights()
        np.savez(initial, **{f"w{i:05d}": w for i, w in enumerate(weights)})
    else:
        with np.load(initial) as saved:
            model.set_weights([saved[k] for k in sorted(saved.files)])
    data = fixed_order(train.batches(recipe, pairs, preprocessor, static=True), args)

    ends, means, tokens = [], [], []

    class StepEnds(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            means.append(float(logs["loss"]))  # The step has finished.
            ends.append(time.perf_counter())
            tokens.append(float(logs["tokens"]))

    model.fit(data, epochs=1, callbacks=[StepEnds()], verbose=0)
    print(
        json.dumps(
            {
                "backend": keras.backend.backend(),
                "jit_compile": bool(model.jit_compile),
                "pairs_per_step": args.batch_tokens // args.max_length,
                "parameters": model.count_params(),
                "loss": step_values(means, mean=True),
                "running_mean": means,
                "tokens": step_values(tokens, mean=False),
                "step_ends": [t - ends[0] for t in ends],
            }
        ),
        flush=True,
    )


def compare(runs, warmup):
    """Adds each run's curve differences from TensorFlow's and its throughput."""
    reference = runs.get("tensorflow")
    for run in runs.values():
        steps = len(run["loss"])
        # Real target subwords of each batch: TensorFlow's count, the same
        # batches on every backend.
        tokens = (reference or run)["tokens"][:steps]
        measured = range(warmup + 1, steps)
        seconds = run["step_ends"][-1] - run["step_ends"][warmup]
        run["steady_steps"] = len(measured)
        run["steady_seconds"] = round(seconds, 3)
        run["subwords_per_second"] = (
            round(sum(tokens[i] for i in measured) / seconds, 1)
            if seconds > 0
            else None
        )
        run["steps_per_second"] = round(len(measured) / seconds, 3) if seconds else None
        if reference is None or run is reference:
            continue
        pairs = list(zip(run["loss"], reference["loss"]))
        run["max_relative_difference"] = max(abs(a - b) / abs(b) for a, b in pairs)
        run["final_minus_tensorflow"] = run["loss"][-1] - reference["loss"][-1]
        run["tokens_equal_tensorflows"] = run["tokens"] == reference["tokens"][:steps]
    return runs


def table(runs):
    names = list(runs)
    steps = min(len(r["loss"]) for r in runs.values())
    rows = [s for s in REPORTED_STEPS if s < steps] + [steps]
    lines = ["| step | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for step in rows:
        values = " | ".join(f"{runs[n]['loss'][step - 1]:.4f}" for n in names)
        lines.append(f"| loss at {step} | {values} |")

    def row(label, key, fmt):
        cells = []
        for name in names:
            value = runs[name].get(key)
            cells.append("-" if value is None else fmt.format(value))
        lines.append(f"| {label} | " + " | ".join(cells) + " |")

    row("max relative difference from TF", "max_relative_difference", "{:.2e}")
    row("final loss - TF's", "final_minus_tensorflow", "{:+.2e}")
    row("target subwords/s", "subwords_per_second", "{:,.0f}")
    row("steps/s", "steps_per_second", "{:.2f}")
    row("jit_compile", "jit_compile", "{}")
    row("logged target tokens = TF's", "tokens_equal_tensorflows", "{}")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=10, help="steps not timed")
    parser.add_argument("--config", default="tiny")
    parser.add_argument("--batch-tokens", type=int, default=1024)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--warmup-steps", type=int, default=200, help="of the schedule")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="also write the runs to this file")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--work", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.warmup + 2 > args.steps:
        parser.error(f"--steps {args.steps} must exceed --warmup {args.warmup} + 1")
    if args.worker:
        return worker(args)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from machine import describe

    backends = [b for b in args.backends.split(",") if importlib.util.find_spec(b)]
    if backends[:1] != ["tensorflow"]:
        parser.error("--backends must start with tensorflow (the initial weights)")
    header = [
        describe(),
        f"Transformer recipe, config {args.config}, dropout 0, "
        f"{args.batch_tokens // args.max_length} pairs x {args.max_length} subwords "
        f"a step, schedule warmup {args.warmup_steps}, {args.steps} steps, "
        f"seed {args.seed}; throughput after {args.warmup} steps",
    ]
    print("\n".join(header), flush=True)
    runs = {}
    with tempfile.TemporaryDirectory() as work:
        for backend in backends:
            command = [sys.executable, os.path.abspath(__file__), "--worker"]
            command += [f"--work={work}", *(argv if argv is not None else sys.argv[1:])]
            env = {
                **os.environ,
                "KERAS_BACKEND": backend,
                "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
            }
            start = time.time()
            done = subprocess.run(command, env=env, capture_output=True, text=True)
            if done.returncode != 0:
                tail = " | ".join(done.stderr.strip().splitlines()[-3:])
                print(f"{backend}: failed: {tail}", flush=True)
                continue
            runs[backend] = json.loads(done.stdout.strip().splitlines()[-1])
            print(f"{backend}: {time.time() - start:.0f} s in all", flush=True)
    compare(runs, args.warmup)
    print(describe())
    print()
    print(table(runs))
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as out:
            json.dump(
                {"header": header, "after": describe(), "runs": runs}, out, indent=1
            )
    return runs


if __name__ == "__main__":
    main()
