"""Cuts the sample data shipped in `zoo/data/samples/` from the full data sets.

Needs the Debian packages `dataset-fashion-mnist`, `sword-text-web` and
`sword-text-sparv` (or their files elsewhere, see the options). The output is
deterministic: running it again gives byte-identical files.

    python scripts/make_samples.py [--out zoo/data/samples]

Fashion-MNIST: the first 200 training and the first 100 test images of every
class (2,000 + 1,000 images, original order), as gzipped IDX files under the
original names. Bible: 400 pairs from training books and 100 from test books,
drawn with a fixed seed among verses of at most 25 words on each side (short
sentences suit the small demo models), written in canonical order as
`english<TAB>spanish` lines.
"""

import argparse
import os
import pathlib
import sys

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run from a checkout without installing

from zoo.data import bible, fashion_mnist  # noqa: E402


def balanced_indices(labels, per_class):
    """Indices of the first `per_class` items of every class, sorted."""
    chosen = []
    for label in np.unique(labels):
        members = np.flatnonzero(labels == label)
        if len(members) < per_class:
            raise ValueError(f"Class {label} has only {len(members)} items.")
        chosen.extend(members[:per_class])
    return np.sort(np.asarray(chosen))


def cut_fashion_mnist(out, source, per_class):
    for split, count in per_class.items():
        images, labels = fashion_mnist.load_arrays(split, path=source)
        keep = balanced_indices(labels, count)
        image_name, label_name = fashion_mnist.FILES[split]
        fashion_mnist.write_idx(os.path.join(out, image_name + ".gz"), images[keep])
        fashion_mnist.write_idx(os.path.join(out, label_name + ".gz"), labels[keep])
        print(f"fashion-mnist {split}: {len(keep)} of {len(images)} images")


def short_pairs(pairs, max_words):
    return [p for p in pairs if max(len(p[0].split()), len(p[1].split())) <= max_words]


def cut_bible(out, sword_path, counts, max_words, seed):
    for split, count in counts.items():
        pairs = bible.load_pairs(split, sword_path=sword_path)
        candidates = short_pairs(pairs, max_words)
        rng = np.random.default_rng(seed)
        keep = np.sort(rng.choice(len(candidates), size=count, replace=False))
        path = os.path.join(out, bible.SAMPLE_FILES[split])
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            for i in keep:
                english, spanish, _ = candidates[i]
                f.write(f"{english}\t{spanish}\n")
        print(
            f"bible {split}: {count} of {len(candidates)} short pairs "
            f"({len(pairs)} in all) -> {path}"
        )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(REPO / "zoo" / "data" / "samples"))
    parser.add_argument("--fashion-mnist", default=fashion_mnist.DEFAULT_PATH)
    parser.add_argument("--sword", default=bible.DEFAULT_SWORD_PATH)
    parser.add_argument("--max-words", type=int, default=25)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    cut_fashion_mnist(args.out, args.fashion_mnist, {"train": 200, "test": 100})
    cut_bible(
        args.out, args.sword, {"train": 400, "test": 100}, args.max_words, args.seed
    )


if __name__ == "__main__":
    main()
