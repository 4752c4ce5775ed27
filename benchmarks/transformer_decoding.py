"""Decoding speed of `zoo.Transformer`: the key/value cache and the beam search.

1. Cached vs uncached greedy decoding of `--new-tokens` tokens (no stop
   token, so every run generates all of them): `Transformer.next` runs the
   decoder on the newest token only, against self-attention caches and the
   cross-attention keys/values computed once from the encoder output;
   the uncached step (`uncached_step` below, from the backbone's public
   `call_encoder` / `call_decoder`) re-runs the decoder over the whole prefix at
   every step (the encoder output is still computed once; the keras.io
   recipe recomputes the encoder too). Same model, same search
   (`keras_attention.decoding.GreedySearch`), same source batch. The
   "cached, XLA" row compiles the cached search with `jit_compile=True`
   (the uncached prefix changes shape every step, so XLA cannot compile it).
2. `keras_attention.decoding.BeamSearch` vs `keras_hub.samplers.BeamSampler`
   (same beam width, no stop token, `length_penalty=0`), both driving the
   same `Transformer.next` and the same cache. Without stop tokens and
   penalties the two return the same sequences, which is checked.

Every search runs inside a `tf.function` (one trace each, not timed); the
contenders take turns run by run (the order swapped every run) and the table
gives the median seconds per batch. The weights are random (decoding cost
does not depend on them). TensorFlow only, synthetic sources; the same beam
search on every Keras backend, with the shipped preset on the Bible test
verses (`translate`, TF vs JAX vs PyTorch, a process each), is
`python benchmarks/zoo_backends_evaluation.py --decode N`.

    python benchmarks/transformer_decoding.py            # config "small"
    python benchmarks/transformer_decoding.py --config tiny --runs 3
"""

import argparse
import functools
import os
import statistics
import time

import keras
import keras_hub
import numpy as np
import tensorflow as tf
from machine import cpu_model

from keras_attention.decoding import BeamSearch, GreedySearch
from zoo.transformer import Transformer


def uncached_step(model):
    """`(encode, next)` without a key/value cache: `next` re-runs the prefix.

    The encoder output is computed once; every step decodes `prompt[:, :index]`
    from scratch (as the keras.io recipe does): the reference the cache beats.
    """
    backbone = model.backbone

    def encode(source):
        memory, mask = backbone.call_encoder(source)
        return {"memory": memory, "memory_mask": mask}

    def next(prompt, cache, index):
        hidden = backbone.call_decoder(
            prompt[:, :index], cache["memory"], cache["memory_mask"]
        )[:, -1]
        return backbone.target_embedding(hidden, reverse=True), None, cache

    return encode, next


def timed(functions, runs):
    """Median seconds of each function, run in alternating order."""
    for f in functions.values():
        f()  # trace / warm up
    times = {name: [] for name in functions}
    names = list(functions)
    for r in range(runs):
        for name in names if r % 2 == 0 else names[::-1]:
            start = time.perf_counter()
            functions[name]()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default="small")
    p.add_argument("--vocabulary-size", type=int, default=8000)
    p.add_argument("--batch-size", type=int, default=32, help="greedy batch")
    p.add_argument("--beam-batch-size", type=int, default=8, help="beam batch")
    p.add_argument("--source-length", type=int, default=32)
    p.add_argument("--new-tokens", type=int, default=128)
    p.add_argument("--beam-width", type=int, default=4)
    p.add_argument("--runs", type=int, default=5)
    args = p.parse_args(argv)

    keras.utils.set_random_seed(0)
    model = Transformer.from_name(
        args.config, vocabulary_size=args.vocabulary_size, dropout=0.0
    )
    rng = np.random.default_rng(0)
    length = args.new_tokens + 1

    @functools.lru_cache
    def inputs(batch):
        """The same source batch for every contender of a given size."""
        source = rng.integers(4, args.vocabulary_size, (batch, args.source_length))
        prompt = np.zeros((batch, length), "int32")
        prompt[:, 0] = 2  # [START]
        return tf.constant(source, "int32"), tf.constant(prompt)

    def search_fn(search, cached, batch, jit_compile=False):
        source, prompt = inputs(batch)

        def run():
            if cached:
                cache, next = model.encode(source, length), model.next
            else:
                encode, next = uncached_step(model)
                cache = encode(source)
            return search(next, prompt, cache=cache, index=1)

        return tf.function(run, jit_compile=jit_compile)

    greedy = GreedySearch()
    rows = {
        "uncached": search_fn(greedy, False, args.batch_size),
        "cached": search_fn(greedy, True, args.batch_size),
        "cached, XLA": search_fn(greedy, True, args.batch_size, jit_compile=True),
    }
    outputs = [f().numpy() for f in rows.values()]
    same = all(np.array_equal(outputs[0], o) for o in outputs[1:])
    greedy_times = timed(rows, args.runs)

    batch = args.beam_batch_size
    ours = search_fn(
        BeamSearch(beam_width=args.beam_width, length_penalty=0.0), True, batch
    )
    hub = search_fn(
        keras_hub.samplers.BeamSampler(num_beams=args.beam_width), True, batch
    )
    beams_equal = np.array_equal(ours().numpy(), hub().numpy())
    beam_times = timed({"keras_hub": hub, "ours": ours}, args.runs)

    print(
        f"keras {keras.__version__}, keras-hub {keras_hub.__version__}, "
        f"tensorflow {tf.__version__}, {cpu_model()}, {os.cpu_count()} CPUs"
    )
    print(
        f"Transformer '{args.config}' ({model.num_layers} layers, d_model "
        f"{model.hidden_dim}, {model.num_heads} heads, vocabulary "
        f"{args.vocabulary_size}, {model.count_params():,} parameters), source "
        f"length {args.source_length}, {args.new_tokens} new tokens, median of "
        f"{args.runs} alternating runs\n"
    )
    tokens = args.batch_size * args.new_tokens
    print(
        f"| greedy decoding, batch {args.batch_size} | seconds / batch | "
        "tokens / s | vs uncached |"
    )
    print("|---|---:|---:|---:|")
    for name in rows:
        s = greedy_times[name]
        ratio = greedy_times["uncached"] / s
        print(f"| {name} | {s:.3f} | {tokens / s:.0f} | {ratio:.2f}x |")
    print(f"\nsame tokens, every row: {same}\n")
    print(
        f"| beam search, beam {args.beam_width}, batch {batch} | seconds / batch "
        "| vs keras-hub |"
    )
    print("|---|---:|---:|")
    for name in ("keras_hub", "ours"):
        s = beam_times[name]
        ratio = beam_times["keras_hub"] / s
        print(f"| {name} | {s:.3f} | {ratio:.2f}x |")
    print(f"\nsame sequences ours and keras-hub: {beams_equal}")


if __name__ == "__main__":
    main()
