"""cProfile of beam-4 `translate` of the first test verses on PyTorch.

Where a PyTorch beam search of the Transformer preset spends its time
(session 27): the functions with the most time of their own, then by
cumulative time, after one untimed warm-up call.

    KERAS_BACKEND=torch OMP_NUM_THREADS=1 nice -n 10 taskset -c 0 python \\
        experiments/benchmarks/torch_generation_profile.py --verses 16
"""

import argparse
import cProfile
import os
import pstats
import time

os.environ.setdefault("KERAS_BACKEND", "torch")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--verses", type=int, default=16)
    p.add_argument("--lines", type=int, default=30)
    args = p.parse_args()

    import keras

    from zoo.base.task import Task
    from zoo.data import bible

    model = Task.from_preset("transformer_bible_en_es")
    sources = [en for en, _, _ in bible.load_pairs("test")][: args.verses]
    model.translate(sources[:2], beam_width=4)  # warm-up
    profile = cProfile.Profile()
    start = time.perf_counter()
    profile.enable()
    model.translate(sources, beam_width=4)
    profile.disable()
    seconds = time.perf_counter() - start
    print(f"{keras.backend.backend()}: {len(sources)} verses in {seconds:.2f} s")
    stats = pstats.Stats(profile)
    stats.sort_stats("tottime").print_stats(args.lines)
    stats.sort_stats("cumulative").print_stats(args.lines)


if __name__ == "__main__":
    main()
