"""Soft, hard and local attention with `keras_attention.layers.Attention`.

Runs one small batch through the layer in each mode and prints the shapes,
the attention weights and, for hard attention, the log-probabilities of the
sampled positions. The second sequence is padded (its last two value
positions are masked), so its weights there are exactly zero.

Usage:
    python examples/attention_layer.py
"""

import os
import sys

import keras
import numpy as np
from keras import ops

try:
    from keras_attention.layers import Attention
except ImportError:  # a source checkout without `pip install -e .`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from keras_attention.layers import Attention


def show(title, outputs, names=("context", "weights")):
    """Prints every output of one layer call, weights rounded."""
    print(f"\n== {title}")
    for name, tensor in zip(names, outputs, strict=True):
        array = ops.convert_to_numpy(tensor)
        print(f"{name}: shape={array.shape} dtype={array.dtype}")
        if name != "context":
            print(np.array2string(array[1], precision=3, suppress_small=True))


def main():
    keras.utils.set_random_seed(0)  # reproducible weights of the scores
    rng = np.random.default_rng(0)
    batch, query_length, value_length, dim = 2, 4, 6, 8
    query = rng.normal(size=(batch, query_length, dim)).astype("float32")
    value = rng.normal(size=(batch, value_length, dim)).astype("float32")
    value_mask = np.ones((batch, value_length), bool)
    value_mask[1, 4:] = False  # the second source sequence has 4 tokens
    print(f"query {query.shape}, value {value.shape}; sequence 1 has 4 valid values")
    print("(weights printed for sequence 1: rows = queries, columns = values)")

    soft = Attention(score="scaled_dot")
    show(
        "soft, scaled dot-product",
        soft(query, value, value_mask=value_mask, return_attention_scores=True),
    )

    bahdanau = Attention(score="bahdanau")
    show(
        "soft, additive (Bahdanau) score, causal",
        bahdanau(
            query,
            value,
            value_mask=value_mask,
            use_causal_mask=True,
            return_attention_scores=True,
        ),
    )

    hard = Attention(score="dot", mode="hard", seed=0)
    show(
        "hard (REINFORCE), training: one sampled position per query",
        hard(
            query,
            value,
            value_mask=value_mask,
            return_attention_scores=True,
            return_log_prob=True,
            return_distribution=True,
            training=True,
        ),
        names=("context", "weights", "log_prob", "distribution"),
    )
    show(
        "hard, inference: argmax position",
        hard(query, value, value_mask=value_mask, return_attention_scores=True),
    )

    gumbel = Attention(score="dot", mode="hard", hard_estimator="gumbel", seed=0)
    show(
        "hard (straight-through Gumbel-softmax), training",
        gumbel(
            query,
            value,
            value_mask=value_mask,
            return_attention_scores=True,
            training=True,
        ),
    )

    local_m = Attention(score="general", window=1)
    show(
        "local-m, window D=1: row t sees values t-1..t+1 (clipped to the source)",
        local_m(query, value, value_mask=value_mask, return_attention_scores=True),
    )

    local_p = Attention(score="general", window=1, local="predictive")
    outputs = local_p(
        query,
        value,
        value_mask=value_mask,
        return_attention_scores=True,
        return_distribution=True,
    )
    show(
        "local-p, window D=1, Gaussian sigma=D/2 (rows sum to < 1)",
        outputs,
        names=("context", "weights", "distribution"),
    )
    row_sums = ops.convert_to_numpy(outputs[1]).sum(-1)
    print("row sums of the local-p weights:", np.round(row_sums, 3))


if __name__ == "__main__":
    main()
