"""Trains a `zoo.Seq2Seq` on the Bible EN->ES split and writes a preset.

Example (the command behind `seq2seq_bahdanau_bible_en_es`):

    python -m zoo.seq2seq.train --out zoo/seq2seq/presets/seq2seq_bahdanau_bible_en_es

On the embedded sample (no Debian data needed, seconds):

    python -m zoo.seq2seq.train --data sample --epochs 2 --out /tmp/s2s

The run's state is saved after every epoch in `--run-dir` (`<out>.run`):
the same command run again after a kill resumes there (`zoo.training`).
"""

import argparse
import os
import shlex
import sys
import time

import keras
import tensorflow as tf

from keras_attention.training.strategy import get_strategy
from zoo import training
from zoo.arguments import positive_float, positive_int
from zoo.callbacks import StepBudget, TimeBudget
from zoo.data import vocabulary
from zoo.seq2seq.model import Seq2Seq
from zoo.seq2seq.preprocessor import TranslationPreprocessor
from zoo.task import use_static_shapes_for
from zoo.translation import (
    add_data_arguments,
    evaluate_translations,
    fixed_batches,
    load_splits,
    translation_metadata,
)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_arguments(p)
    p.add_argument("--out", required=True, help="preset directory to write")
    training.add_run_arguments(p)
    p.add_argument("--epochs", type=positive_int, default=20)
    p.add_argument(
        "--batch-size", type=positive_int, default=64, help="global batch size"
    )
    p.add_argument(
        "--time-budget",
        type=positive_float,
        default=None,
        help="stop training after this many minutes",
    )
    p.add_argument(
        "--max-steps",
        type=positive_int,
        default=None,
        help="stop training after this many optimizer steps (an equal budget "
        "for comparisons that does not depend on machine load)",
    )
    p.add_argument("--vocabulary-size", type=int, default=8000)
    p.add_argument("--vocabulary-dir", help="reuse/keep learned vocabularies here")
    p.add_argument("--max-length", type=int, default=64, help="subwords per side")
    p.add_argument("--embedding-dim", type=int, default=256)
    p.add_argument("--units", type=int, default=256)
    p.add_argument("--encoder-layers", type=int, default=1)
    p.add_argument("--cell", default="lstm", choices=["lstm", "gru"])
    p.add_argument(
        "--bidirectional",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="bidirectional encoder (Luong et al. used --no-bidirectional)",
    )
    p.add_argument("--style", default="bahdanau", choices=["bahdanau", "luong"])
    p.add_argument("--score", default="additive")
    p.add_argument("--window", type=int, default=None)
    p.add_argument("--local", default="monotonic", choices=["monotonic", "predictive"])
    p.add_argument("--dropout", type=float, default=0.2)
    p.add_argument("--learning-rate", type=float, default=1e-3)
    p.add_argument("--patience", type=int, default=2)
    p.add_argument("--strategy", default="auto")
    p.add_argument(
        "--static-shapes",
        action="store_true",
        help="fixed-size batches padded to --max-length (automatic on TPUs)",
    )
    p.add_argument("--beam-width", type=int, default=4)
    p.add_argument(
        "--eval-limit",
        type=int,
        default=None,
        help="translate only the first N test pairs",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--verbose", type=int, default=1)
    return p.parse_args(argv)


def vocabularies(train, args):
    """WordPiece vocabularies learned on the training pairs (keras-hub).

    With `--vocabulary-dir`, vocabularies saved there by an earlier run with
    the same data and size are reused (learning them takes minutes).
    """
    paths = None
    if args.vocabulary_dir:
        os.makedirs(args.vocabulary_dir, exist_ok=True)
        paths = [
            os.path.join(args.vocabulary_dir, f"{side}_{args.vocabulary_size}.txt")
            for side in ("source", "target")
        ]
        if all(os.path.isfile(p) for p in paths):
            return [vocabulary.load_vocabulary(p) for p in paths]
    vocabs = [
        vocabulary.train_wordpiece(
            [p[i] for p in train], args.vocabulary_size, lowercase=False
        )
        for i in (0, 1)
    ]
    if paths:
        for tokens, path in zip(vocabs, paths):
            vocabulary.save_vocabulary(tokens, path)
    return vocabs


def bucketed(pairs, batch_size, seed, shuffle=True):
    """Batches of raw string pairs of similar length (less padding)."""
    source = tf.constant([p[0] for p in pairs])
    target = tf.constant([p[1] for p in pairs])
    ds = tf.data.Dataset.from_tensor_slices((source, target))
    if shuffle:
        ds = ds.shuffle(len(pairs), seed=seed, reshuffle_each_iteration=True)
    boundaries = [60, 90, 120, 150, 190, 240, 300]
    return ds.bucket_by_sequence_length(
        lambda s, t: tf.strings.length(t),
        bucket_boundaries=boundaries,
        bucket_batch_sizes=[batch_size] * (len(boundaries) + 1),
    )


def main(argv=None):
    args = parse_args(argv)
    command = "python -m zoo.seq2seq.train " + " ".join(
        shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv)
    )
    training.check_folder(args.out, "--out", preset=True)
    if args.vocabulary_dir:
        training.check_folder(args.vocabulary_dir, "--vocabulary-dir")
    run = training.RunDirectory(
        args.run_dir or training.default_run_dir(args.out), vars(args), command
    )
    keras.utils.set_random_seed(args.seed)
    train, validation, test = load_splits(args)
    print(
        f"data: {len(train)} train, {len(validation)} validation, {len(test)} test pairs"
    )

    start = time.time()
    source_vocab, target_vocab = vocabularies(train, args)
    print(
        f"vocabularies: {len(source_vocab)} EN, {len(target_vocab)} ES subwords "
        f"({time.time() - start:.0f} s)"
    )

    strategy = get_strategy(args.strategy)
    with strategy.scope():
        preprocessor = TranslationPreprocessor(
            source_vocab, target_vocab, args.max_length, args.max_length
        )
        model = Seq2Seq(
            len(source_vocab),
            len(target_vocab),
            embedding_dim=args.embedding_dim,
            units=args.units,
            encoder_layers=args.encoder_layers,
            bidirectional=args.bidirectional,
            cell=args.cell,
            style=args.style,
            score=args.score,
            window=args.window,
            local=args.local,
            dropout=args.dropout,
            preprocessor=preprocessor,
        )
        model.compile(
            optimizer=keras.optimizers.Adam(args.learning_rate, clipnorm=1.0),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            weighted_metrics=["accuracy"],
        )
    print(
        f"model: {model.count_params():,} parameters; strategy "
        f"{type(strategy).__name__} with {strategy.num_replicas_in_sync} replica(s)"
    )

    callbacks = [
        keras.callbacks.EarlyStopping(
            monitor="val_loss", patience=args.patience, restore_best_weights=True
        )
    ]
    if args.time_budget:
        callbacks.append(TimeBudget(args.time_budget))
    if args.max_steps:
        callbacks.append(StepBudget(args.max_steps))
    static = use_static_shapes_for(model, strategy, args.static_shapes)
    batches = fixed_batches if static else bucketed
    train_ds = batches(train, args.batch_size, args.seed)
    val_ds = (
        batches(validation, args.batch_size, args.seed, shuffle=False)
        if validation
        else None
    )
    stage = run.stage("train")
    history = stage.fit(
        model,
        train_ds,
        validation_data=val_ds,
        epochs=args.epochs,
        callbacks=callbacks,
        verbose=args.verbose,
    )
    if static:
        model.use_static_shapes(False)  # the preset trims padding again
    train_seconds = stage.seconds
    epochs_run = len(history.history["loss"])
    steps_run = int(model.optimizer.iterations.numpy())
    print(
        f"trained {epochs_run} epochs ({steps_run} steps) in "
        f"{train_seconds / 60:.1f} min"
    )

    metrics = {
        "train_minutes": round(train_seconds / 60, 1),
        "epochs": epochs_run,
        "steps": steps_run,
        "history": {
            k: [round(float(v), 4) for v in vals] for k, vals in history.history.items()
        },
    }
    if test:
        metrics["test"] = evaluate_translations(
            model, test, args.beam_width, args.eval_limit
        )
    metadata = translation_metadata(args, command, (train, validation, test), metrics)
    model.save_to_preset(args.out, metadata=metadata)
    print(f"preset written to {args.out}")
    run.finish()
    return model, metadata


if __name__ == "__main__":
    main()
