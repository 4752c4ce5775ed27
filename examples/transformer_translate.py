"""Translate with `zoo.Transformer` and plot its cross-attention, head by head.

With a preset (`--preset NAME_OR_DIR`, e.g. one written by
`python -m zoo.transformer.train`), the script translates with greedy and
beam search and draws one alignment heatmap per head of the last decoder
layer. Without one it first trains a tiny Transformer on the Bible sample
shipped in `zoo/data/samples/` for `--epochs` epochs (about a minute on a
laptop CPU): the translations are then poor, but every step runs.

    python examples/transformer_translate.py --out transformer_attention
    python examples/transformer_translate.py --preset my_preset_dir
"""

import argparse
import os

import keras
import tensorflow as tf

from keras_attention.plotting import plot_attention
from keras_attention.training.schedules import InverseSqrtSchedule
from zoo.data import bible, parallel_text, vocabulary
from zoo.transformer import MaskedLabelSmoothingCrossEntropy, Transformer
from zoo.translation import TranslationPreprocessor


def tiny_model_on_the_sample(epochs):
    pairs = parallel_text.read_tsv(bible.sample_path("train"))
    vocab = vocabulary.train_wordpiece(
        [p[0] for p in pairs] + [p[1] for p in pairs], 2000, lowercase=False
    )
    preprocessor = TranslationPreprocessor(vocab, vocab, 48, 48)
    keras.utils.set_random_seed(0)
    model = Transformer.from_name(
        "tiny", vocabulary_size=len(vocab), preprocessor=preprocessor
    )
    model.compile(
        keras.optimizers.Adam(
            InverseSqrtSchedule(model.hidden_dim, warmup_steps=200, scale=0.5),
            beta_1=0.9,
            beta_2=0.98,
            epsilon=1e-9,
        ),
        MaskedLabelSmoothingCrossEntropy(0.1),
        weighted_metrics=["accuracy"],
    )
    sources, targets = [p[0] for p in pairs], [p[1] for p in pairs]
    x, y, w = preprocessor(tf.constant(sources), tf.constant(targets))
    model.fit(x, y, sample_weight=w, batch_size=32, epochs=epochs, verbose=2)
    return model


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", help="preset name or directory")
    p.add_argument("--epochs", type=int, default=30, help="without --preset")
    p.add_argument("--out", default="transformer_attention", help="PNG folder")
    p.add_argument(
        "--text",
        default="The name of the man was Elimelech, and the name of his wife Naomi.",
    )
    args = p.parse_args(argv)
    if args.preset:
        model = Transformer.from_preset(args.preset)
    else:
        model = tiny_model_on_the_sample(args.epochs)
    print(f"EN      {args.text}")
    print(f"greedy  {model.translate(args.text, beam_width=1)}")
    text, alignment = model.translate(args.text, beam_width=4, return_attention=True)
    print(f"beam 4  {text}")
    for head, weights in enumerate(alignment["head_weights"]):
        path = plot_attention(
            weights,
            os.path.join(args.out, f"head_{head}.png"),
            x_labels=alignment["source_tokens"],
            y_labels=alignment["target_tokens"],
            title=f"last decoder layer, head {head}",
        )
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
