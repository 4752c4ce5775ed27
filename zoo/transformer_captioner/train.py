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
script (`zoo.training.flags`, `zoo.training.harness`).
"""

from zoo.captioning import CaptionPreprocessor
from zoo.captioning.recipe import train_captioner
from zoo.training.flags import pick_options, training_parser
from zoo.training.harness import TrainingRun, compile_classifier
from zoo.transformer_captioner.task import TransformerCaptioner

#: The options `TransformerCaptioner` takes as constructor arguments.
MODEL_OPTIONS = (
    "encoder_layers decoder_layers hidden_dim intermediate_dim num_heads dropout"
).split()


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


def main(argv=None):
    args = parse_args(argv)
    run = TrainingRun("zoo.transformer_captioner.train", args, argv)
    return train_captioner(run, args, build_model, 4, describe="")


if __name__ == "__main__":
    main()
