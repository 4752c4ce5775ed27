"""A second Transformer checkpoint: the shipped preset trained on, for the ensemble.

No second seed of the 75-minute recipe exists (and a 75-minute run did not
fit the session). This continues the shipped `transformer_bible_en_es` on
the same training books with another data order (`--seed`), a fresh Adam
and its own learning-rate tail: linear warmup to `--peak` over `--warmup`
steps, then cosine decay to 0 at `--steps` (a `--minutes` cap stops it
earlier).
The result is written as a preset outside the package (tens of MB), e.g.:

    nice -n 5 python experiments/transformer/continue_training.py \\
        --steps 200 --warmup 20 --minutes 40 --out /work/s31_ckpt/transformer_seed2

`benchmarks/ensemble.py` then scores it beside the shipped preset and the
ensemble of the two.
"""

import argparse
import time

import keras

import zoo
from zoo.data import bible
from zoo.transformer.losses import MaskedLabelSmoothingCrossEntropy
from zoo.transformer.train import subword_lengths, token_batches
from zoo.translation.data import load_splits


class StopAfter(keras.callbacks.Callback):
    """Stops `fit` once `minutes` of training have passed."""

    def __init__(self, minutes):
        super().__init__()
        self.minutes, self.start, self.steps = minutes, time.time(), 0

    def on_train_batch_end(self, batch, logs=None):
        self.steps += 1
        if self.steps % 25 == 0:
            elapsed = (time.time() - self.start) / 60
            print(
                f"step {self.steps}: loss {logs['loss']:.4f}, {elapsed:.1f} min",
                flush=True,
            )
        if time.time() - self.start > self.minutes * 60:
            self.model.stop_training = True


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="transformer_bible_en_es")
    parser.add_argument("--out", required=True)
    parser.add_argument("--seed", type=int, default=2)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--minutes", type=float, default=40.0)
    parser.add_argument("--peak", type=float, default=3e-4)
    parser.add_argument("--batch-tokens", type=int, default=2048)
    args = parser.parse_args()
    keras.utils.set_random_seed(args.seed)
    start = time.time()
    model = zoo.Transformer.from_preset(args.preset)
    train, _, _ = load_splits(
        argparse.Namespace(data="bible", sword_path=bible.DEFAULT_SWORD_PATH)
    )
    lengths = subword_lengths(train, model.preprocessor)
    batches = token_batches(train, lengths, args.batch_tokens, seed=args.seed)
    schedule = keras.optimizers.schedules.CosineDecay(
        0.0, args.steps - args.warmup, warmup_target=args.peak, warmup_steps=args.warmup
    )
    model.compile(
        optimizer=keras.optimizers.Adam(
            schedule, beta_1=0.9, beta_2=0.98, epsilon=1e-9
        ),
        loss=MaskedLabelSmoothingCrossEntropy(0.1),
    )
    print(f"data and model ready ({time.time() - start:.0f} s)", flush=True)
    stop = StopAfter(args.minutes)
    model.fit(
        batches.repeat(),
        steps_per_epoch=args.steps,
        epochs=1,
        verbose=0,
        callbacks=[stop],
    )
    print(f"trained {stop.steps} steps in {(time.time() - stop.start) / 60:.1f} min")
    model.save_to_preset(args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
