"""Functional graphs with unknown lengths, built and run on TensorFlow and JAX.

Under JAX, Keras infers a functional model's shapes by tracing its layers
with symbolic dimensions: a layer must not compare one with an int, and an
RNN cell's states must fit Keras's JAX `RNN` (2-D, the previous output
first) when a padding mask skips steps. These tests build the graphs with
`keras.Input((None, ...))` on the current backend (`make test` runs this
folder again under JAX); one compares a JAX run with TensorFlow's.
"""

import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from keras_attention.layers import AttentionDecoder, AttentionDecoderCell
from keras_attention.layers import attention as attention_module
from keras_attention.layers.attention import Attention
from keras_attention.layers.chunked import chunked_attention

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))

VOCABULARY, EMBED, MEMORY_DIM, UNITS = 9, 3, 6, 4
# Target ids, 0 = padding: trailing padding, and a row that starts padded.
TOKENS = np.array([[3, 5, 2, 0, 0], [0, 4, 7, 1, 8]], "int32")
MEMORY = np.random.default_rng(0).normal(size=(2, 6, MEMORY_DIM)).astype("float32")
MEMORY_MASK = np.array([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], bool)
DECODERS = {
    "bahdanau_gru_additive": dict(style="bahdanau", cell="gru", score="additive"),
    "luong_lstm_general": dict(style="luong", cell="lstm", score="general"),
    "luong_lstm_concat_local": dict(
        style="luong", cell="lstm", score="concat", window=1
    ),
}


def decoder_model(name):
    """Embedding(mask_zero) -> AttentionDecoder over a masked memory.

    Every length is unknown: `(None,)` ids, `(None, D)` memory. The target
    padding reaches the decoder as Keras's implicit mask.
    """
    tokens = keras.Input((None,), dtype="int32", name="tokens")
    memory = keras.Input((None, MEMORY_DIM), name="memory")
    memory_mask = keras.Input((None,), dtype="bool", name="memory_mask")
    x = keras.layers.Embedding(VOCABULARY, EMBED, mask_zero=True, name="embed")(tokens)
    cell = AttentionDecoderCell(UNITS, memory_dim=MEMORY_DIM, **DECODERS[name])
    hidden = AttentionDecoder(cell, name="decoder")(x, memory, memory_mask=memory_mask)
    return keras.Model([tokens, memory, memory_mask], hidden)


def random_weights(model, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.normal(0, 0.5, w.shape).astype("float32") for w in model.weights]


def step_loop_reference(model):
    """The decoder's outputs from its cell, stepped by hand over `TOKENS`.

    A padded step keeps every state and repeats the previous output
    (zeros before the first real step): `keras.layers.RNN`'s contract.
    """
    embedded = keras.ops.convert_to_numpy(model.get_layer("embed")(TOKENS))
    cell = model.get_layer("decoder").cell
    states = [
        keras.ops.convert_to_numpy(s) for s in cell.initial_state(MEMORY, MEMORY_MASK)
    ]
    previous = np.zeros((2, cell.output_size), "float32")
    outputs = []
    for t in range(TOKENS.shape[1]):
        output, new_states = cell(embedded[:, t], states)
        keep = TOKENS[:, t : t + 1] != 0
        previous = np.where(keep, keras.ops.convert_to_numpy(output), previous)
        states = [
            np.where(keep, keras.ops.convert_to_numpy(n), s)
            for n, s in zip(new_states, states, strict=True)
        ]
        outputs.append(previous)
    return np.stack(outputs, 1)


@pytest.mark.parametrize("name", sorted(DECODERS))
def test_attention_decoder_with_padding_masks_in_a_functional_graph(name):
    model = decoder_model(name)
    model.set_weights(random_weights(model))
    inputs = [TOKENS, MEMORY, MEMORY_MASK]
    eager = keras.ops.convert_to_numpy(model(inputs))
    expected = step_loop_reference(model)
    np.testing.assert_allclose(eager, expected, rtol=1e-5, atol=1e-5)
    assert np.all(eager[1, 0] == 0.0)  # a leading padded step outputs zeros
    # Compiled (`jax.jit` / `tf.function`), with other lengths than traced.
    compiled = model.predict(inputs, verbose=0)
    np.testing.assert_allclose(compiled, expected, rtol=1e-5, atol=1e-5)
    shorter = model.predict(
        [TOKENS[:, :3], MEMORY[:, :4], MEMORY_MASK[:, :4]], verbose=0
    )
    assert shorter.shape == (2, 3, eager.shape[-1])
    assert np.all(np.isfinite(shorter))


JAX_SCRIPT = """
import os, sys
os.environ["KERAS_BACKEND"] = "jax"
sys.path.insert(0, {here!r})
import keras, numpy as np
import test_jax_functional_graphs as t
assert keras.backend.backend() == "jax"
results = {{}}
for name in sorted(t.DECODERS):
    model = t.decoder_model(name)
    model.set_weights(t.random_weights(model))
    inputs = [t.TOKENS, t.MEMORY, t.MEMORY_MASK]
    results[name] = keras.ops.convert_to_numpy(model(inputs))
    results[name + "_jit"] = model.predict(inputs, verbose=0)
np.savez(sys.argv[1], **results)
"""


@pytest.mark.tensorflow_only
@pytest.mark.slow
def test_attention_decoder_on_jax_equals_tensorflow(tmp_path):
    """The same graph and weights give the same outputs on both backends."""
    out = tmp_path / "jax.npz"
    env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu"}
    subprocess.run(
        [sys.executable, "-c", JAX_SCRIPT.format(here=HERE), str(out)],
        check=True,
        env=env,
        cwd=ROOT,
        timeout=600,
    )
    got = np.load(out)
    for name in sorted(DECODERS):
        model = decoder_model(name)
        model.set_weights(random_weights(model))
        expected = keras.ops.convert_to_numpy(model([TOKENS, MEMORY, MEMORY_MASK]))
        for key in (name, name + "_jit"):
            np.testing.assert_allclose(got[key], expected, rtol=1e-4, atol=1e-5)


@pytest.fixture
def chunked_lengths(monkeypatch):
    """Records `(Tq, Tv)` of each `chunked_attention` call from `Attention`."""
    seen = []

    def spy(query, key, value, **kwargs):
        seen.append((query.shape[1], key.shape[1]))
        return chunked_attention(query, key, value, **kwargs)

    monkeypatch.setattr(attention_module, "chunked_attention", spy)
    return seen


class Residual(keras.layers.Layer):
    """`query + attention(query, value)`, as blocks and decoders use it.

    It has no `compute_output_shape`, so a functional graph infers its
    shapes by tracing `call`: the attention then runs on the unknown
    lengths (`Attention` alone answers from its `compute_output_spec`).
    """

    def __init__(self, attention, **kwargs):
        super().__init__(**kwargs)
        self.attention = attention

    def build(self, query_shape, value_shape):
        self.attention.build(query_shape, value_shape)

    def call(self, query, value):
        return query + self.attention(query, value)


def attention_model(chunk_threshold):
    query = keras.Input((None, 4), name="query")
    value = keras.Input((None, 4), name="value")
    layer = Attention(score="general", chunk_threshold=chunk_threshold, chunk_size=3)
    return keras.Model([query, value], Residual(layer)(query, value))


def test_attention_with_unknown_lengths_in_a_functional_graph(chunked_lengths):
    # Building the graph traces unknown lengths (JAX: symbolic dimensions);
    # they cannot be compared with the threshold, so the full path runs.
    chunked = attention_model(chunk_threshold=5)
    if keras.config.backend() != "torch":
        assert chunked_lengths == []
    # (PyTorch builds the graph on stand-in sizes, known ints: either path
    # gives the output spec.)
    explicit = attention_model(chunk_threshold=None)
    explicit.set_weights(chunked.get_weights())
    rng = np.random.default_rng(1)
    for v_len, takes_chunks in ((8, True), (5, False)):
        query = rng.normal(size=(2, 7, 4)).astype("float32")
        value = rng.normal(size=(2, v_len, 4)).astype("float32")
        del chunked_lengths[:]
        # At call time the lengths are known (eager): the threshold decides.
        out = keras.ops.convert_to_numpy(chunked([query, value]))
        assert chunked_lengths == ([(7, v_len)] if takes_chunks else [])
        ref = keras.ops.convert_to_numpy(explicit([query, value]))
        assert not np.allclose(ref, query)  # the attention adds something
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
        # Compiled, the traced lengths are concrete too.
        del chunked_lengths[:]
        compiled = chunked.predict([query, value], verbose=0)
        np.testing.assert_allclose(compiled, ref, rtol=1e-5, atol=1e-5)
        assert ((7, v_len) in chunked_lengths) == takes_chunks
