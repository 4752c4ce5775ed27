"""Baseline: the keras.io "English-to-Spanish translation with KerasHub" recipe.

Trains the recipe's model (WordPiece vocabularies learned with keras-hub,
`TokenAndPositionEmbedding`, one `TransformerEncoder` and one
`TransformerDecoder` with 256/2048/8, `rmsprop`, batch 64, sequences of 40
subwords) on the same Bible train split as the zoo models, for a fixed
wall-clock budget, then decodes the test books greedily with keras-hub's
`GreedySampler` and prints sacreBLEU BLEU/chrF with their signatures.

Run (the baseline quoted in zoo/seq2seq/README.md):

    python benchmarks/keras_hub_translation.py --minutes 20

Smoke run on the shipped sample:

    python benchmarks/keras_hub_translation.py --data sample --minutes 0.3
"""

import argparse
import json
import time

import keras
import keras_hub
import tensorflow as tf

from zoo.data import bible, parallel_text
from zoo.translation.metrics import corpus_scores

EMBED_DIM = 256
INTERMEDIATE_DIM = 2048
NUM_HEADS = 8
MAX_SEQUENCE_LENGTH = 40
VOCAB_SIZE = 15000  # the recipe's ENG/SPA_VOCAB_SIZE
RESERVED = ["[PAD]", "[UNK]", "[START]", "[END]"]


def load(data, sword_path):
    if data == "sample":
        train = parallel_text.read_tsv(bible.sample_path("train"))
        test = parallel_text.read_tsv(bible.sample_path("test"))
        return train, test
    pairs = {
        split: [
            (en, es) for en, es, _ in bible.load_pairs(split, sword_path=sword_path)
        ]
        for split in ("train", "test")
    }
    return pairs["train"], pairs["test"]


def build(eng_vocab_size, spa_vocab_size):
    """The recipe's model, layer for layer."""
    encoder_inputs = keras.Input(shape=(None,), name="encoder_inputs")
    x = keras_hub.layers.TokenAndPositionEmbedding(
        vocabulary_size=eng_vocab_size,
        sequence_length=MAX_SEQUENCE_LENGTH,
        embedding_dim=EMBED_DIM,
    )(encoder_inputs)
    encoder_outputs = keras_hub.layers.TransformerEncoder(
        intermediate_dim=INTERMEDIATE_DIM, num_heads=NUM_HEADS
    )(inputs=x)
    decoder_inputs = keras.Input(shape=(None,), name="decoder_inputs")
    encoded_seq_inputs = keras.Input(
        shape=(None, EMBED_DIM), name="decoder_state_inputs"
    )
    x = keras_hub.layers.TokenAndPositionEmbedding(
        vocabulary_size=spa_vocab_size,
        sequence_length=MAX_SEQUENCE_LENGTH,
        embedding_dim=EMBED_DIM,
    )(decoder_inputs)
    x = keras_hub.layers.TransformerDecoder(
        intermediate_dim=INTERMEDIATE_DIM, num_heads=NUM_HEADS
    )(decoder_sequence=x, encoder_sequence=encoded_seq_inputs)
    x = keras.layers.Dropout(0.5)(x)
    decoder_outputs = keras.layers.Dense(spa_vocab_size, activation="softmax")(x)
    decoder = keras.Model([decoder_inputs, encoded_seq_inputs], decoder_outputs)
    decoder_outputs = decoder([decoder_inputs, encoder_outputs])
    return keras.Model([encoder_inputs, decoder_inputs], decoder_outputs)


class StopAfter(keras.callbacks.Callback):
    def __init__(self, seconds):
        super().__init__()
        self.seconds = seconds
        self.start = time.time()

    def on_train_batch_end(self, batch, logs=None):
        if time.time() - self.start > self.seconds:
            self.model.stop_training = True


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default="bible", choices=["bible", "sample"])
    p.add_argument("--sword-path", default=bible.DEFAULT_SWORD_PATH)
    p.add_argument("--minutes", type=float, default=20.0)
    p.add_argument("--limit", type=int, default=None, help="test pairs to decode")
    p.add_argument("--json-out", help="also write the measured numbers here (JSON)")
    args = p.parse_args(argv)
    keras.utils.set_random_seed(0)
    train, test = load(args.data, args.sword_path)

    def vocab(texts):
        return keras_hub.tokenizers.compute_word_piece_vocabulary(
            tf.data.Dataset.from_tensor_slices(texts).batch(1000),
            vocabulary_size=VOCAB_SIZE,
            reserved_tokens=RESERVED,
        )

    start = time.time()
    eng_vocab = vocab([e for e, _ in train])
    spa_vocab = vocab([s for _, s in train])
    print(
        f"vocabularies: {len(eng_vocab)} EN, {len(spa_vocab)} ES ({time.time() - start:.0f} s)"
    )
    eng_tok = keras_hub.tokenizers.WordPieceTokenizer(
        vocabulary=eng_vocab, lowercase=False
    )
    spa_tok = keras_hub.tokenizers.WordPieceTokenizer(
        vocabulary=spa_vocab, lowercase=False
    )

    def preprocess(eng, spa):
        eng = keras_hub.layers.StartEndPacker(
            MAX_SEQUENCE_LENGTH, pad_value=eng_tok.token_to_id("[PAD]")
        )(eng_tok(eng))
        spa = keras_hub.layers.StartEndPacker(
            MAX_SEQUENCE_LENGTH + 1,
            start_value=spa_tok.token_to_id("[START]"),
            end_value=spa_tok.token_to_id("[END]"),
            pad_value=spa_tok.token_to_id("[PAD]"),
        )(spa_tok(spa))
        return ({"encoder_inputs": eng, "decoder_inputs": spa[:, :-1]}, spa[:, 1:])

    ds = tf.data.Dataset.from_tensor_slices(
        ([e for e, _ in train], [s for _, s in train])
    )
    ds = ds.shuffle(len(train), seed=0).batch(64).map(preprocess).prefetch(16)
    model = build(len(eng_vocab), len(spa_vocab))
    model.compile(
        "rmsprop", loss="sparse_categorical_crossentropy", metrics=["accuracy"]
    )
    print(f"recipe model: {model.count_params():,} parameters")
    start = time.time()
    model.fit(ds, epochs=1000, callbacks=[StopAfter(args.minutes * 60)], verbose=2)
    trained = time.time() - start
    print(f"trained {trained / 60:.1f} min (budget {args.minutes} min)")

    def decode(sentences):
        tokens = eng_tok(tf.constant(sentences))
        encoder_input = keras_hub.layers.StartEndPacker(
            MAX_SEQUENCE_LENGTH, pad_value=eng_tok.token_to_id("[PAD]")
        )(tokens)

        def next(prompt, cache, index):
            logits = model([encoder_input, prompt])[:, index - 1, :]
            return logits, None, cache

        batch = tf.shape(encoder_input)[0]
        start_id = spa_tok.token_to_id("[START]")
        prompt = tf.concat(
            [
                tf.fill((batch, 1), start_id),
                tf.fill((batch, MAX_SEQUENCE_LENGTH - 1), spa_tok.token_to_id("[PAD]")),
            ],
            axis=-1,
        )
        generated = keras_hub.samplers.GreedySampler()(
            next, prompt, stop_token_ids=[spa_tok.token_to_id("[END]")], index=1
        )
        texts = spa_tok.detokenize(generated)
        if hasattr(texts, "numpy"):
            texts = texts.numpy().tolist()
        out = []
        for text in texts:
            text = text.decode("utf-8") if isinstance(text, bytes) else str(text)
            for token in RESERVED:
                text = text.replace(token, "")
            out.append(" ".join(text.split()))
        return out

    pairs = test[: args.limit] if args.limit else test
    hypotheses = []
    start = time.time()
    for i in range(0, len(pairs), 64):
        hypotheses.extend(decode([e for e, _ in pairs[i : i + 64]]))
    scores = corpus_scores(hypotheses, [s for _, s in pairs])
    print(
        f"keras-hub recipe, greedy: BLEU {scores['bleu']:.2f} chrF {scores['chrf']:.2f} "
        f"({scores['sentences']} sentences, {time.time() - start:.0f} s to decode)"
    )
    print(f"  {scores['bleu_signature']}\n  {scores['chrf_signature']}")
    if args.json_out:
        record = {
            "model": "keras.io English-to-Spanish KerasHub recipe",
            "parameters": model.count_params(),
            "budget_minutes": args.minutes,
            "train_minutes": round(trained / 60, 1),
            "steps": int(model.optimizer.iterations.numpy()),
            "greedy": scores,
        }
        with open(args.json_out, "w") as f:
            json.dump(record, f, indent=2)
        print(f"measurements written to {args.json_out}")
    for (en, es), hyp in list(zip(pairs, hypotheses))[:3]:
        print(f"  EN  {en}\n  OUT {hyp}\n  REF {es}")


if __name__ == "__main__":
    main()
