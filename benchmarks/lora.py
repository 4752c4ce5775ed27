"""LoRA, QLoRA and full fine-tuning of the Transformer translator on a shifted domain.

The shipped `transformer_bible_en_es` learned the World English Bible
(modern English) -> Reina-Valera 1909. Here its source is the King James
Version (`engKJV2006eb`, Debian package `sword-text-kjv`): the archaic
register of the same verses ("thou art", "saith") is the domain shift,
the Spanish targets are the same. Each mode fine-tunes a fresh copy of
the preset for the same `--steps` steps on the same KJV pairs of the
training books (drawn with `--seed`), then translates held-out KJV verses
of the test books (greedy) and scores them with sacreBLEU:

- `full`: every weight trains (Adam, `--full-lr`);
- `lora`: `task.enable_lora(--rank)` (the attention projections; only the
  adapters train; Adam, `--lora-lr`): keras-hub's default targets, the
  attention's query and value projections;
- `qlora`: `task.quantize("int8")`, then `task.enable_lora(--rank)`;
- `lora_qkvo`: `lora` on all four attention projections (query, key, value
  and output: `zoo.base.lora.ATTENTION_PROJECTIONS`).

Reported for each: the share of parameters that train, BLEU on the held-out
KJV verses (the shipped model's own BLEU there is the first line), the
median step time after the first `--warmup` steps, and the peak resident
memory during `fit` (VmHWM, reset before each `fit`) and its rise over the
memory before it. One process runs the modes one after the other, on the
CPU and load it names.

    python benchmarks/lora.py --steps 300 --test 200 \\
        --log experiments/transformer/logs/lora_s30.log
    python benchmarks/lora.py --steps 3 --test 8   # quick look
"""

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import machine  # noqa: E402

PRESET = "transformer_bible_en_es"
KJV = "engKJV2006eb"


def _pairs(split, count, seed):
    from zoo.data import bible

    pairs = bible.load_pairs(split, english=KJV)
    order = np.random.default_rng(seed).permutation(len(pairs))[:count]
    return [pairs[i][0] for i in order], [pairs[i][1] for i in order]


def _bleu(task, sources, references):
    from zoo.translation.metrics import corpus_scores

    hypotheses = task.translate(sources, beam_width=1, batch_size=64)
    return corpus_scores(hypotheses, references)["bleu"]


class _StepTimes:
    """A Keras callback keeping the wall time of each training step."""

    def __new__(cls):
        import keras

        class StepTimes(keras.callbacks.Callback):
            def on_train_batch_begin(self, batch, logs=None):
                self.start = time.perf_counter()

            def on_train_batch_end(self, batch, logs=None):
                self.times.append(time.perf_counter() - self.start)

        callback = StepTimes()
        callback.times = []
        return callback


def _fine_tune(mode, args, train, test):
    import keras

    from zoo.base.lora import ATTENTION_PROJECTIONS, trainable_share
    from zoo.base.task import Task
    from zoo.transformer import MaskedLabelSmoothingCrossEntropy

    keras.utils.set_random_seed(args.seed)
    task = Task.from_preset(PRESET)
    if mode == "qlora":
        task.quantize("int8")
    if mode in ("lora", "qlora"):
        task.enable_lora(args.rank)
    if mode == "lora_qkvo":
        task.enable_lora(args.rank, ATTENTION_PROJECTIONS)
    rate = args.full_lr if mode == "full" else args.lora_lr
    task.compile(
        optimizer=keras.optimizers.Adam(rate, beta_1=0.9, beta_2=0.98, epsilon=1e-9),
        loss=MaskedLabelSmoothingCrossEntropy(0.1),
    )
    share = trainable_share(task)
    before = machine.status_kib("VmRSS")
    machine.reset_peak()
    steps = _StepTimes()
    task.fit(
        train[0],
        train[1],
        batch_size=args.batch_size,
        epochs=1,
        shuffle=False,
        verbose=0,
        callbacks=[steps],
    )
    peak = machine.status_kib("VmHWM")
    bleu = _bleu(task, *test)
    return {
        "mode": mode,
        "share": share,
        "bleu": bleu,
        "step_s": float(np.median(steps.times[args.warmup :] or steps.times)),
        "peak_mib": peak / 1024,
        "rise_mib": (peak - before) / 1024,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--test", type=int, default=200, help="held-out KJV verses")
    parser.add_argument("--rank", type=int, default=8)
    parser.add_argument("--full-lr", type=float, default=1e-4)
    parser.add_argument("--lora-lr", type=float, default=1e-3)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--modes", default="full,lora,qlora,lora_qkvo")
    parser.add_argument("--log", help="also append the report to this file")
    args = parser.parse_args(argv)

    import keras

    from zoo.base.task import Task

    lines = [
        "$ python benchmarks/lora.py "
        + " ".join(sys.argv[1:] if argv is None else argv),
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; Keras "
        f"{keras.__version__}, backend {keras.backend.backend()}",
        machine.describe(),
    ]
    train = _pairs("train", args.steps * args.batch_size, args.seed)
    test = _pairs("test", args.test, args.seed)
    lines.append(
        f"{PRESET}: {len(train[0])} KJV pairs of the training books "
        f"({args.steps} steps of {args.batch_size}), {len(test[0])} held-out KJV "
        f"verses of the test books, greedy; rank {args.rank}; Adam lr "
        f"{args.full_lr} (full), {args.lora_lr} (LoRA, QLoRA)"
    )
    _report(args.log, *lines)
    shipped = _bleu(Task.from_preset(PRESET), *test)
    _report(
        args.log,
        f"shipped (no fine-tuning): BLEU {shipped:.2f}",
        "| mode | trainable share | BLEU | step (s) | peak RSS (MiB) | rise (MiB) |",
        "|---|---|---|---|---|---|",
    )
    for mode in args.modes.split(","):
        r = _fine_tune(mode, args, train, test)
        _report(
            args.log,
            f"| {mode} | {100 * r['share']:.2f}% | {r['bleu']:.2f} | "
            f"{r['step_s']:.3f} | {r['peak_mib']:.0f} | {r['rise_mib']:.0f} |",
        )
    _report(args.log, f"end: {machine.describe()}", "")


def _report(log, *lines):
    """Prints `lines` and appends them to `log` (if given) as they come."""
    print("\n".join(lines), flush=True)
    if log:
        os.makedirs(os.path.dirname(os.path.abspath(log)), exist_ok=True)
        with open(log, "a", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
