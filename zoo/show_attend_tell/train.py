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

import time

import keras
import numpy as np
import tensorflow as tf

from zoo.captioning.evaluation import bleu_scores, evaluate_scenes
from zoo.data import captions as caption_data
from zoo.data import fashion_mnist, vocabulary
from zoo.data import scenes as scene_data
from zoo.show_attend_tell import CaptionPreprocessor, ShowAttendTell
from zoo.training.callbacks import TimeBudget
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


def load_data(args):
    """`(train, validation, test)`: dicts with `images` and `captions`.

    Scenes also carry `labels` and `boxes`; Karpathy splits carry, per image,
    all its reference captions in `references` (training pairs one image
    with each of its captions).
    """
    if args.data in ("scenes", "sample"):
        sample = args.data == "sample"

        def split(name, count):
            return scene_data.load(
                name, num_scenes=count, canvas_size=args.canvas_size, sample=sample
            )

        return (
            split("train", args.train_scenes),
            split("validation", args.validation_scenes),
            split("test", args.test_scenes),
        )
    size = (args.image_size, args.image_size)

    def karpathy(name):
        records = caption_data.load_karpathy(args.data, args.images_dir, split=name)
        images = caption_data.load_images([r.path for r in records], size)
        return {
            "images": images,
            "captions": [r.captions[0] for r in records],
            "references": [r.captions for r in records],
        }

    train = karpathy("train")
    # One (image, caption) pair per reference caption.
    counts = [len(r) for r in train["references"]]
    train["images"] = np.repeat(train["images"], counts, axis=0)
    train["captions"] = [c for r in train["references"] for c in r]
    return train, karpathy("val"), karpathy("test")


def dataset(data, batch_size, seed, shuffle=True, drop_remainder=False):
    """Batches of raw `(image, caption)` pairs, shuffled each epoch."""
    images = data["images"]
    if images.ndim == 3:
        images = images[..., None]
    ds = tf.data.Dataset.from_tensor_slices((images, tf.constant(data["captions"])))
    if shuffle:
        ds = ds.shuffle(len(images), seed=seed, reshuffle_each_iteration=True)
    return ds.batch(batch_size, drop_remainder=drop_remainder)


def pretrain_encoder(model, args, run):
    """Trains the encoder as an item classifier on single translated items.

    Xu et al. use an ImageNet-pretrained CNN; here the built-in CNN learns
    Fashion-MNIST classes first (items pasted at random positions of the
    scene canvas, from the same training images as the training scenes, a
    global max pool and a softmax on top), then the captioner fine-tunes it.
    Without this, the captioner learned which items a scene holds from the
    mean annotation before its attention learned to look at them.
    """
    images, labels = scene_data.source_items("train", sample=args.data == "sample")
    images, labels = images[: args.pretrain_items], labels[: args.pretrain_items]
    canvases = fashion_mnist.translate(images, args.canvas_size, seed=args.seed)[0]
    inputs = keras.Input(model.image_shape)
    x = inputs
    for layer in model.backbone_layers:
        x = layer(x)
    x = keras.layers.GlobalMaxPooling2D()(x)
    classifier = keras.Model(inputs, keras.layers.Dense(10)(x), name="pretrain")
    compile_classifier(classifier, args.learning_rate)
    ds = tf.data.Dataset.from_tensor_slices((canvases[..., None], labels))
    ds = ds.shuffle(len(canvases), seed=args.seed).batch(args.batch_size)

    def scale(x, y):
        return tf.cast(x, "float32") / 255.0, y

    ds = ds.map(scale)
    fit = run.fit(
        classifier,
        ds,
        stage="pretrain",
        epochs=100,
        callbacks=[TimeBudget(args.pretrain_minutes)],
        budgets=False,
    )
    accuracy = fit.history["accuracy"][-1]
    print(
        f"encoder pretrained {fit.epochs} epochs in {fit.seconds / 60:.1f} min, "
        f"item accuracy {accuracy}"
    )
    return {"minutes": round(fit.seconds / 60, 1), "train_accuracy": accuracy}


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


def evaluate_test_split(model, test, beam_widths):
    """BLEU (and, on scenes, attention correctness) on the test split."""
    if "labels" in test:
        return evaluate_scenes(model, test, beam_widths)
    metrics = {}
    for width in beam_widths if test["captions"] else ():
        hypotheses = model.caption(test["images"], beam_width=width)
        metrics[f"beam{width}"] = bleu_scores(hypotheses, test["references"])
        print(f"beam {width}: {metrics[f'beam{width}']}")
    return metrics


def data_metadata(args, splits):
    """The data of the run, as data: source, sizes and split."""
    train, validation, test = splits
    data = {
        "source": args.data,
        "train_captions": len(train["captions"]),
        "validation_captions": len(validation["captions"]),
        "test_captions": len(test["captions"]),
    }
    if "labels" in test:
        data["canvas_size"] = args.canvas_size
        data["split"] = dict(scene_data.SOURCE_IMAGES)
    else:
        data["split"] = "karpathy"
        data["images_dir"] = args.images_dir
        data["image_size"] = args.image_size
    return data


def main(argv=None):
    args = parse_args(argv)
    run = TrainingRun("zoo.show_attend_tell.train", args, argv)
    start = time.time()
    splits = train, validation, test = load_data(args)
    print(
        f"data: {len(train['captions'])} train, {len(validation['captions'])} "
        f"validation, {len(test['captions'])} test captions "
        f"({time.time() - start:.0f} s)"
    )
    vocab = vocabulary.train_wordpiece(train["captions"], args.vocabulary_size)
    print(f"vocabulary: {len(vocab)} subwords")
    image_shape = train["images"].shape[1:]
    image_shape = (*image_shape, 1) if len(image_shape) == 2 else image_shape
    with run.strategy.scope():
        model = build_model(args, vocab, image_shape)
    print(
        f"model: {model.count_params():,} parameters, {args.attention} attention, "
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
                monitor="val_loss", patience=3, restore_best_weights=True
            ),
        ],
    )
    metrics = {"encoder_pretraining": pretraining, **fit.metrics()}
    widths = [int(w) for w in args.beam_widths.split(",")]
    metrics["test"] = evaluate_test_split(model, test, widths)
    data = data_metadata(args, splits)
    return model, run.save_and_finish(model, "image captioning", data, metrics)


if __name__ == "__main__":
    main()
