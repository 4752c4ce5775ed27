"""Fine-tunes a shipped zoo translation preset on your own sentence pairs.

Loads a preset (by default `transformer_bible_en_es`; any translation
preset name or directory works, e.g. `seq2seq_bahdanau_bible_en_es`),
fits it with `model.fit` for a few steps on a tab-separated file of
`english<TAB>spanish` lines, keeping the preset's vocabularies (new words
become known subwords or `[UNK]`; the embedding tables keep their size),
prints the loss on the training pairs and on held-out pairs before and
after, and saves the result as a new preset directory, which it reloads to
check.

Run (a minute or two on 2 CPU cores; the default data is the Bible sample
shipped in `zoo/data/samples/`):

    python examples/finetune_from_preset.py /tmp/my_preset
    python examples/finetune_from_preset.py /tmp/my_preset --data my_pairs.tsv \
        --preset seq2seq_bahdanau_bible_en_es --steps 50 --batch-size 32

Then: `zoo.from_preset("/tmp/my_preset").translate("Jesus wept.")`.
"""

import argparse
import os
import shlex
import sys
import time

import keras
import tensorflow as tf

import zoo
from keras_attention import presets
from keras_attention.training import get_strategy
from zoo.data import bible, parallel_text

DEFAULT_PRESET = "transformer_bible_en_es"


#: The default hold-out: a fraction of the pairs, with a floor (a loss on
#: fewer pairs is noise) and a cap (more measure no better, and train less).
HELD_OUT_FRACTION, HELD_OUT_FLOOR, HELD_OUT_CAP = 0.1, 4, 40


def held_out_size(pairs):
    """Pairs held out of `pairs` (an int) by default: 10%, at least 4, at most 40.

    Example:
    >>> [held_out_size(n) for n in (20, 52, 400, 30000)]
    [4, 5, 40, 40]
    """
    share = round(HELD_OUT_FRACTION * pairs)
    return min(HELD_OUT_CAP, max(HELD_OUT_FLOOR, share))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", help="preset directory to write")
    p.add_argument(
        "--preset",
        default=DEFAULT_PRESET,
        help=f"preset name or directory to start from (default {DEFAULT_PRESET})",
    )
    p.add_argument(
        "--data",
        default=bible.sample_path("train"),
        help="TSV of source<TAB>target pairs (default: the shipped Bible sample)",
    )
    p.add_argument(
        "--held-out",
        type=int,
        default=None,
        help="last N pairs of --data kept out of training, to measure the loss "
        f"(default: {HELD_OUT_FRACTION:.0%} of them, at least {HELD_OUT_FLOOR}, "
        f"at most {HELD_OUT_CAP})",
    )
    p.add_argument("--steps", type=int, default=20, help="optimizer steps")
    p.add_argument("--batch-size", type=int, default=16, help="global batch size")
    # A pretrained preset wants a small step: 8 steps of Adam at 5e-4 raised
    # the Transformer's held-out loss, 1e-4 lowered it
    # (experiments/transformer/probes/finetune_learning_rate.py).
    p.add_argument("--learning-rate", type=float, default=1e-4)
    p.add_argument("--strategy", default="auto", help="tf.distribute strategy name")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def batches(pairs, batch_size, seed=None):
    """`tf.data` of raw string pairs; shuffled and repeated when `seed` is set."""
    data = tf.data.Dataset.from_tensor_slices(
        (tf.constant([p[0] for p in pairs]), tf.constant([p[1] for p in pairs]))
    )
    if seed is not None:
        data = data.shuffle(len(pairs), seed=seed).repeat()
    return data.batch(batch_size)


def losses(model, train, held_out, batch_size):
    """Token-level cross-entropy on the training and held-out pairs."""
    return {
        name: model.evaluate(batches(pairs, batch_size), verbose=0, return_dict=True)[
            "loss"
        ]
        for name, pairs in (("train", train), ("held_out", held_out))
    }


def main(argv=None):
    args = parse_args(argv)
    command = "python examples/finetune_from_preset.py " + " ".join(
        shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv)
    )
    if not os.path.isfile(args.data):
        sys.exit(f"error: --data {args.data}: no such file")
    pairs = parallel_text.read_tsv(args.data)
    if args.held_out is None:
        args.held_out = held_out_size(len(pairs))
    if len(pairs) <= args.held_out:
        sys.exit(
            f"error: {args.data} has {len(pairs)} pairs; need more than "
            f"--held-out {args.held_out}"
        )
    train, held_out = pairs[: -args.held_out], pairs[-args.held_out :]
    print(f"data: {len(train)} training, {len(held_out)} held-out pairs ({args.data})")

    keras.utils.set_random_seed(args.seed)
    strategy = get_strategy(args.strategy)
    with strategy.scope():
        model = zoo.from_preset(args.preset)
        model.compile(
            optimizer=keras.optimizers.Adam(args.learning_rate, clipnorm=1.0),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            weighted_metrics=["accuracy"],
        )
    base = model.preset_metadata
    pre = model.preprocessor
    print(
        f"preset: {args.preset} ({type(model).__name__}, "
        f"{model.count_params():,} parameters); vocabularies kept: "
        f"{pre.source_tokenizer.vocabulary_size()} source, "
        f"{pre.target_tokenizer.vocabulary_size()} target subwords"
    )
    sample = held_out[0]
    before_text = model.translate(sample[0], beam_width=1)
    before = losses(model, train, held_out, args.batch_size)

    start = time.time()
    model.fit(
        batches(train, args.batch_size, seed=args.seed),
        epochs=1,
        steps_per_epoch=args.steps,
    )
    seconds = time.time() - start
    after = losses(model, train, held_out, args.batch_size)
    after_text = model.translate(sample[0], beam_width=1)

    print(f"fine-tuned {args.steps} steps of {args.batch_size} in {seconds:.0f} s")
    for name in ("train", "held_out"):
        print(f"{name:9s} loss: before {before[name]:.4f}  after {after[name]:.4f}")
    print(f"held-out EN : {sample[0]}")
    print(f"  before    : {before_text}")
    print(f"  after     : {after_text}")
    print(f"  reference : {sample[1]}")

    metadata = {
        "task": base.get("task", "translation"),
        "command": command,
        "fine_tuned_from": {
            "preset": args.preset,
            "command": base.get("command"),
            "weights_sha256": base["files"][presets.WEIGHTS_FILE],
        },
        "data": {
            "source": args.data,
            "train_pairs": len(train),
            "held_out_pairs": len(held_out),
        },
        "metrics": {
            "steps": args.steps,
            "batch_size": args.batch_size,
            "train_seconds": round(seconds, 1),
            "loss_before": {k: round(v, 4) for k, v in before.items()},
            "loss_after": {k: round(v, 4) for k, v in after.items()},
        },
    }
    written = model.save_to_preset(args.out, metadata=metadata)
    kept = [
        name
        for name, digest in written["files"].items()
        if name.startswith("assets/") and base["files"].get(name) == digest
    ]
    print(f"preset written to {args.out}; vocabulary files unchanged: {kept}")

    reloaded = zoo.from_preset(args.out)
    reloaded.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    check = reloaded.evaluate(
        batches(held_out, args.batch_size), verbose=0, return_dict=True
    )["loss"]
    print(f"reloaded {args.out}: held-out loss {check:.4f}")
    return before, after, check


if __name__ == "__main__":
    main()
