"""Trains a `zoo.Seq2Seq` on the Bible EN->ES split and writes a preset.

Example (the command behind `seq2seq_bahdanau_bible_en_es`):

    python -m zoo.seq2seq.train --out zoo/seq2seq/presets/seq2seq_bahdanau_bible_en_es

On the embedded sample (no Debian data needed, seconds):

    python -m zoo.seq2seq.train --data sample --epochs 2 --out /tmp/s2s

The shared options (budgets, seed, strategy, `--results`, the run directory
that resumes a killed run) are those of every training script
(`zoo.arguments`, `zoo.training`).
"""

import argparse
import os
import time

import keras
import tensorflow as tf

from zoo.arguments import training_parser
from zoo.data import vocabulary
from zoo.seq2seq import Seq2Seq, TranslationPreprocessor
from zoo.training import TrainingRun, compile_classifier
from zoo.translation import (
    add_data_arguments,
    evaluate_translations,
    fixed_batches,
    load_splits,
    translation_metadata,
)


def parse_args(argv=None):
    p = training_parser(__doc__, epochs=20, batch_size=64, learning_rate=1e-3)
    add_data_arguments(p)
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
    p.add_argument("--patience", type=int, default=2)
    p.add_argument("--beam-width", type=int, default=4)
    p.add_argument(
        "--eval-limit",
        type=int,
        default=None,
        help="translate only the first N test pairs",
    )
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


def build_model(args, source_vocab, target_vocab):
    """The compiled `Seq2Seq` of the arguments, with its preprocessor."""
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
    compile_classifier(model, args.learning_rate, clipnorm=1.0, weighted=True)
    return model


def main(argv=None):
    args = parse_args(argv)
    run = TrainingRun(
        "zoo.seq2seq.train",
        args,
        argv,
        folders=[("--vocabulary-dir", args.vocabulary_dir)],
    )
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
    metrics = fit.metrics()
    if test:
        metrics["test"] = evaluate_translations(
            model, test, args.beam_width, args.eval_limit
        )
    data = translation_metadata(args, run.command, (train, validation, test), {})
    return model, run.save_and_finish(model, data["task"], data["data"], metrics)


if __name__ == "__main__":
    main()
