"""Trains a `zoo.Transformer` on the Bible EN->ES split and writes a preset.

One WordPiece vocabulary is learned on the English and Spanish training
sentences together (shared embeddings, tied pre-softmax weights); batches
hold about `--batch-tokens` subwords of sentences of similar length; Adam
(0.9, 0.98, 1e-9) with the warmup / inverse-square-root schedule and label
smoothing 0.1, as in Vaswani et al.; greedy and beam-4 sacreBLEU on the test
books at the end.

Example (a CPU-sized model under a 45-minute budget):

    python -m zoo.transformer.train --config small --time-budget 45 \\
        --out zoo/transformer/presets/transformer_bible_en_es

On the embedded sample (no Debian data needed, seconds):

    python -m zoo.transformer.train --data sample --config tiny --epochs 2 \\
        --out /tmp/transformer

From token-id arrays (`python -m zoo.translation.arrays --out FILE`, written
where TensorFlow is), with Keras, JAX or PyTorch and NumPy alone (no
TensorFlow; `--data` ends in `.npz`; the test split is scored back where
TensorFlow is, by `evaluate` of the preset):

    python -m zoo train transformer --data bible_arrays.npz --out /tmp/t

The shared options (budgets, seed, strategy, `--results`, the run directory
that resumes a killed run, with the `--average-last` checkpoints) are those
of every training script (`zoo.training.flags`, `zoo.training.harness`).
"""

import os
import time

import keras
import numpy as np

from keras_attention.training.schedules import InverseSqrtSchedule
from zoo import quiet
from zoo.base import backends
from zoo.data import vocabulary
from zoo.training.flags import (
    fail,
    pick_options,
    positive_float,
    positive_int,
    training_parser,
)
from zoo.training.harness import TrainingRun
from zoo.transformer import Transformer, configs
from zoo.transformer.averaging import Checkpoints, average_checkpoints
from zoo.transformer.losses import MaskedLabelSmoothingCrossEntropy, TargetTokens
from zoo.translation import TranslationPreprocessor, fixed_batches
from zoo.translation.arrays import ArrayBatches, read_arrays
from zoo.translation.recipe import (
    add_translation_arguments,
    finish_translation_run,
    open_translation_run,
)

tf = quiet.LazyModule("tensorflow", "Training on the Bible pairs (tf.data)")


def parse_args(argv=None):
    p = training_parser(__doc__, epochs=100)
    add_translation_arguments(p, 16000, "reuse/keep the learned vocabulary here")
    p.add_argument("--config", default="small", choices=sorted(configs.CONFIGS))
    p.add_argument("--num-layers", type=int, help="override the config")
    p.add_argument("--hidden-dim", type=int, help="override the config")
    p.add_argument("--intermediate-dim", type=int, help="override the config")
    p.add_argument("--num-heads", type=int, help="override the config")
    p.add_argument("--dropout", type=float, help="override the config")
    p.add_argument("--normalize-first", action="store_true", help="pre-norm")
    p.add_argument("--score", default="scaled_dot")
    p.add_argument(
        "--batch-tokens",
        type=positive_int,
        default=4096,
        help="subwords per batch (source or target side, padding included); "
        "with --static-shapes, batches of batch-tokens // max-length pairs",
    )
    p.add_argument("--warmup-steps", type=int, default=4000)
    p.add_argument("--lr-scale", type=float, default=1.0, help="schedule factor")
    p.add_argument("--label-smoothing", type=float, default=0.1)
    p.add_argument(
        "--average-last",
        type=int,
        default=0,
        help="average the last N checkpoints of this run, written in the run "
        "directory (kept if validation loss improves)",
    )
    p.add_argument("--checkpoint-minutes", type=positive_float, default=10.0)
    p.add_argument(
        "--jit-compile",
        action="store_true",
        help="XLA training step on TensorFlow (JAX always compiles its step; "
        "PyTorch runs eagerly)",
    )
    return p.parse_args(argv)


def shared_vocabulary(train, args):
    """One WordPiece vocabulary learned on both sides of the training pairs.

    With `--vocabulary-dir`, a vocabulary saved there by an earlier run with
    the same data and size is reused. Prints its size and the time taken.
    """
    print(f"building the vocabularies from {len(train)} training pairs...", flush=True)
    start = time.time()
    tokens = vocabulary.learned_wordpiece(
        [p[0] for p in train] + [p[1] for p in train],
        args.vocabulary_size,
        args.vocabulary_dir,
        name="joint",
        lowercase=False,
    )
    print(
        f"vocabulary: {len(tokens)} joint EN+ES subwords ({time.time() - start:.0f} s)"
    )
    return tokens


def subword_lengths(pairs, preprocessor):
    """Subwords per pair (the longer side, plus [START]/[END])."""
    lengths = []
    for begin in range(0, len(pairs), 4096):
        chunk = pairs[begin : begin + 4096]
        sides = []
        for i, tokenizer in enumerate(
            (preprocessor.source_tokenizer, preprocessor.target_tokenizer)
        ):
            ids = tokenizer(tf.constant([p[i] for p in chunk]))
            sides.append(np.array([len(row) for row in ids]))
        lengths.extend(np.maximum(*sides) + 1)
    return np.minimum(np.array(lengths), preprocessor.source_sequence_length)


def token_batches(pairs, lengths, batch_tokens, seed=0, shuffle=True):
    """Raw string pairs batched by length, about `batch_tokens` subwords each.

    Pairs are bucketed by subword length (boundaries every 8 subwords); a
    bucket of length `L` makes batches of `batch_tokens // L` pairs, so
    short sentences come in large batches and padding stays small.
    """
    longest = int(max(lengths))
    boundaries = list(range(8, longest + 1, 8))
    sizes = [max(1, batch_tokens // b) for b in boundaries + [longest + 8]]
    ds = tf.data.Dataset.from_tensor_slices(
        (
            tf.constant([p[0] for p in pairs]),
            tf.constant([p[1] for p in pairs]),
            tf.constant(lengths, "int32"),
        )
    )
    if shuffle:
        ds = ds.shuffle(len(pairs), seed=seed, reshuffle_each_iteration=True)
    ds = ds.bucket_by_sequence_length(
        lambda s, t, n: n, bucket_boundaries=boundaries, bucket_batch_sizes=sizes
    )
    return ds.map(lambda s, t, n: (s, t))


class Throughput(keras.callbacks.Callback):
    """Steps/s and target tokens/s of the training steps.

    The first `skip` steps (tracing, compilation) are left out, and so is
    the time between epochs (validation). The target tokens are read from
    the `tokens` entry of the logs (the `Transformer`'s count of the
    epoch's real target tokens); without one, tokens/s is 0.

    Args:
        skip: int. The first steps not measured. Defaults to `10`.

    Example:
    >>> import numpy as np
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile("sgd", "mse")
    >>> throughput = Throughput(skip=2)
    >>> history = model.fit(np.ones((12, 2)), np.ones((12, 1)), batch_size=2,
    ...     callbacks=[throughput], verbose=0)
    >>> throughput.steps, throughput.measured_steps, throughput.steps_per_second > 0
    (6, 4, True)
    """

    def __init__(self, skip=10):
        super().__init__()
        self.skip = skip
        self.steps = 0
        self.seconds = 0.0
        self.measured_steps = 0
        self.measured_tokens = 0.0

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch_tokens = 0.0
        self._last = time.time()

    def on_train_batch_end(self, batch, logs=None):
        now = time.time()
        epoch_tokens = float((logs or {}).get("tokens", 0.0))
        new_tokens, self._epoch_tokens = epoch_tokens - self._epoch_tokens, epoch_tokens
        self.steps += 1
        if self.steps > self.skip:
            self.seconds += now - self._last
            self.measured_steps += 1
            self.measured_tokens += new_tokens
        self._last = now

    def get_state(self):
        return {
            key: getattr(self, key)
            for key in ("steps", "seconds", "measured_steps", "measured_tokens")
        }

    def set_state(self, state):
        for key, value in state.items():
            setattr(self, key, value)

    @property
    def steps_per_second(self):
        """Measured training steps per second (`0.0` before any).

        Example:
        >>> throughput = Throughput()
        >>> throughput.steps_per_second
        0.0
        >>> throughput.set_state({"steps": 30, "seconds": 4.0,
        ...     "measured_steps": 20, "measured_tokens": 9000.0})  # a resumed run
        >>> throughput.steps_per_second
        5.0
        """
        return self.measured_steps / self.seconds if self.seconds else 0.0

    @property
    def tokens_per_second(self):
        """Measured target tokens per second (`0.0` before any).

        Example:
        >>> throughput = Throughput()
        >>> throughput.set_state({"steps": 30, "seconds": 4.0,
        ...     "measured_steps": 20, "measured_tokens": 9000.0})  # a resumed run
        >>> throughput.tokens_per_second
        2250.0
        """
        return self.measured_tokens / self.seconds if self.seconds else 0.0

    def summary(self):
        """One line of the measured rates, or why there are none.

        Rates are said only when steps were timed: a run of `skip` steps or
        fewer (all tracing and compiling) has none to report.

        Example:
        >>> throughput = Throughput()
        >>> throughput.set_state({"steps": 3, "seconds": 0.0,
        ...     "measured_steps": 0, "measured_tokens": 0.0})
        >>> throughput.summary()
        'speed not measured: 3 steps, and the first 10 (compiling) are not timed'
        >>> throughput.set_state({"steps": 30, "seconds": 4.0,
        ...     "measured_steps": 20, "measured_tokens": 9000.0})
        >>> throughput.summary()
        'after the first 10 steps: 5.00 steps/s, 2250 target subwords/s'
        """
        if not self.measured_steps:
            return (
                f"speed not measured: {self.steps} steps, and the first "
                f"{self.skip} (compiling) are not timed"
            )
        return (
            f"after the first {self.skip} steps: {self.steps_per_second:.2f} "
            f"steps/s, {self.tokens_per_second:.0f} target subwords/s"
        )


def build_model(args, vocabulary_size, preprocessor):
    overrides = pick_options(
        args,
        "num_layers",
        "hidden_dim",
        "intermediate_dim",
        "num_heads",
        "dropout",
        drop_none=True,
    )
    model = Transformer.from_name(
        args.config,
        vocabulary_size=vocabulary_size,
        normalize_first=args.normalize_first,
        score=args.score,
        preprocessor=preprocessor,
        **overrides,
    )
    schedule = InverseSqrtSchedule(
        model.hidden_dim, warmup_steps=args.warmup_steps, scale=args.lr_scale
    )
    model.compile(
        optimizer=keras.optimizers.Adam(
            schedule, beta_1=0.9, beta_2=0.98, epsilon=1e-9
        ),
        loss=MaskedLabelSmoothingCrossEntropy(args.label_smoothing),
        weighted_metrics=["accuracy", TargetTokens()],
        jit_compile=jit_compile(args),
    )
    return model


def jit_compile(args):
    """`compile`'s `jit_compile` for `--jit-compile` on this backend.

    The flag asks TensorFlow for an XLA step (off by default: the recipe's
    variable batch shapes would recompile it). Elsewhere Keras's `"auto"`:
    JAX compiles its step (un-jitted it runs op by op: 0.53 s a step
    against 0.11 s, tiny config on one core, session 26), PyTorch runs
    eagerly.

    Example:
    >>> import argparse
    >>> expected = False if backends.on_tensorflow() else "auto"
    >>> jit_compile(argparse.Namespace(jit_compile=False)) == expected
    True
    """
    return args.jit_compile if backends.on_tensorflow() else "auto"


def pairs_per_batch(args):
    """The pairs of a fixed-size batch: `--batch-tokens // --max-length`."""
    return max(1, args.batch_tokens // args.max_length)


def batches(args, pairs, preprocessor, static, shuffle=True):
    """Training or validation batches: by tokens, or fixed-size when static."""
    if static:
        return fixed_batches(pairs, pairs_per_batch(args), args.seed, shuffle=shuffle)
    lengths = subword_lengths(pairs, preprocessor)
    return token_batches(pairs, lengths, args.batch_tokens, args.seed, shuffle)


def average(model, checkpoints, validation, count):
    """Averages the last `count` checkpoints; keeps them if validation improves."""
    paths = checkpoints.paths[-count:]
    last_loss = model.evaluate(validation, verbose=0, return_dict=True)["loss"]
    last_weights = model.get_weights()
    average_checkpoints(model, paths)
    avg_loss = model.evaluate(validation, verbose=0, return_dict=True)["loss"]
    averaged = {
        "checkpoints": [os.path.basename(p) for p in paths],
        "validation_loss_last": round(float(last_loss), 4),
        "validation_loss_averaged": round(float(avg_loss), 4),
        "kept": "averaged" if avg_loss < last_loss else "last",
    }
    if avg_loss >= last_loss:
        model.set_weights(last_weights)
    print(
        f"checkpoint average of {len(paths)}: validation loss "
        f"{avg_loss:.4f} vs last {last_loss:.4f}; kept {averaged['kept']}"
    )
    return averaged


def train_from_arrays(args, argv):
    """Trains from the token-id arrays of `--data FILE.npz`, without TensorFlow.

    The vocabulary and the lengths are the arrays' (those of the
    preprocessor that wrote them); batches are `--batch-tokens //
    --max-length` pairs (`ArrayBatches`), each cut to its longest row. The
    preset is written without test scores: `evaluate` scores it where
    TensorFlow is.

    Returns:
        `(model, metadata)`, as `main`.
    """
    arrays = read_arrays(args.data)
    run = TrainingRun("zoo.transformer.train", args, argv)
    splits = [
        f"{len(arrays.get(f'{split}_labels', ()))} {split}"
        for split in ("train", "validation", "test")
    ]
    print(f"data: {', '.join(splits)} pairs (token ids, {args.data})")
    vocab = [str(token) for token in arrays["vocabulary"]]
    length = arrays["train_encoder_token_ids"].shape[1]
    with run.strategy.scope():
        preprocessor = TranslationPreprocessor(vocab, vocab, length, length)
        model = build_model(args, len(vocab), preprocessor)
    size = pairs_per_batch(args)
    train_ds = ArrayBatches(arrays, size, seed=args.seed)
    val_ds = None
    if "validation_labels" in arrays:
        val_ds = ArrayBatches(arrays, size, split="validation", shuffle=False)
    throughput = Throughput()
    fit = run.fit(model, train_ds, validation_data=val_ds, callbacks=[throughput])
    print(throughput.summary())
    metrics = fit.metrics()
    data = {
        "source": args.data,
        **{
            f"{split}_pairs": len(arrays.get(f"{split}_labels", ()))
            for split in ("train", "validation", "test")
        },
    }
    return model, run.save_and_finish(model, "translation en->es", data, metrics)


def main(argv=None):
    args = parse_args(argv)
    if args.data.endswith(".npz"):
        return train_from_arrays(args, argv)
    run, splits = open_translation_run("zoo.transformer.train", args, argv)
    train, validation, _ = splits
    vocab = shared_vocabulary(train, args)
    with run.strategy.scope():
        preprocessor = TranslationPreprocessor(
            vocab, vocab, args.max_length, args.max_length
        )
        model = build_model(args, len(vocab), preprocessor)
    print(
        f"model: {args.config}, {model.num_layers} layers, d_model "
        f"{model.hidden_dim}, d_ff {model.intermediate_dim}, {model.num_heads} "
        f"heads, {model.count_params():,} parameters; {run.describe_strategy()}"
    )

    static = run.static_shapes(model)
    if static:
        try:
            run.strategy.check_batch_size(
                pairs_per_batch(args), "--batch-tokens // --max-length"
            )
        except ValueError as e:
            fail(str(e))
    train_ds = batches(args, train, preprocessor, static)
    val_ds = (
        batches(args, validation, preprocessor, static, shuffle=False)
        if validation
        else None
    )
    throughput = Throughput()
    callbacks = [throughput]
    checkpoints = None
    if args.average_last > 1:
        checkpoints = Checkpoints(
            os.path.join(run.stage("train").path, "checkpoints"),
            args.checkpoint_minutes,
            keep=args.average_last,
        )
        callbacks.append(checkpoints)
    fit = run.fit(model, train_ds, validation_data=val_ds, callbacks=callbacks)
    print(throughput.summary())
    metrics = fit.metrics()
    if throughput.measured_steps:  # a rate of no timed steps would read 0.00
        metrics["steps_per_second"] = round(throughput.steps_per_second, 3)
        metrics["target_subwords_per_second"] = round(throughput.tokens_per_second, 1)
    if checkpoints is not None and val_ds is not None:
        metrics["checkpoint_average"] = average(
            model, checkpoints, val_ds, args.average_last
        )
    return model, finish_translation_run(run, model, splits, metrics)


if __name__ == "__main__":
    main()
