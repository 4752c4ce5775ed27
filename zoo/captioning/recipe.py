"""The captioners' training recipe: the data, the encoder's pretraining, the test.

What every captioning family's `train.py` shares (`zoo.show_attend_tell.train`,
`zoo.transformer_captioner.train`): the splits of Fashion-MNIST scenes (or a
Karpathy-split data set) as raw images and captions, batched `tf.data`
pairs, the small CNN's pretraining as an item classifier, and the held-out
evaluation.
"""

import time

import keras
import numpy as np

from zoo import quiet
from zoo.captioning.evaluation import bleu_scores, evaluate_scenes
from zoo.data import captions as caption_data
from zoo.data import fashion_mnist, vocabulary
from zoo.data import scenes as scene_data
from zoo.training.callbacks import TimeBudget
from zoo.training.harness import compile_classifier

tf = quiet.LazyModule("tensorflow", "Training a captioner on scenes (tf.data)")


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
        shuffle=False,  # `ds` is shuffled above; Keras warns it ignores True
    )
    accuracy = fit.history["accuracy"][-1]
    print(
        f"encoder pretrained {fit.epochs} epochs in {fit.seconds / 60:.1f} min, "
        f"item accuracy {accuracy}"
    )
    return {"minutes": round(fit.seconds / 60, 1), "train_accuracy": accuracy}


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


def train_captioner(run, args, build_model, early_stopping_patience, describe=""):
    """A captioning family's whole run: data, model, pretraining, fit, test.

    Loads the splits (`load_data`), learns the WordPiece vocabulary on the
    training captions, builds the compiled model inside the run's strategy
    (`build_model(args, vocab, image_shape)`), pretrains its CNN for
    `--pretrain-minutes`, fits with learning-rate decay and early stopping
    on the validation loss, evaluates the test split at `--beam-widths` and
    writes the preset (`TrainingRun.save_and_finish`; the per-epoch history
    goes to its own file).

    Args:
        run: the script's `zoo.training.harness.TrainingRun`.
        args: the parsed options (`--data`, `--vocabulary-size`, ...).
        build_model: `fn(args, vocab, image_shape) -> compiled task`.
        early_stopping_patience: int. Epochs without a better validation
            loss before the fit stops (the best weights are kept).
        describe: str. Printed after the parameter count (e.g. the
            attention kind).

    Returns:
        `(model, metadata)`.
    """
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
        f"model: {model.count_params():,} parameters, {describe}"
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
                monitor="val_loss",
                patience=early_stopping_patience,
                restore_best_weights=True,
            ),
        ],
    )
    metrics = {"encoder_pretraining": pretraining, **fit.metrics()}
    widths = [int(w) for w in args.beam_widths.split(",")]
    metrics["test"] = evaluate_test_split(model, test, widths)
    data = data_metadata(args, splits)
    return model, run.save_and_finish(model, "image captioning", data, metrics)
