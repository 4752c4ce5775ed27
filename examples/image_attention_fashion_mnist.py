"""A small Fashion-MNIST classifier with a SAGAN self-attention block.

`Conv -> pool -> ImageSelfAttention -> conv -> pool -> flatten -> dense`: the 14x14
feature map attends over its 196 positions. Trains a few epochs and prints
the test accuracy. By default it uses the 2,000 + 1,000 image sample that
ships with `zoo.data.fashion_mnist` (well under a minute on a CPU);
`--full` reads the full data set (the Debian package `dataset-fashion-mnist`,
or a directory given with `--path`).

`--chunk-threshold 64` makes the block take its memory-efficient chunked
path (`keras_attention.layers.chunked.chunked_attention`), which gives the
same numbers as the explicit one and is what large feature maps use.

Usage:
    python examples/image_attention_fashion_mnist.py
    python examples/image_attention_fashion_mnist.py --full --epochs 5
    python examples/image_attention_fashion_mnist.py --score scaled_dot --chunk-threshold 64
"""

import argparse
import os
import sys

import keras
import numpy as np

try:
    from keras_attention.layers.image_attention import ImageSelfAttention
    from zoo.data import fashion_mnist
except ImportError:  # a source checkout without `pip install -e .`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from keras_attention.layers.image_attention import ImageSelfAttention
    from zoo.data import fashion_mnist


def build_model(score="dot", chunk_threshold=4096, seed=0):
    """The classifier: 28x28 grey images -> 10 logits."""
    keras.utils.set_random_seed(seed)
    inputs = keras.Input((28, 28, 1), name="images")
    x = keras.layers.Rescaling(1.0 / 255)(inputs)
    x = keras.layers.Conv2D(16, 3, padding="same", activation="relu")(x)
    x = keras.layers.MaxPooling2D()(x)
    x = ImageSelfAttention(
        score=score, chunk_threshold=chunk_threshold, name="attention"
    )(x)
    x = keras.layers.Conv2D(32, 3, padding="same", activation="relu")(x)
    x = keras.layers.MaxPooling2D()(x)
    x = keras.layers.Flatten()(x)
    outputs = keras.layers.Dense(10, name="logits")(x)
    model = keras.Model(inputs, outputs, name="fashion_mnist_sagan")
    model.compile(
        optimizer=keras.optimizers.Adam(3e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return model


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="the full data set")
    parser.add_argument("--path", help="directory of the IDX files (with --full)")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--score", default="dot")
    parser.add_argument("--chunk-threshold", type=int, default=4096)
    args = parser.parse_args(argv)

    sample = not args.full
    path = None if sample else args.path
    train_images, train_labels = fashion_mnist.load("train", sample=sample, path=path)
    test_images, test_labels = fashion_mnist.load("test", sample=sample, path=path)
    model = build_model(args.score, args.chunk_threshold)
    model.fit(
        train_images[..., None].astype("float32"),
        train_labels.astype("int32"),
        epochs=args.epochs,
        batch_size=args.batch_size,
        verbose=2,
    )
    _, accuracy = model.evaluate(
        test_images[..., None].astype("float32"),
        test_labels.astype("int32"),
        verbose=0,
    )
    gamma = float(keras.ops.convert_to_numpy(model.get_layer("attention").gamma))
    print(
        f"test accuracy: {accuracy:.3f} on {len(test_images)} images "
        f"(attention gate gamma = {gamma:.3f})"
    )
    return float(accuracy), gamma


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    main()
