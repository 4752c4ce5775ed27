"""Forward + backward time of the translation losses on a recipe-sized batch.

The Transformer's training step (see `transformer_throughput.py`) ends in a
cross-entropy over 64 x 40 target positions and a 15,000-subword vocabulary:
38.4 M logits, more memory traffic than any layer of the 1+1-layer model.
This script times that loss alone, forward and backward with respect to the
logits, inside one `tf.function` (no XLA, as Keras's default `fit`):

- `MaskedLabelSmoothingCrossEntropy`: ours, with its hand-written gradient;
- the same formula differentiated automatically (what the loss did before
  it had a custom gradient: `logsumexp`, a gather and a mean);
- `keras.losses.CategoricalCrossentropy(from_logits=True,
  label_smoothing=0.1)` on a one-hot target built in the step (TensorFlow's
  fused dense softmax cross-entropy kernel);
- `keras.losses.SparseCategoricalCrossentropy(from_logits=True)`, Keras's
  fused sparse kernel, which cannot smooth labels (what the recipe uses).

All but the last give the same loss and gradient; each is masked on padding
labels (0) the same way. After 3 warm-up calls the four take turns for
`--steps` calls each; the table gives the median milliseconds.

    python benchmarks/loss_speed.py
"""

import argparse
import statistics
import time

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from zoo.transformer.losses import MaskedLabelSmoothingCrossEntropy

BATCH, LENGTH, VOCABULARY, EPS = 64, 40, 15000, 0.1


def autodiff_formula(labels, logits):
    """The per-token smoothed loss, left to automatic differentiation."""
    true_logit = ops.squeeze(
        ops.take_along_axis(logits, ops.expand_dims(labels, -1), axis=-1), -1
    )
    return (
        ops.logsumexp(logits, axis=-1)
        - (1 - EPS) * true_logit
        - EPS * ops.mean(logits, axis=-1)
    )


def masked_mean(per_token, labels):
    mask = ops.cast(ops.not_equal(labels, 0), "float32")
    return ops.sum(per_token * mask) / ops.sum(mask)


def losses():
    ours = MaskedLabelSmoothingCrossEntropy(EPS)
    dense = keras.losses.CategoricalCrossentropy(
        from_logits=True, label_smoothing=EPS, reduction=None
    )
    sparse = keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, reduction=None
    )
    return {
        "ours (custom gradient)": ours,
        "same formula, autodiff": lambda y, z: masked_mean(autodiff_formula(y, z), y),
        "keras CategoricalCrossentropy(label_smoothing=0.1)": lambda y, z: masked_mean(
            dense(ops.one_hot(y, VOCABULARY), z), y
        ),
        "keras SparseCategoricalCrossentropy (no smoothing)": lambda y, z: masked_mean(
            sparse(y, z), y
        ),
    }


def timed_step(loss):
    @tf.function
    def step(labels, logits):
        with tf.GradientTape() as tape:
            tape.watch(logits)
            value = loss(labels, logits)
        return value, tape.gradient(value, logits)

    return step


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=15, help="timed calls per loss")
    args = p.parse_args(argv)
    rng = np.random.default_rng(0)
    logits = tf.constant(rng.normal(size=(BATCH, LENGTH, VOCABULARY)), "float32")
    labels = rng.integers(1, VOCABULARY, (BATCH, LENGTH))
    labels = tf.constant(np.where(rng.random(labels.shape) < 0.6, labels, 0), "int32")

    steps = {name: timed_step(loss) for name, loss in losses().items()}
    results = {name: step(labels, logits) for name, step in steps.items()}
    for step in steps.values():
        for _ in range(2):
            step(labels, logits)[1].numpy()
    times = {name: [] for name in steps}
    names = list(steps)
    for i in range(args.steps):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            start = time.perf_counter()
            steps[name](labels, logits)[1].numpy()
            times[name].append(time.perf_counter() - start)

    reference_loss, reference_grad = results["same formula, autodiff"]
    print(
        f"tensorflow {tf.__version__}, keras {keras.__version__}; logits "
        f"{BATCH} x {LENGTH} x {VOCABULARY:,}, float32, tf.function without XLA; "
        f"median of {args.steps} rotated calls\n"
    )
    print("| loss | loss value | max abs gradient difference | ms (fwd + bwd) |")
    print("|---|---:|---:|---:|")
    for name in names:
        value, grad = results[name]
        difference = float(tf.reduce_max(tf.abs(grad - reference_grad)))
        print(
            f"| {name} | {float(value):.4f} | {difference:.1e} | "
            f"{1000 * statistics.median(times[name]):.0f} |"
        )
    print(
        f"\n(reference for the gradient column: the autodiff row, loss {float(reference_loss):.4f})"
    )


if __name__ == "__main__":
    main()
