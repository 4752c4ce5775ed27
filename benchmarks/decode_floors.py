"""Each family's decoding time against its floor on this CPU (issue #51).

The floor of a family is the time its GEMM work would take at this CPU's
measured float32 matrix-multiply throughput: the model's FLOPs per output
over the best throughput of `keras.ops.matmul` and `numpy.matmul` on
model-sized shapes (best of `--repeats`, measured before and after the
families; the best of both is used). The script then times each family's
shipped preset (`--families`) on its held-out data, once untimed (warm:
traced, compiled) and `--rounds` timed passes, and prints seconds,
outputs/s, the floor and the ratio (#51's target: <= 3x). Each ratio is
also given in CPU time (the pass's process CPU seconds, both cores summed,
against the FLOPs at the best GFLOP per CPU-second of the probe), which a
machine loaded by other work leaves nearly unchanged where wall time is not.

- Translators (`seq2seq`, `transformer`): `translate` of the test verses
  (`--verses`, default all) at beam 4; an output is a target subword (the
  tokenizer's pieces of each translation plus its `[END]`).
- Captioners (`show_attend_tell`, `transformer_captioner`): `caption` of
  `--scenes` test scenes (default 2,000) at beam 3; an output is a word
  plus the `[END]` of each caption.
- RAM: `predict` of `--images` test images (default 10,000) of the
  default preset's canvases, batches of 256; an output is an image.

FLOPs are counted, not estimated: `keras.ops.matmul`, `einsum` and the
convolutions are wrapped while the model runs eagerly on TensorFlow, and
each call adds `2 x` its multiply-adds (elementwise ops, softmax and
gathers are not counted: the floor is the GEMM work alone). A generative
model's FLOPs per output at beam `k` are `(E + n k D) / n`: `E` its encoder
per input (`encode` of one input), `D` one decoder step of one row
(`next` at index 1 of one input), `n` the outputs per input of the timed
run; both averaged over `--sample` inputs, each encoded alone (no padding).
A glimpse classifier's are `predict`'s per image.

    python benchmarks/decode_floors.py --log experiments/benchmarks/logs/decode_floors.log
    python benchmarks/decode_floors.py --families ram --images 1000  # a smoke run
"""

import argparse
import contextlib
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ["KERAS_BACKEND"] = "tensorflow"

from machine import describe, printer  # noqa: E402

#: family: (preset, beam width or None).
FAMILIES = {
    "seq2seq": ("seq2seq_bahdanau_bible_en_es", 4),
    "show_attend_tell": ("show_attend_tell_fashion_scenes", 3),
    "transformer_captioner": ("transformer_captioner_fashion_scenes", 3),
    "ram": ("ram_fashion_mnist_translated_seeking_annealed", None),
    "transformer": ("transformer_bible_en_es", 4),
}
DEFAULT_FAMILIES = "seq2seq,show_attend_tell,transformer_captioner,ram"

#: `(M, K, N)` of the throughput probe: rows x width x outputs of the
#: families' projections (a chunk of 64 at beam 4 is 256 rows).
GEMM_SHAPES = (
    (256, 256, 256),
    (256, 256, 1024),
    (256, 1024, 256),
    (256, 256, 10824),
    (192, 512, 2048),
    (256, 512, 6434),
)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--families", default=DEFAULT_FAMILIES, help="comma-separated")
    p.add_argument("--verses", type=int, help="the first N test verses")
    p.add_argument("--scenes", type=int, default=2000, help="test scenes")
    p.add_argument("--images", type=int, default=10000, help="RAM's test images")
    p.add_argument("--rounds", type=int, default=1, help="timed passes")
    p.add_argument("--sample", type=int, default=16, help="inputs counted")
    p.add_argument("--repeats", type=int, default=20, help="of each GEMM")
    p.add_argument("--log", help="also write the output here")
    args = p.parse_args(argv)
    unknown = sorted(set(args.families.split(",")) - set(FAMILIES))
    if unknown:
        p.error(f"--families: unknown {unknown}; choose from {list(FAMILIES)}")
    return args


# === This CPU's GEMM throughput ===


def gemm_throughput(repeats):
    """`{(library, shape): FLOP/s}`, the best of `repeats` calls of each.

    Also `{(library + " cpu", shape): FLOP per CPU-second}` (the process's
    CPU time, both cores summed): what a loaded machine leaves unchanged.
    """
    import keras
    import numpy as np

    rng = np.random.default_rng(0)
    results = {}
    for m, k, n in GEMM_SHAPES:
        a = rng.standard_normal((m, k), dtype="float32")
        b = rng.standard_normal((k, n), dtype="float32")
        ta, tb = keras.ops.convert_to_tensor(a), keras.ops.convert_to_tensor(b)
        calls = {
            "keras.ops": lambda ta=ta, tb=tb: keras.ops.convert_to_numpy(
                keras.ops.matmul(ta, tb)
            ),
            "numpy": lambda a=a, b=b: a @ b,
        }
        for library, call in calls.items():
            call()
            wall, cpu = float("inf"), float("inf")
            for _ in range(repeats):
                start, start_cpu = time.perf_counter(), time.process_time()
                call()
                cpu = min(cpu, time.process_time() - start_cpu)
                wall = min(wall, time.perf_counter() - start)
            flops = 2.0 * m * k * n
            results[library, (m, k, n)] = flops / wall
            results[library + " cpu", (m, k, n)] = flops / max(cpu, 1e-9)
    return results


# === FLOPs, counted while the model runs eagerly ===


def einsum_flops(equation, *operands):
    """`2 x` the product of every index's size: the multiply-adds of einsum."""
    inputs = equation.replace(" ", "").split("->")[0].split(",")
    sizes = {}
    for letters, x in zip(inputs, operands):
        for letter, size in zip(letters, x.shape):
            sizes[letter] = int(size)
    total = 2
    for size in sizes.values():
        total *= size
    return total


def matmul_flops(x1, x2):
    """`2 x M x K x N` times the broadcast batch of a matmul."""
    import numpy as np

    a, b = list(x1.shape), list(x2.shape)
    if len(b) == 1:
        b = b + [1]
    if len(a) == 1:
        a = [1] + a
    batch = np.broadcast_shapes(tuple(a[:-2]), tuple(b[:-2]))
    return 2 * int(np.prod(batch, dtype="int64")) * a[-2] * a[-1] * b[-1]


def conv_flops(inputs, kernel, outputs):
    """`2 x` output elements `x` kernel taps `x` input channels per group."""
    import numpy as np

    taps = int(np.prod(kernel.shape[:-1]))  # spatial x input channels
    return 2 * int(np.prod(outputs.shape)) * taps


@contextlib.contextmanager
def counted_flops():
    """Counts the GEMM FLOPs of Keras's TensorFlow ops: yields `[total]`."""
    import tensorflow as tf
    from keras.src import backend

    total = [0]
    numpy, nn = backend.numpy, backend.nn
    original = (numpy.matmul, numpy.einsum, nn.conv)

    def matmul(x1, x2):
        total[0] += matmul_flops(x1, x2)
        return original[0](x1, x2)

    def einsum(subscripts, *operands, **kwargs):
        total[0] += einsum_flops(subscripts, *operands)
        return original[1](subscripts, *operands, **kwargs)

    def conv(inputs, kernel, *args, **kwargs):
        outputs = original[2](inputs, kernel, *args, **kwargs)
        total[0] += conv_flops(inputs, kernel, outputs)
        return outputs

    numpy.matmul, numpy.einsum, nn.conv = matmul, einsum, conv
    tf.config.run_functions_eagerly(True)
    try:
        yield total
    finally:
        tf.config.run_functions_eagerly(False)
        numpy.matmul, numpy.einsum, nn.conv = original


def generative_flops(model, prepared, max_length):
    """`(encoder FLOPs per input, decoder-step FLOPs per row)`, averaged."""
    import numpy as np

    pre = model.generation_preprocessor()
    encoder, step = [], []
    for x in prepared:
        prompt = np.full((1, max_length + 1), pre.pad_id, "int32")
        prompt[:, 0] = pre.start_id
        with counted_flops() as flops:
            cache = model.encode(x, max_length)
        encoder.append(flops[0])
        with counted_flops() as flops:
            model.next(prompt, cache, 1)
        step.append(flops[0])
    return float(np.mean(encoder)), float(np.mean(step))


# === The families' runs ===


def translator(model, args):
    """`(run() -> outputs count, (encoder, step) FLOPs, inputs)`."""
    import numpy as np
    import tensorflow as tf

    from zoo.data import bible

    verses = [en for en, _, _ in bible.load_pairs("test")[: args.verses]]
    pre, beam = model.preprocessor, FAMILIES[args.family][1]

    def run(texts=verses):
        outputs = model.translate(texts, beam_width=beam)
        pieces = pre.target_tokenizer(outputs)
        return sum(len(p) for p in pieces) + len(outputs)

    ids = np.asarray(pre(tf.constant(verses[: args.sample]))["encoder_token_ids"])
    prepared = [row[row != pre.source_pad_id][None] for row in ids]
    flops = generative_flops(model, prepared, pre.target_sequence_length)
    return run, verses, flops


def captioner(model, args):
    """`(run() -> outputs count, (encoder, step) FLOPs, inputs)`."""
    from zoo.data import scenes

    images = scenes.load("test", num_scenes=args.scenes)["images"]
    pre, beam = model.preprocessor, FAMILIES[args.family][1]

    def run(batch=images):
        captions = model.caption(batch, beam_width=beam)
        return sum(len(c.split()) for c in captions) + len(captions)

    prepared = [pre.images(images[i : i + 1]) for i in range(args.sample)]
    flops = generative_flops(model, prepared, pre.sequence_length)
    return run, images, flops


def classifier(model, args):
    """`(run() -> outputs count, (FLOPs per image, 0), inputs)`."""
    from zoo.data import fashion_mnist
    from zoo.ram.canvas import preset_data

    variant, seeds, canvas_size = preset_data(model.preset_metadata)
    images, _ = fashion_mnist.load(
        "test", variant, canvas_size=canvas_size, seed=seeds["test"]
    )
    images = images[: args.images]

    def run(batch=images):
        model.predict(batch, batch_size=256, verbose=0)
        return len(batch)

    with counted_flops() as flops:
        model.predict(images[: args.sample], batch_size=args.sample, verbose=0)
    return run, images, (flops[0] / args.sample, 0.0)


def measure(family, args):
    """One family's row: its preset's counts and the best timed pass."""
    from zoo.base.task import Task

    preset, beam = FAMILIES[family]
    args.family = family
    model = Task.from_preset(preset)
    kind = {"ram": classifier, "seq2seq": translator, "transformer": translator}
    run, inputs, (encoder, step) = kind.get(family, captioner)(model, args)
    run(inputs[:64])  # traced and compiled at the first chunk's shapes
    outputs = run()  # the warm-up pass
    seconds, cpu = [], []
    for _ in range(args.rounds):
        start, start_cpu = time.perf_counter(), time.process_time()
        run()
        cpu.append(time.process_time() - start_cpu)
        seconds.append(time.perf_counter() - start)
    per_input = outputs / len(inputs)
    flops = encoder / per_input + (beam or 1) * step if beam else encoder
    return {
        "family": family,
        "preset": preset,
        "decoding": f"beam {beam}" if beam else "predict",
        "inputs": len(inputs),
        "outputs": outputs,
        "seconds": min(seconds),
        "cpu": min(cpu),
        "encoder": encoder,
        "step": step,
        "flops": flops,
    }


def main(argv=None):
    args = parse_args(argv)
    say = printer(args.log)
    import keras
    import tensorflow as tf

    say(f"{describe()}; {' '.join(['python', *sys.argv])}")
    say(f"keras {keras.__version__}, tensorflow {tf.__version__}")
    throughput = gemm_throughput(args.repeats)
    rows = []
    for family in args.families.split(","):
        rows.append(measure(family, args))
        say(f"# {family}: {rows[-1]['seconds']:.1f} s; {describe()}")
    after = gemm_throughput(args.repeats)
    say(
        "\nfloat32 GEMM throughput, GFLOP/s of wall time and per CPU-second "
        f"(best of {args.repeats}; before / after the families):\n"
    )
    say(
        "| M x K x N | keras.ops.matmul | numpy | keras.ops per CPU-s | numpy per CPU-s |"
    )
    say("|---|---:|---:|---:|---:|")
    libraries = ("keras.ops", "numpy", "keras.ops cpu", "numpy cpu")
    for shape in GEMM_SHAPES:
        cells = [
            f"{throughput[lib, shape] / 1e9:.1f} / {after[lib, shape] / 1e9:.1f}"
            for lib in libraries
        ]
        say(f"| {' x '.join(map(str, shape))} | {' | '.join(cells)} |")
    both = [*throughput.items(), *after.items()]
    peak = max(v for (lib, _), v in both if not lib.endswith("cpu"))
    peak_cpu = max(v for (lib, _), v in both if lib.endswith("cpu"))
    say(
        f"\nthe floor's throughput (the best above): {peak / 1e9:.1f} GFLOP/s, "
        f"{peak_cpu / 1e9:.1f} GFLOP per CPU-second\n"
    )
    say(
        "| family | preset | decoding | inputs | outputs | best s | outputs/s "
        "| MFLOP/output (encoder/input, step/row) | floor s | vs floor "
        "| CPU s | vs floor, CPU time |"
    )
    say("|---|---|---|---:|---:|---:|---:|---|---:|---:|---:|---:|")
    for r in rows:
        floor = r["outputs"] * r["flops"] / peak
        floor_cpu = r["outputs"] * r["flops"] / peak_cpu
        split = f"{r['encoder'] / 1e6:.2f}, {r['step'] / 1e6:.2f}"
        say(
            f"| {r['family']} | {r['preset']} | {r['decoding']} | {r['inputs']} "
            f"| {r['outputs']} | {r['seconds']:.2f} "
            f"| {r['outputs'] / r['seconds']:.0f} | {r['flops'] / 1e6:.2f} ({split}) "
            f"| {floor:.2f} | {r['seconds'] / floor:.1f}x "
            f"| {r['cpu']:.2f} | {r['cpu'] / floor_cpu:.1f}x |"
        )
    say(f"\n{describe()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
