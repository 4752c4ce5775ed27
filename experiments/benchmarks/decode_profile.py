"""Where `transformer_bible_en_es`'s `translate()` spends its time (issue #51).

On TensorFlow, for the first `--limit` test verses in `translate`'s
length-sorted chunks of 64, greedy and beam 4, each row timed in one
alternating run (best of `--rounds`, after a warm-up pass):

- `translate`: `model.translate(verses, beam_width)` as shipped (the search
  inside one `tf.function`, a graph `while_loop`);
- `search only`: the same compiled search on the prepared chunks (no
  tokenization, no detokenization);
- `encode only`: `model.encode` of the chunks in a `tf.function`;
- `steps alone`: `model.next` in its own `tf.function` called from Python
  as many times as the search stepped (greedy: on the batch; beam: on the
  batch tiled `width` times, the cross-attention cache tiled once), i.e.
  the network's cost without the search's loop and bookkeeping;
- `projection alone`: the step's output projection over the vocabulary
  (the tied embedding, `(rows, 256) x (256, V)`), as many times;
- `search xla`: the whole search (encode included) in one
  `tf.function(jit_compile=True)`, the source padded to a multiple of `--multiple` (16)
  and the last chunk to 64 rows, and its first-call
  compilation time per shape;
- `search int8`, `search xla int8`: `search only` and `search xla` over the
  preset quantized by `Task.quantize("int8")`.

Outputs of every search row are compared to `translate`'s ids (a count of
equal rows). The CPU, the load, the threads TensorFlow uses and whether
oneDNN is on are printed.

    python experiments/benchmarks/decode_profile.py --limit 128 --rounds 3 \
        --log experiments/benchmarks/logs/decode_profile_s30.log
"""

import argparse
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))

from machine import describe, printer  # noqa: E402

PRESET = "transformer_bible_en_es"
BATCH_SIZE = 64


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--limit", type=int, default=128)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--rows", default="", help="comma-separated subset of rows")
    p.add_argument("--multiple", type=int, default=16, help="XLA source padding")
    p.add_argument("--log")
    return p.parse_args(argv)


def timed(function, *args):
    start = time.perf_counter()
    result = function(*args)
    return result, time.perf_counter() - start


def chunks_of(model, verses):
    """`translate`'s length-sorted chunks: `[(rows, ids (n, S))]`."""
    import numpy as np
    import tensorflow as tf

    pre = model.preprocessor
    pad = pre.source_pad_id
    ids = [
        r[r != pad] for r in np.asarray(pre(tf.constant(verses))["encoder_token_ids"])
    ]
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    chunks = []
    for begin in range(0, len(order), BATCH_SIZE):
        chunk = order[begin : begin + BATCH_SIZE]
        batch = np.full((len(chunk), max(len(ids[i]) for i in chunk)), pad, "int32")
        for row, i in enumerate(chunk):
            batch[row, : len(ids[i])] = ids[i]
        chunks.append((chunk, batch))
    return chunks


def prompt_for(model, rows):
    import numpy as np

    pre = model.preprocessor
    prompt = np.full((rows, pre.target_sequence_length + 1), pre.pad_id, "int32")
    prompt[:, 0] = pre.start_id
    return prompt


def padded(model, batch, rows, multiple):
    """`batch` padded to `rows` rows (copies of its last), `multiple` positions."""
    from zoo.base.generation import padded_rows

    return padded_rows(model.padded_source(batch, multiple), rows)


def main(argv=None):
    args = parse_args(argv)
    os.environ["KERAS_BACKEND"] = "tensorflow"
    import keras
    import tensorflow as tf
    from keras import ops

    from zoo.base.generation import make_search
    from zoo.base.task import Task
    from zoo.data import bible

    say = printer(args.log)

    say(f"{describe()}; {' '.join(['python', *sys.argv])}")
    say(
        f"keras {keras.__version__}, tensorflow {tf.__version__}; threads: "
        f"intra {tf.config.threading.get_intra_op_parallelism_threads()}, "
        f"inter {tf.config.threading.get_inter_op_parallelism_threads()} (0 = all); "
        f"TF_ENABLE_ONEDNN_OPTS={os.environ.get('TF_ENABLE_ONEDNN_OPTS', 'unset')}"
    )
    model = Task.from_preset(PRESET)
    pre = model.preprocessor
    verses = [en for en, _, _ in bible.load_pairs("test")[: args.limit]]
    chunks = chunks_of(model, verses)
    widths = [1, args.beam]
    end, pad = int(pre.end_id), int(pre.pad_id)
    searches = {w: make_search(w, length_penalty=0.6) for w in widths}
    steps_taken = {}

    def search_only(width):
        out = []
        for _, batch in chunks:
            out.append(
                model.generate_with(
                    searches[width], batch, pre.target_sequence_length, 64
                )
            )
        return out

    encode = tf.function(lambda ids: model.encode(ids, pre.target_sequence_length))

    def encode_only(width):
        for _, batch in chunks:
            encode(ops.convert_to_tensor(batch))

    next_step = tf.function(model.next, reduce_retracing=True)

    def steps_alone(width):
        for (_, batch), steps in zip(chunks, steps_taken[width]):
            cache = encode(ops.convert_to_tensor(batch))
            if width > 1:
                cache = tf.nest.map_structure(lambda x: tf.repeat(x, width, 0), cache)
            prompt = tf.constant(prompt_for(model, len(batch) * width))
            for index in range(1, steps + 1):
                _, _, cache = next_step(prompt, cache, tf.constant(index))

    embedding = model.backbone.target_embedding
    project = tf.function(lambda x: embedding(x, reverse=True))

    def projection_alone(width):
        for (_, batch), steps in zip(chunks, steps_taken[width]):
            x = tf.zeros((len(batch) * width, 1, model.backbone.hidden_dim))
            for _ in range(steps):
                project(x)

    compile_seconds = {}

    def xla_runner(task, label):
        functions = {}

        def run(width):
            search = searches[width]

            def body(inputs, prompt):
                return task.run_search(
                    search, inputs, prompt, stop_token_ids=[end], pad_token_id=pad
                )

            if width not in functions:
                functions[width] = tf.function(body, jit_compile=True)
            out = []
            for chunk, batch in chunks:
                inputs = padded(task, batch, BATCH_SIZE, args.multiple)
                prompt = prompt_for(task, BATCH_SIZE)
                key = (label, width, inputs.shape)
                start = time.perf_counter()
                tokens = functions[width](tf.constant(inputs), tf.constant(prompt))
                tokens = tokens.numpy()[: len(chunk)]
                if key not in compile_seconds:
                    compile_seconds[key] = time.perf_counter() - start
                out.append(tokens)
            return out

        return run

    quantized = None
    rows = {
        "translate": lambda w: model.translate(verses, w),
        "search only": search_only,
        "encode only": encode_only,
        "steps alone": steps_alone,
        "projection alone": projection_alone,
        "search xla": xla_runner(model, "float32"),
    }
    if not args.rows or "int8" in args.rows:
        quantized = Task.from_preset(PRESET)
        quantized.quantize("int8")
        rows["search int8"] = lambda w: [
            quantized.generate_with(
                searches[w], batch, pre.target_sequence_length, BATCH_SIZE
            )
            for _, batch in chunks
        ]
        rows["search xla int8"] = xla_runner(quantized, "int8")
    if args.rows:
        wanted = ["search only", *args.rows.split(",")]
        rows = {k: v for k, v in rows.items() if k in wanted}

    reference = {}
    for width in widths:
        tokens = search_only(width)
        reference[width] = tokens
        steps_taken[width] = [int((t[:, 1:] != pad).sum(axis=1).max()) for t in tokens]
    say(f"steps per chunk (greedy, beam): {steps_taken[1]}, {steps_taken[args.beam]}")
    say(f"chunk shapes: {[b.shape for _, b in chunks]}")

    times = {}
    outputs = {}
    for width in widths:  # warm-up
        for name, run in rows.items():
            result, seconds = timed(run, width)
            outputs[name, width] = result
            say(f"# warm-up {name} beam {width}: {seconds:.2f} s")
    for r in range(args.rounds):
        for width in widths:
            for name in list(rows) if r % 2 == 0 else list(rows)[::-1]:
                _, seconds = timed(rows[name], width)
                times.setdefault((name, width), []).append(seconds)
    say(f"\n{PRESET}: {len(verses)} test verses, chunks of {BATCH_SIZE}")
    say(f"best of {args.rounds} alternating rounds; {describe()}\n")
    say("| row | greedy s | beam s | vs search only (greedy, beam) | equal ids |")
    say("|---|---:|---:|---:|---|")
    for name in rows:
        g, b = (min(times[name, w]) for w in widths)
        g0, b0 = (min(times["search only", w]) for w in widths)
        equal = "-"
        if name.startswith("search"):
            counts = []
            for w in widths:
                got, want = outputs[name, w], reference[w]
                counts.append(
                    sum(
                        int((x[:, : y.shape[1]] == y).all(axis=1).sum())
                        for x, y in zip(got, want)
                    )
                )
            equal = f"{counts[0]}/{len(verses)}, {counts[1]}/{len(verses)}"
        say(f"| {name} | {g:.2f} | {b:.2f} | {g / g0:.2f}x, {b / b0:.2f}x | {equal} |")
    say("\nXLA first-call seconds (compile + run) per (weights, width, shape):")
    for key, seconds in compile_seconds.items():
        say(f"  {key}: {seconds:.1f}")
    say(f"\n{describe()}")


if __name__ == "__main__":
    main()
