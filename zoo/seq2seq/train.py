"""Trains a `zoo.Seq2Seq` on the Bible EN->ES split and writes a preset.

Example (the command behind `seq2seq_bahdanau_bible_en_es`):

    python -m zoo.seq2seq.train --out zoo/seq2seq/presets/seq2seq_bahdanau_bible_en_es

On the embedded sample (no Debian data needed, seconds):

    python -m zoo.seq2seq.train --data sample --epochs 2 --out /tmp/s2s

The shared options (budgets, seed, strategy, `--results`, the run directory
that resumes a killed run) are those of every training script
(`zoo.training.flags`, `zoo.training.harness`).
"""

import argparse
import time

import keras
import tensorflow as tf

from zoo.data import vocabulary
from zoo.seq2seq import Seq2Seq
from zoo.training.flags import pick_options, training_parser
from zoo.training.harness import compile_classifier
from zoo.translation import TranslationPreprocessor, fixed_batches
from zoo.translation.recipe import (
    add_translation_arguments,
    finish_translation_run,
    open_translation_run,
)

#: The options `Seq2Seq` takes as constructor arguments of the same name.
MODEL_OPTIONS = (
    "embedding_dim units encoder_layers bidirectional cell style score window "
    "local dropout"
).split()


def parse_args(argv=None):
    p = training_parser(__doc__, epochs=20, batch_size=64, learning_rate=1e-3)
    add_translation_arguments(p, 8000, "reuse/keep learned vocabularies here")
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
    p.add_argument("--patience", type=int, default=2)
    return p.parse_args(argv)


def vocabularies(train, args):
    """WordPiece vocabularies learned on the training pairs (keras-hub).

    With `--vocabulary-dir`, vocabularies saved there by an earlier run with
    the same data and size are reused (learning them takes minutes). Prints
    their sizes and the time taken.
    """
    print(f"building the vocabularies from {len(train)} training pairs...", flush=True)
    start = time.time()
    source, target = (
        vocabulary.learned_wordpiece(
            [p[i] for p in train],
            args.vocabulary_size,
            args.vocabulary_dir,
            name=side,
            lowercase=False,
        )
        for i, side in enumerate(("source", "target"))
    )
    print(
        f"vocabularies: {len(source)} EN, {len(target)} ES subwords "
        f"({time.time() - start:.0f} s)"
    )
    return source, target


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


def build_model(args, source_vocab, target_vocab):
    """The compiled `Seq2Seq` of the arguments, with its preprocessor."""
    preprocessor = TranslationPreprocessor(
        source_vocab, target_vocab, args.max_length, args.max_length
    )
    model = Seq2Seq(
        len(source_vocab),
        len(target_vocab),
        preprocessor=preprocessor,
        **pick_options(args, *MODEL_OPTIONS),
    )
    compile_classifier(model, args.learning_rate, clipnorm=1.0, weighted=True)
    return model


def main(argv=None):
    args = parse_args(argv)
    run, splits = open_translation_run("zoo.seq2seq.train", args, argv)
    train, validation, _ = splits
    source_vocab, target_vocab = vocabularies(train, args)
    with run.strategy.scope():
        model = build_model(args, source_vocab, target_vocab)
    print(f"model: {model.count_params():,} parameters; {run.describe_strategy()}")

    batches = fixed_batches if run.static_shapes(model) else bucketed
    fit = run.fit(
        model,
        batches(train, args.batch_size, args.seed),
        validation_data=batches(validation, args.batch_size, args.seed, shuffle=False)
        if validation
        else None,
        callbacks=[
            keras.callbacks.EarlyStopping(
                monitor="val_loss", patience=args.patience, restore_best_weights=True
            )
        ],
    )
    return model, finish_translation_run(run, model, splits, fit.metrics())


if __name__ == "__main__":
    main()
