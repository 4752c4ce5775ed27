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

The run's state (encoder pretraining, then training) is saved after every
epoch in `--run-dir` (`<out>.run`): the same command run again after a kill
resumes there (`zoo.training`).
"""

import argparse
import os
import platform
import shlex
import sys
import time

import keras
import numpy as np
import tensorflow as tf

from keras_attention.training.strategy import get_strategy
from zoo import training
from zoo.arguments import positive_float, positive_int
from zoo.callbacks import TimeBudget
from zoo.data import captions as caption_data
from zoo.data import fashion_mnist, vocabulary
from zoo.data import scenes as scene_data
from zoo.show_attend_tell.evaluation import bleu_scores, evaluate_scenes
from zoo.show_attend_tell.model import ShowAttendTell
from zoo.show_attend_tell.preprocessor import CaptionPreprocessor
from zoo.task import use_static_shapes_for


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--data",
        default="scenes",
        help="'scenes' (Fashion-MNIST scenes from the Debian package), "
        "'sample' (scenes from the shipped sample), or a Karpathy dataset_*.json",
    )
    p.add_argument("--images-dir", help="with a Karpathy JSON: the images folder")
    p.add_argument("--image-size", type=int, default=224, help="Karpathy images")
    p.add_argument("--out", required=True, help="preset directory to write")
    training.add_run_arguments(p)
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
    p.add_argument("--epochs", type=positive_int, default=30)
    p.add_argument(
        "--batch-size", type=positive_int, default=64, help="global batch size"
    )
    p.add_argument("--learning-rate", type=float, default=1e-3)
    p.add_argument(
        "--time-budget",
        type=positive_float,
        default=None,
        help="stop training after N minutes",
    )
    p.add_argument(
        "--pretrain-minutes",
        type=float,
        default=0.0,
        help="first train the encoder as a Fashion-MNIST item classifier for "
        "this many minutes (the paper's encoder is a pretrained CNN)",
    )
    p.add_argument("--pretrain-items", type=int, default=20000)
    p.add_argument("--strategy", default="auto")
    p.add_argument(
        "--static-shapes",
        action="store_true",
        help="fixed-size batches, captions padded to full length (automatic on TPUs)",
    )
    p.add_argument("--beam-widths", default="1,3")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--verbose", type=int, default=2)
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


def pretrain_encoder(model, args, stage):
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
    classifier.compile(
        optimizer=keras.optimizers.Adam(args.learning_rate),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    ds = tf.data.Dataset.from_tensor_slices((canvases[..., None], labels))
    ds = ds.shuffle(len(canvases), seed=args.seed).batch(args.batch_size)

    def scale(x, y):
        return tf.cast(x, "float32") / 255.0, y

    ds = ds.map(scale)
    history = stage.fit(
        classifier,
        ds,
        epochs=100,
        callbacks=[TimeBudget(args.pretrain_minutes)],
        verbose=args.verbose,
    )
    minutes = stage.seconds / 60
    accuracy = round(float(history.history["accuracy"][-1]), 4)
    print(
        f"encoder pretrained {len(history.history['loss'])} epochs in "
        f"{minutes:.1f} min, item accuracy {accuracy}"
    )
    return {"minutes": round(minutes, 1), "train_accuracy": accuracy}


def main(argv=None):
    args = parse_args(argv)
    command = "python -m zoo.show_attend_tell.train " + " ".join(
        shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv)
    )
    training.check_folder(args.out, "--out", preset=True)
    run = training.RunDirectory(
        args.run_dir or training.default_run_dir(args.out), vars(args), command
    )
    keras.utils.set_random_seed(args.seed)
    start = time.time()
    train, validation, test = load_data(args)
    print(
        f"data: {len(train['captions'])} train, {len(validation['captions'])} "
        f"validation, {len(test['captions'])} test captions "
        f"({time.time() - start:.0f} s)"
    )
    vocab = vocabulary.train_wordpiece(train["captions"], args.vocabulary_size)
    print(f"vocabulary: {len(vocab)} subwords")
    image_shape = train["images"].shape[1:]
    image_shape = (*image_shape, 1) if len(image_shape) == 2 else image_shape

    strategy = get_strategy(args.strategy)
    with strategy.scope():
        preprocessor = CaptionPreprocessor(vocab, args.max_length)
        model = ShowAttendTell(
            len(vocab),
            image_shape=image_shape,
            backbone=args.backbone,
            backbone_weights=args.backbone_weights,
            freeze_backbone=args.freeze_backbone,
            annotation_dim=args.annotation_dim,
            embedding_dim=args.embedding_dim,
            units=args.units,
            score=args.score,
            attention=args.attention,
            feedback=args.feedback,
            attention_regularization=args.attention_regularization,
            reinforce_weight=args.reinforce_weight,
            entropy_weight=args.entropy_weight,
            dropout=args.dropout,
            end_token_id=preprocessor.end_id,
            seed=args.seed,
            preprocessor=preprocessor,
        )
        model.compile(
            optimizer=keras.optimizers.Adam(args.learning_rate, clipnorm=5.0),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            weighted_metrics=["accuracy"],
        )
    print(
        f"model: {model.count_params():,} parameters, {args.attention} attention, "
        f"{model.grid_shape[0]}x{model.grid_shape[1]} grid; strategy "
        f"{type(strategy).__name__} with {strategy.num_replicas_in_sync} replica(s)"
    )

    pretraining = None
    if args.pretrain_minutes > 0:
        with strategy.scope():
            pretraining = pretrain_encoder(model, args, run.stage("pretrain"))

    callbacks = [
        keras.callbacks.ReduceLROnPlateau(
            monitor="val_loss", factor=0.3, patience=2, min_lr=1e-5, verbose=1
        ),
        keras.callbacks.EarlyStopping(
            monitor="val_loss", patience=3, restore_best_weights=True
        ),
    ]
    if args.time_budget:
        callbacks.append(TimeBudget(args.time_budget))
    static = use_static_shapes_for(model, strategy, args.static_shapes)
    stage = run.stage("train")
    history = stage.fit(
        model,
        dataset(train, args.batch_size, args.seed, drop_remainder=static),
        validation_data=dataset(
            validation, args.batch_size, args.seed, False, drop_remainder=static
        ),
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
        "encoder_pretraining": pretraining,
        "train_minutes": round(train_seconds / 60, 1),
        "epochs": epochs_run,
        "steps": steps_run,
        "history": {
            k: [round(float(v), 4) for v in vals] for k, vals in history.history.items()
        },
    }
    widths = [int(w) for w in args.beam_widths.split(",")]
    if "labels" in test:
        metrics["test"] = evaluate_scenes(model, test, widths)
    elif test["captions"]:
        metrics["test"] = {}
        for width in widths:
            hypotheses = model.caption(test["images"], beam_width=width)
            scores = bleu_scores(hypotheses, test["references"])
            metrics["test"][f"beam{width}"] = scores
            print(f"beam {width}: {scores}")
    metadata = {
        "task": "image captioning",
        "command": command,
        "data": {
            "source": args.data,
            "train_captions": len(train["captions"]),
            "validation_captions": len(validation["captions"]),
            "test_captions": len(test["captions"]),
            "canvas_size": args.canvas_size,
            "split": "scenes from Fashion-MNIST train images 0-54,999 (train), "
            "55,000-59,999 (validation) and the 10,000 test images (test)"
            if "labels" in test
            else "Karpathy split",
        },
        "hardware": f"{platform.machine()} CPU, {os.cpu_count()} cores, no GPU",
        "metrics": metrics,
    }
    model.save_to_preset(args.out, metadata=metadata)
    print(f"preset written to {args.out}")
    run.finish()
    return model, metadata


if __name__ == "__main__":
    main()
