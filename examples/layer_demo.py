"""Layer demo: a small attention model trained on real Fashion-MNIST images.

Each 28x28 image is read as a sequence of 28 rows. A Transformer encoder block
(self-attention between rows, sinusoidal positions) feeds an additive
(Bahdanau) attention pooling layer whose single learned query picks the rows
that matter for the class. The model trains for a few epochs on the sample
of Fashion-MNIST shipped with the package (the full Debian data set is used
when installed and `--full` is given), then saves:

- `demo_output/row_attention.png`: the images with the pooling weights over
  their rows, i.e. where the model looked;
- `demo_output/self_attention.png`: the row-to-row self-attention map of one
  image;
- `demo_output/attention_demo.keras`: the trained model, reloaded to check
  it round-trips without `custom_objects`.

Run: `python examples/layer_demo.py [--epochs 3] [--full] [--out demo_output]`.
"""

import argparse
import os
import time

import keras
import numpy as np

import keras_attention
from keras_attention.plotting import plot_attention
from zoo.data import fashion_mnist


def build_model(dim=64, num_heads=4):
    rows = keras.Input((28, 28), name="rows")
    x = keras.layers.Dense(dim, name="row_embedding")(rows)
    x = x + keras_attention.layers.SinusoidalPositionEncoding(name="positions")(x)
    encoder = keras_attention.layers.TransformerEncoderBlock(
        intermediate_dim=2 * dim, num_heads=num_heads, dropout=0.1, name="encoder"
    )
    x = encoder(x)
    query = keras.layers.Dense(dim, name="pool_query")(
        keras.layers.GlobalAveragePooling1D(name="summary")(x)
    )
    query = keras.layers.Reshape((1, dim), name="as_sequence")(query)
    context, weights = keras_attention.layers.Attention(
        score=keras_attention.scores.Additive(dim), name="pool"
    )(query, x, return_attention_scores=True)
    logits = keras.layers.Dense(10, name="classifier")(
        keras.layers.Flatten(name="flatten")(context)
    )
    model = keras.Model(rows, logits, name="row_attention")
    # Shares every layer with `model`: reads the pooling weights it learned.
    inspector = keras.Model(rows, [logits, weights], name="row_attention_inspector")
    return model, inspector


def plot_rows(images, weights, labels, predictions, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(images)
    fig, axes = plt.subplots(2, n, figsize=(2 * n, 4.4), height_ratios=[3, 1])
    for i in range(n):
        axes[0, i].imshow(images[i], cmap="gray")
        axes[0, i].set_title(
            f"{fashion_mnist.CLASS_NAMES[labels[i]]}\n"
            f"pred: {fashion_mnist.CLASS_NAMES[predictions[i]]}",
            fontsize=8,
        )
        axes[0, i].axis("off")
        axes[1, i].barh(np.arange(28), weights[i], color="tab:orange")
        axes[1, i].invert_yaxis()
        axes[1, i].set_yticks([])
        axes[1, i].set_xticks([])
        axes[1, i].set_xlabel("attention per row", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--full", action="store_true", help="use the full Debian data")
    parser.add_argument("--out", default="demo_output")
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    keras.utils.set_random_seed(0)

    path = None if args.full else fashion_mnist.sample_path()
    x_train, y_train = fashion_mnist.load_arrays("train", path=path)
    x_test, y_test = fashion_mnist.load_arrays("test", path=path)
    x_train = x_train.astype("float32") / 255.0
    x_test = x_test.astype("float32") / 255.0
    source = "full Debian data" if args.full else "shipped sample"
    print(f"Fashion-MNIST ({source}): {len(x_train)} train, {len(x_test)} test images")

    model, inspector = build_model()
    model.compile(
        optimizer=keras.optimizers.Adam(2e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    start = time.time()
    model.fit(x_train, y_train, batch_size=64, epochs=args.epochs, verbose=1)
    print(f"trained {args.epochs} epochs in {time.time() - start:.1f} s")
    results = model.evaluate(x_test, y_test, verbose=0, return_dict=True)
    accuracy = results["accuracy"]
    print(f"test accuracy on {len(x_test)} held-out images: {accuracy:.3f}")

    saved = os.path.join(args.out, "attention_demo.keras")
    model.save(saved)
    reloaded = keras.saving.load_model(saved)
    logits, weights = inspector.predict(x_test[:8], verbose=0)
    again = reloaded.predict(x_test[:8], verbose=0)
    np.testing.assert_allclose(logits, again, rtol=1e-5, atol=1e-5)
    print(f"saved and reloaded without custom_objects: {saved}")

    predictions = np.argmax(logits, -1)
    rows_png = plot_rows(
        x_test[:8],
        weights[:, 0],
        y_test[:8],
        predictions,
        os.path.join(args.out, "row_attention.png"),
    )
    x = model.get_layer("row_embedding")(x_test[:1])
    x = x + model.get_layer("positions")(x)
    _, self_weights = model.get_layer("encoder")(x, return_attention_scores=True)
    self_png = plot_attention(
        keras.ops.convert_to_numpy(self_weights)[0].mean(0),
        os.path.join(args.out, "self_attention.png"),
        x_labels=[str(i) for i in range(28)],
        y_labels=[str(i) for i in range(28)],
        title="row-to-row self-attention (mean of heads)",
        x_label="key row",
        y_label="query row",
    )
    print(f"where the model looked (pooling weights per image row): {rows_png}")
    print(f"row-to-row self-attention of one test image:            {self_png}")


if __name__ == "__main__":
    main()
