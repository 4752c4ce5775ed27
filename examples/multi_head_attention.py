"""`keras_attention.layers.MultiHeadAttention` in four short demonstrations.

1. A drop-in for `keras.layers.MultiHeadAttention`: copy Keras's weights and
   get Keras's outputs.
2. Any alignment function per head (`score=...`), with padded keys getting
   exactly zero weight.
3. Incremental decoding with a key/value cache gives the same outputs as
   one causal pass over the whole sequence.
4. A fully masked query row yields zeros, where Keras attends uniformly.

Usage:
    python examples/multi_head_attention.py
"""

import os
import sys

import keras
import numpy as np
from keras import ops

try:
    from keras_attention.layers import MultiHeadAttention
except ImportError:  # a source checkout without `pip install -e .`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from keras_attention.layers import MultiHeadAttention

HEADS, KEY_DIM, DIM = 2, 4, 8


def max_diff(a, b):
    return float(np.max(np.abs(ops.convert_to_numpy(a) - ops.convert_to_numpy(b))))


def main():
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 6, DIM)).astype("float32")
    memory = rng.normal(size=(2, 5, DIM)).astype("float32")

    print("== 1. Drop-in for keras.layers.MultiHeadAttention")
    reference = keras.layers.MultiHeadAttention(HEADS, KEY_DIM)
    ours = MultiHeadAttention(HEADS, KEY_DIM)
    expected = reference(x, memory)
    ours(x, memory)
    ours.set_weights(reference.get_weights())
    print(f"same weights: {len(ours.weights)} tensors")
    print(f"max |ours - keras| = {max_diff(ours(x, memory), expected):.2e}")

    print("\n== 2. Any score per head; padded keys get zero weight")
    value_mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], bool)
    for name in ("scaled_dot", "general", "additive", "cosine"):
        layer = MultiHeadAttention(HEADS, KEY_DIM, score=name)
        out, weights = layer(
            x, memory, value_mask=value_mask, return_attention_scores=True
        )
        weights = ops.convert_to_numpy(weights)
        print(
            f"{name:10s} output {tuple(out.shape)}, weights {weights.shape}, "
            f"weight on padding {weights[0, :, :, 3:].sum():.1f}, "
            f"score weights {len(layer.weights) - 8}"
        )

    print("\n== 3. Cached decoding equals the full causal pass")
    layer = MultiHeadAttention(HEADS, KEY_DIM, score="additive")
    full = layer(x, x, use_causal_mask=True)
    cache = np.zeros((2, 2, x.shape[1], HEADS, KEY_DIM), "float32")
    steps = []
    for index in range(x.shape[1]):
        token = x[:, index : index + 1]
        out, cache = layer(
            token,
            token,
            cache=cache,
            cache_update_index=index,
            use_causal_mask=True,
        )
        steps.append(out)
    print(f"cache shape {tuple(cache.shape)}")
    print(
        f"max |step by step - full| = {max_diff(ops.concatenate(steps, 1), full):.2e}"
    )

    print("\n== 4. A fully masked row gives zeros, not a uniform average")
    attention_mask = np.ones((2, 6, 6), bool)
    attention_mask[0, 1] = False  # query 1 of sequence 0 may attend nowhere
    # No bias, so a zero context gives a zero output.
    reference = keras.layers.MultiHeadAttention(HEADS, KEY_DIM, use_bias=False)
    ours = MultiHeadAttention(HEADS, KEY_DIM, use_bias=False)
    reference(x, x)
    ours(x, x)
    ours.set_weights(reference.get_weights())
    # Without attention scores both take the fused kernel; Keras's then
    # averages every value uniformly on the empty row.
    for name, layer in (("keras", reference), ("ours", ours)):
        row = ops.convert_to_numpy(layer(x, x, attention_mask=attention_mask))[0, 1]
        print(f"{name:5s} output of the empty row: {np.round(row[:4], 3)} ...")


if __name__ == "__main__":
    main()
