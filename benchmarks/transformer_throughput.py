"""Training throughput: `zoo.Transformer` vs the keras.io KerasHub recipe model.

Both models have the recipe's dimensions (1 encoder + 1 decoder layer,
d_model 256, d_ff 2048, 8 heads, 15,000-subword source and target
vocabularies) and train on the same batches: 64 pairs of random token ids,
padded to 40 subwords, each row with a random length in [10, 40]. The recipe
model is `build()` of `benchmarks/keras_hub_translation.py` (keras-hub
`TokenAndPositionEmbedding`, `TransformerEncoder`/`TransformerDecoder`,
dropout 0.5 before a softmax `Dense`), compiled as in the recipe (`rmsprop`,
sparse categorical cross-entropy on probabilities). Ours is
`zoo.Transformer(num_layers=1, hidden_dim=256, intermediate_dim=2048,
num_heads=8, target_vocabulary_size=15000)` compiled as `zoo/transformer/
train.py` does (Adam with the warmup schedule, masked label-smoothed
cross-entropy on logits, tied output embedding), once with the paper's
dropout 0.1 and once with dropout 0 (with dropout the attention weights
are dropped, so the fused attention kernel is not used in training).

Each configuration is compiled with `jit_compile=False` and `True`; after 3
warm-up steps the models take turns step by step (`train_on_batch`, the
order rotated every step) and the table gives the target tokens per second
(real, unpadded target tokens of the batch / median step time) and the ratio
to the recipe model under the same `jit_compile`.

    python benchmarks/transformer_throughput.py
    python benchmarks/transformer_throughput.py --steps 3   # quick look
"""

import argparse
import os
import statistics
import time

import keras
import keras_hub
import numpy as np
import tensorflow as tf
from keras_hub_translation import build
from machine import cpu_model

from keras_attention.training.schedules import InverseSqrtSchedule
from zoo.transformer import Transformer
from zoo.transformer.losses import MaskedLabelSmoothingCrossEntropy

VOCABULARY = 15000
BATCH, LENGTH = 64, 40


def batch(seed=0):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(10, LENGTH + 1, (2, BATCH))
    ids = rng.integers(4, VOCABULARY, (3, BATCH, LENGTH)).astype("int32")
    positions = np.arange(LENGTH)
    source = np.where(positions < lengths[0][:, None], ids[0], 0)
    target = np.where(positions < lengths[1][:, None], ids[1], 0)
    labels = np.where(positions < lengths[1][:, None] - 1, ids[2], 0)
    return source, target, labels


def recipe(jit_compile):
    model = build(VOCABULARY, VOCABULARY)
    model.compile(
        "rmsprop", loss="sparse_categorical_crossentropy", jit_compile=jit_compile
    )
    return model


def ours(jit_compile, dropout):
    model = Transformer(
        VOCABULARY,
        num_layers=1,
        hidden_dim=256,
        intermediate_dim=2048,
        num_heads=8,
        dropout=dropout,
        target_vocabulary_size=VOCABULARY,
    )
    model.compile(
        keras.optimizers.Adam(
            InverseSqrtSchedule(256), beta_1=0.9, beta_2=0.98, epsilon=1e-9
        ),
        MaskedLabelSmoothingCrossEntropy(0.1),
        jit_compile=jit_compile,
    )
    return model


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=10, help="timed steps per model")
    args = p.parse_args(argv)
    keras.utils.set_random_seed(0)
    source, target, labels = batch()
    weights = (labels != 0).astype("float32")
    tokens = int(weights.sum())

    steps = {}
    for jit in (False, True):
        steps[("keras-hub recipe", jit)] = (
            recipe(jit),
            lambda m: m.train_on_batch([source, target], labels),
        )
        for dropout in (0.1, 0.0):
            steps[(f"ours, dropout {dropout}", jit)] = (
                ours(jit, dropout),
                lambda m: m.train_on_batch(
                    {"encoder_token_ids": source, "decoder_token_ids": target},
                    labels,
                    sample_weight=weights,
                ),
            )
    params = {name: model.count_params() for (name, _), (model, _) in steps.items()}
    times = {key: [] for key in steps}
    for model, step in steps.values():
        for _ in range(3):
            step(model)
    keys = list(steps)
    for i in range(args.steps):
        order = keys[i % len(keys) :] + keys[: i % len(keys)]
        for key in order:
            model, step = steps[key]
            start = time.perf_counter()
            step(model)
            times[key].append(time.perf_counter() - start)

    print(
        f"keras {keras.__version__}, keras-hub {keras_hub.__version__}, "
        f"tensorflow {tf.__version__}, {cpu_model()}, {os.cpu_count()} CPUs"
    )
    print(
        f"batch {BATCH} x {LENGTH} subwords, {tokens} real target tokens, median "
        f"of {args.steps} rotated train_on_batch steps after 3 warm-up steps\n"
    )
    print(
        "| model | parameters | jit_compile | s / step | target tokens / s | vs recipe |"
    )
    print("|---|---:|---|---:|---:|---:|")
    for jit in (False, True):
        base = statistics.median(times[("keras-hub recipe", jit)])
        for name in ("keras-hub recipe", "ours, dropout 0.1", "ours, dropout 0.0"):
            s = statistics.median(times[(name, jit)])
            print(
                f"| {name} | {params[name]:,} | {jit} | {s:.3f} | "
                f"{tokens / s:.0f} | {base / s:.2f} |"
            )


if __name__ == "__main__":
    main()
