"""Trains a `zoo.ShowAttendTell` captioner and writes a preset.

Example (the command behind `show_attend_tell_fashion_scenes`):

    python -m zoo.show_attend_tell.train \\
        --out zoo/show_attend_tell/presets/show_attend_tell_fashion_scenes

Hard attention (REINFORCE):

    python -m zoo.show_attend_tell.train --attention hard --out /tmp/sat_hard

On the shipped Fashion-MNIST sample (no Debian data needed, a minute):

    python -m zoo.show_attend_tell.train --data sample --train-scenes 512 \\
        --epochs 1 --test-scenes 64 --out /tmp/sat

On a caption dataset in Karpathy's split format (Flickr8k/30k, COCO):

    python -m zoo.show_attend_tell.train --data dataset_flickr8k.json \\
        --images-dir Flicker8k_Dataset --image-size 224 \\
        --backbone MobileNetV2 --backbone-weights imagenet --out /tmp/flickr

The shared options (budgets, seed, strategy, `--results`, the run directory
that resumes a killed run: encoder pretraining, then training) are those of
every training script (`zoo.training.flags`, `zoo.training.harness`).
"""

from zoo.captioning.recipe import train_captioner
from zoo.show_attend_tell import CaptionPreprocessor, ShowAttendTell
from zoo.training.flags import pick_options, training_parser
from zoo.training.harness import TrainingRun, compile_classifier

#: The options `ShowAttendTell` takes as constructor arguments of the same name.
MODEL_OPTIONS = (
    "backbone backbone_weights freeze_backbone annotation_dim embedding_dim "
    "units score attention feedback attention_regularization reinforce_weight "
    "entropy_weight dropout seed"
).split()


def parse_args(argv=None):
    p = training_parser(
        __doc__, epochs=30, batch_size=64, learning_rate=1e-3, verbose=2
    )
    p.add_argument(
        "--data",
        default="scenes",
        help="'scenes' (Fashion-MNIST scenes from the Debian package), "
        "'sample' (scenes from the shipped sample), or a Karpathy dataset_*.json",
    )
    p.add_argument("--images-dir", help="with a Karpathy JSON: the images folder")
    p.add_argument("--image-size", type=int, default=224, help="Karpathy images")
    p.add_argument("--train-scenes", type=int, default=20000)
    p.add_argument("--validation-scenes", type=int, default=500)
    p.add_argument("--test-scenes", type=int, default=2000)
    p.add_argument("--canvas-size", type=int, default=84)
    p.add_argument("--attention", default="soft", choices=["soft", "hard"])
    p.add_argument("--score", default="additive")
    p.add_argument("--backbone", default="small")
    p.add_argument("--backbone-weights", default=None)
    p.add_argument("--freeze-backbone", action="store_true")
    p.add_argument("--annotation-dim", type=int, default=128)
    p.add_argument("--embedding-dim", type=int, default=64)
    p.add_argument("--units", type=int, default=256)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument(
        "--feedback",
        default="context",
        choices=["context", "weights"],
        help="what the LSTM reads besides the word: the context (paper) or "
        "the attention weights",
    )
    p.add_argument(
        "--attention-regularization",
        type=float,
        default=0.002,
        help="lambda of the doubly stochastic penalty (soft attention)",
    )
    p.add_argument("--reinforce-weight", type=float, default=1.0)
    p.add_argument("--entropy-weight", type=float, default=0.01)
    p.add_argument("--vocabulary-size", type=int, default=1000)
    p.add_argument("--max-length", type=int, default=24, help="subwords per caption")
    p.add_argument(
        "--pretrain-minutes",
        type=float,
        default=0.0,
        help="first train the encoder as a Fashion-MNIST item classifier for "
        "this many minutes (the paper's encoder is a pretrained CNN)",
    )
    p.add_argument("--pretrain-items", type=int, default=20000)
    p.add_argument("--beam-widths", default="1,3")
    return p.parse_args(argv)


def build_model(args, vocab, image_shape):
    """The compiled `ShowAttendTell` of the arguments, with its preprocessor."""
    preprocessor = CaptionPreprocessor(vocab, args.max_length)
    model = ShowAttendTell(
        len(vocab),
        image_shape=image_shape,
        end_token_id=preprocessor.end_id,
        preprocessor=preprocessor,
        **pick_options(args, *MODEL_OPTIONS),
    )
    compile_classifier(model, args.learning_rate, clipnorm=5.0, weighted=True)
    return model


def main(argv=None):
    args = parse_args(argv)
    run = TrainingRun("zoo.show_attend_tell.train", args, argv)
    return train_captioner(
        run, args, build_model, 3, describe=f"{args.attention} attention, "
    )


if __name__ == "__main__":
    main()
