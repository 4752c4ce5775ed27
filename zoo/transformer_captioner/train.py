"""Trains a `zoo.TransformerCaptioner` on Fashion-MNIST scenes and writes a preset.

Example (the command behind `transformer_captioner_fashion_scenes`):

    python -m zoo.transformer_captioner.train \\
        --out zoo/transformer_captioner/presets/transformer_captioner_fashion_scenes \\
        --train-scenes 30000 --pretrain-minutes 3 --time-budget 40

On the shipped Fashion-MNIST sample (no Debian data needed, a minute):

    python -m zoo.transformer_captioner.train --data sample --train-scenes 256 \\
        --epochs 1 --test-scenes 32 --pretrain-minutes 0 --out /tmp/tcap

It prints, on the held-out test scenes (the same 2,000 as
Show-Attend-Tell's), BLEU-1..4, the share of nouns whose attention peak
falls in the named item's box and the decoding time for each beam width
(`zoo.captioning.evaluation.evaluate_scenes`). The per-epoch history
goes to `experiments/transformer_captioner/history/<preset>.json`, not into
the preset. The shared options (budgets, seed, strategy, `--results`, the
run directory that resumes a killed run) are those of every training
script (`zoo.arguments`, `zoo.training`).
"""

import json
import os
import time

import keras

from zoo.captioning import CaptionPreprocessor
from zoo.captioning.recipe import (
    data_metadata,
    dataset,
    evaluate_test_split,
    load_data,
    pretrain_encoder,
)
from zoo.data import vocabulary
from zoo.training.flags import pick_options, training_parser
from zoo.training.harness import TrainingRun, compile_classifier
from zoo.transformer_captioner.task import TransformerCaptioner

#: The options `TransformerCaptioner` takes as constructor arguments.
MODEL_OPTIONS = (
    "encoder_layers decoder_layers hidden_dim intermediate_dim num_heads dropout"
).split()

#: Where the per-epoch history of a run goes (one JSON file per preset).
HISTORY_DIR = os.path.join("experiments", "transformer_captioner", "history")


def parse_args(argv=None):
    p = training_parser(
        __doc__, epochs=60, batch_size=64, learning_rate=1e-3, verbose=2
    )
    p.add_argument(
        "--data",
        default="scenes",
        choices=["scenes", "sample"],
        help="'scenes' (Fashion-MNIST scenes from the Debian package) or "
        "'sample' (scenes from the shipped sample)",
    )
    p.add_argument("--train-scenes", type=int, default=30000)
    p.add_argument("--validation-scenes", type=int, default=500)
    p.add_argument("--test-scenes", type=int, default=2000)
    p.add_argument("--canvas-size", type=int, default=84)
    p.add_argument("--encoder-layers", type=int, default=2)
    p.add_argument("--decoder-layers", type=int, default=2)
    p.add_argument("--hidden-dim", type=int, default=128)
    p.add_argument("--intermediate-dim", type=int, default=256)
    p.add_argument("--num-heads", type=int, default=4)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--vocabulary-size", type=int, default=1000)
    p.add_argument("--max-length", type=int, default=24, help="subwords per caption")
    p.add_argument(
        "--pretrain-minutes",
        type=float,
        default=3.0,
        help="first train the CNN as a Fashion-MNIST item classifier for this "
        "many minutes (as Show-Attend-Tell's encoder)",
    )
    p.add_argument("--pretrain-items", type=int, default=20000)
    p.add_argument("--beam-widths", default="1,4")
    p.add_argument(
        "--history-dir",
        default=HISTORY_DIR,
        help="folder of the per-epoch history file (default: %(default)s)",
    )
    return p.parse_args(argv)


def build_model(args, vocab, image_shape):
    """The compiled `TransformerCaptioner` of the arguments, with its preprocessor."""
    preprocessor = CaptionPreprocessor(vocab, args.max_length)
    model = TransformerCaptioner(
        len(vocab),
        image_shape=image_shape,
        preprocessor=preprocessor,
        **pick_options(args, *MODEL_OPTIONS),
    )
    compile_classifier(model, args.learning_rate, clipnorm=1.0, weighted=True)
    return model


def write_history(args, run, history):
    """Writes the per-epoch history to `--history-dir`; returns its path.

    The file names the preset and the command beside the history, as the
    other families' history files do.
    """
    name = os.path.basename(os.path.normpath(args.out or args.results or "run"))
    path = os.path.join(args.history_dir, f"{name}.json")
    os.makedirs(args.history_dir, exist_ok=True)
    record = {"preset": name, "command": run.command, "history": history}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(record, f, indent=1)
    print(f"history written to {path}")
    return path


def main(argv=None):
    args = parse_args(argv)
    run = TrainingRun("zoo.transformer_captioner.train", args, argv)
    start = time.time()
    splits = train, validation, test = load_data(args)
    print(
        f"data: {len(train['captions'])} train, {len(validation['captions'])} "
        f"validation, {len(test['captions'])} test captions "
        f"({time.time() - start:.0f} s)"
    )
    vocab = vocabulary.train_wordpiece(train["captions"], args.vocabulary_size)
    print(f"vocabulary: {len(vocab)} subwords")
    image_shape = (*train["images"].shape[1:3], 1)
    with run.strategy.scope():
        model = build_model(args, vocab, image_shape)
    print(
        f"model: {model.count_params():,} parameters, "
        f"{model.grid_shape[0]}x{model.grid_shape[1]} grid; {run.describe_strategy()}"
    )

    pretraining = None
    if args.pretrain_minutes > 0:
        with run.strategy.scope():
            pretraining = pretrain_encoder(model, args, run)

    static = run.static_shapes(model)
    fit = run.fit(
        model,
        dataset(train, args.batch_size, args.seed, drop_remainder=static),
        validation_data=dataset(
            validation, args.batch_size, args.seed, False, drop_remainder=static
        ),
        callbacks=[
            keras.callbacks.ReduceLROnPlateau(
                monitor="val_loss", factor=0.3, patience=2, min_lr=1e-5, verbose=1
            ),
            keras.callbacks.EarlyStopping(
                monitor="val_loss", patience=4, restore_best_weights=True
            ),
        ],
    )
    metrics = {"encoder_pretraining": pretraining, **fit.metrics()}
    metrics["history_file"] = write_history(args, run, metrics.pop("history"))
    widths = [int(w) for w in args.beam_widths.split(",")]
    metrics["test"] = evaluate_test_split(model, test, widths)
    data = data_metadata(args, splits)
    return model, run.save_and_finish(model, "image captioning", data, metrics)


if __name__ == "__main__":
    main()
