"""An RNN decoder that attends over an encoder memory (Bahdanau and Luong).

Run: `python examples/attention_decoder.py`. Teaches a tiny GRU decoder to
copy a random source sequence (the task needs attention: the decoder must
read position t of the source at step t), then prints the alignment matrix,
which becomes diagonal.
"""

import keras
import numpy as np

from keras_attention.layers import AttentionDecoder, AttentionDecoderCell


def build(style, vocab=12, length=6, dim=32):
    source = keras.Input((length,), dtype="int32")
    target_in = keras.Input((length,), dtype="int32")
    memory = keras.layers.Embedding(vocab, dim, name="source_embedding")(source)
    memory = keras.layers.Bidirectional(
        keras.layers.GRU(dim // 2, return_sequences=True), name="encoder"
    )(memory)
    x = keras.layers.Embedding(vocab, dim, name="target_embedding")(target_in)
    cell = AttentionDecoderCell(
        dim, memory_dim=dim, cell="gru", style=style, score="general"
    )
    hidden = AttentionDecoder(cell, name="decoder")(x, memory)
    logits = keras.layers.Dense(vocab)(hidden)
    return keras.Model([source, target_in], logits)


def main():
    rng = np.random.default_rng(0)
    keras.utils.set_random_seed(0)
    source = rng.integers(2, 12, size=(2000, 6)).astype("int32")
    target_in = np.concatenate([np.ones((2000, 1), "int32"), source[:, :-1]], 1)
    for style in ("bahdanau", "luong"):
        model = build(style)
        model.compile(
            keras.optimizers.Adam(1e-2),
            keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=["accuracy"],
        )
        history = model.fit(
            [source, target_in], source, epochs=6, batch_size=64, verbose=0
        )
        print(f"{style}: copy accuracy {history.history['accuracy'][-1]:.3f}")
        decoder = model.get_layer("decoder")
        encoder = keras.Model(model.inputs[0], model.get_layer("encoder").output)
        memory = encoder(source[:1])
        x = model.get_layer("target_embedding")(target_in[:1])
        states = decoder.cell.initial_state(memory)
        rows = []
        for t in range(6):
            _, states = decoder.cell(x[:, t], states)
            rows.append(np.asarray(decoder.cell.attention_weights(states))[0])
        print("alignment (rows: target step, columns: source position):")
        print(np.round(np.stack(rows), 2))


if __name__ == "__main__":
    main()
