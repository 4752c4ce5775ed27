"""Trains a zoo Transformer translator on a GPU from arrays, without TensorFlow.

The lent GPU machine has JAX and no TensorFlow, so the Bible pairs come as
token ids written beforehand, where TensorFlow is installed, with the
shipped preset's preprocessor (`python -m zoo.translation.arrays --out
bible_arrays.npz`). This script hides TensorFlow (as on that machine),
sets Keras's `mixed_bfloat16` policy, trains for `--minutes` and prints:

- the loss curve (the running mean of each epoch's training loss every
  `--log-every` steps, and the validation loss after each epoch);
- step time and target subwords per second, after the first 10 steps
  (compiling) and without the validation passes;
- model FLOPs utilization: 6 x parameters (embeddings included) x target
  subwords/s (padding excluded) over the GPU's dense bfloat16 peak,
  `PEAK_FLOPS` (989.4 TFLOP/s for an H100 or H200 SXM, NVIDIA's data
  sheets; the sparse figure is twice that).

It writes `weights.npz` (the weights in order, `--weights-dtype`) and
`run.json` (the model's arguments, the measures, the loss curve) under
`--out` (`$OUT` on the GPU machine). `evaluate_gpu_weights.py` loads them
into the shipped preset's preprocessor on the CPU and scores BLEU.

    python experiments/gpu/train_transformer_gpu.py --arrays bible_arrays.npz \\
        --minutes 5 --out "$OUT"                # the shipped preset's size
    python experiments/gpu/train_transformer_gpu.py --smoke --arrays A.npz --out /tmp/s

`--smoke` runs a tiny model for 20 steps on the CPU (under a minute).
"""

import sys

for _name in ("tensorflow", "tensorflow_text", "tf_keras"):
    sys.modules[_name] = None  # as on the GPU machine; the smoke run proves it

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import time  # noqa: E402

os.environ.setdefault("KERAS_BACKEND", "jax")

import keras  # noqa: E402
import numpy as np  # noqa: E402

from keras_attention.training.schedules import InverseSqrtSchedule  # noqa: E402
from zoo.training.callbacks import StepBudget, TimeBudget  # noqa: E402
from zoo.transformer import Transformer  # noqa: E402
from zoo.transformer.losses import (  # noqa: E402
    MaskedLabelSmoothingCrossEntropy,
    TargetTokens,
)
from zoo.transformer.train import Throughput  # noqa: E402
from zoo.translation.arrays import ArrayBatches, read_arrays  # noqa: E402

#: Dense bfloat16 peak, FLOP/s (NVIDIA H100 / H200 SXM data sheets).
PEAK_FLOPS = {"H100": 989.4e12, "H200": 989.4e12}

#: The shipped preset's architecture (`zoo/transformer/presets/
#: transformer_bible_en_es/config.json`), and a larger one.
MODELS = {
    "shipped": dict(num_layers=3, hidden_dim=256, intermediate_dim=1024, num_heads=4),
    "base": dict(num_layers=6, hidden_dim=512, intermediate_dim=2048, num_heads=8),
    "tiny": dict(num_layers=1, hidden_dim=32, intermediate_dim=64, num_heads=2),
}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--arrays", required=True, help="from zoo.translation.arrays")
    p.add_argument("--out", default=os.environ.get("OUT", "gpu_run"))
    p.add_argument("--model", default="shipped", choices=sorted(MODELS))
    p.add_argument("--minutes", type=float, default=5.0, help="training time")
    p.add_argument("--max-steps", type=int, help="stop after this many steps")
    p.add_argument("--batch-size", type=int, default=256, help="pairs per step")
    p.add_argument("--warmup-steps", type=int, default=400)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--policy", default="mixed_bfloat16")
    p.add_argument("--gpu", default="H200", choices=sorted(PEAK_FLOPS))
    p.add_argument(
        "--pad-to-multiple",
        type=int,
        default=32,
        help="batch widths (so few shapes compile); 0: the full length, one shape",
    )
    p.add_argument("--log-every", type=int, default=50)
    p.add_argument("--weights-dtype", default="float32", choices=["float32", "float16"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--smoke", action="store_true", help="tiny model, 20 steps, CPU: a check"
    )
    args = p.parse_args(argv)
    if args.smoke:
        args.model, args.max_steps, args.batch_size = "tiny", 20, 16
        args.log_every, args.warmup_steps, args.pad_to_multiple = 5, 10, 0
        args.minutes = 30.0  # the step budget ends it
    return args


def build(args, vocabulary_size):
    """The Transformer and its compile, as `zoo/transformer/train.py` does."""
    keras.mixed_precision.set_global_policy(args.policy)
    keras.utils.set_random_seed(args.seed)
    arguments = dict(
        MODELS[args.model],
        vocabulary_size=vocabulary_size,
        dropout=args.dropout,
        normalize_first=True,
    )
    model = Transformer(**arguments)
    schedule = InverseSqrtSchedule(model.hidden_dim, warmup_steps=args.warmup_steps)
    model.compile(
        optimizer=keras.optimizers.Adam(
            schedule, beta_1=0.9, beta_2=0.98, epsilon=1e-9
        ),
        loss=MaskedLabelSmoothingCrossEntropy(0.1),
        weighted_metrics=[TargetTokens()],
    )
    return model, arguments


class LossCurve(keras.callbacks.Callback):
    """The running training loss every `every` steps, and each epoch's validation."""

    def __init__(self, every):
        super().__init__()
        self.every = every
        self.steps = 0
        self.points = []
        self.start = time.time()

    def on_train_batch_end(self, batch, logs=None):
        self.steps += 1
        if self.steps == 1:
            print(f"step 1 (compiling included): {time.time() - self.start:.1f} s")
        if self.steps % self.every == 0:
            loss = float(logs["loss"])
            self.points.append({"step": self.steps, "loss": round(loss, 4)})
            print(f"step {self.steps}: loss {loss:.4f}", flush=True)

    def on_epoch_end(self, epoch, logs=None):
        if "val_loss" in logs:
            val = round(float(logs["val_loss"]), 4)
            self.points.append({"step": self.steps, "val_loss": val})
            print(f"epoch {epoch + 1}, step {self.steps}: validation loss {val:.4f}")


def main(argv=None):
    args = parse_args(argv)
    arrays = read_arrays(args.arrays)
    vocabulary_size = len(arrays["vocabulary"])
    model, arguments = build(args, vocabulary_size)
    width = args.pad_to_multiple or None
    train = ArrayBatches(arrays, args.batch_size, seed=args.seed, pad_to_multiple=width)
    validation = ArrayBatches(
        arrays, args.batch_size, "validation", shuffle=False, pad_to_multiple=width
    )
    parameters = model.count_params()
    print(
        f"{args.model}: {parameters:,} parameters, {args.policy}, backend "
        f"{keras.backend.backend()} on {describe_devices()}; {len(train)} steps "
        f"an epoch of {args.batch_size} pairs"
    )
    throughput = Throughput(skip=10)
    curve = LossCurve(args.log_every)
    callbacks = [throughput, curve, TimeBudget(args.minutes)]
    if args.max_steps:
        callbacks.append(StepBudget(args.max_steps))
    start = time.time()
    model.fit(
        train,
        validation_data=validation if len(validation) else None,
        epochs=10_000,
        callbacks=callbacks,
        verbose=0,
    )
    seconds = time.time() - start
    measures = {
        "parameters": parameters,
        "steps": throughput.steps,
        "training_seconds": round(seconds, 1),
        "step_seconds": round(1 / throughput.steps_per_second, 4)
        if throughput.measured_steps
        else None,
        "target_subwords_per_second": round(throughput.tokens_per_second, 1),
        "peak_flops": PEAK_FLOPS[args.gpu],
        "peak": f"{args.gpu} SXM dense bfloat16, NVIDIA data sheet",
    }
    flops = 6 * parameters * throughput.tokens_per_second
    measures["mfu"] = round(flops / PEAK_FLOPS[args.gpu], 4)
    print(throughput.summary())
    print(
        f"step time {measures['step_seconds']} s, "
        f"{measures['target_subwords_per_second']:.0f} target subwords/s, MFU "
        f"{100 * measures['mfu']:.2f}% of {PEAK_FLOPS[args.gpu] / 1e12:.1f} "
        f"TFLOP/s ({measures['peak']})"
    )
    write(args, model, arguments, measures, curve.points)
    return measures


def describe_devices():
    if keras.backend.backend() == "jax":
        import jax

        return ", ".join(sorted({d.device_kind for d in jax.devices()}))
    return keras.backend.backend()


def write(args, model, arguments, measures, curve):
    os.makedirs(args.out, exist_ok=True)
    weights = [np.asarray(w).astype(args.weights_dtype) for w in model.get_weights()]
    np.savez(os.path.join(args.out, "weights.npz"), *weights)
    run = {
        "arguments": arguments,
        "args": vars(args),
        "measures": measures,
        "loss_curve": curve,
        "devices": describe_devices(),
    }
    with open(os.path.join(args.out, "run.json"), "w") as f:
        json.dump(run, f, indent=1)
    print(f"wrote {args.out}/weights.npz and run.json")


if __name__ == "__main__":
    main()
