"""Scores weights trained by `train_transformer_gpu.py`: BLEU on the test books.

On the CPU, with TensorFlow (the tokenizers): the weights go into a
Transformer of the trained arguments (`run.json`) that holds the shipped
preset's preprocessor (the vocabulary the arrays were written with), and
`zoo.translation.data.evaluate_translations` scores greedy and beam
decoding with sacreBLEU, as `python -m zoo evaluate` does for a preset.

    python experiments/gpu/evaluate_gpu_weights.py RUN_DIR --beam 4

Writes `RUN_DIR/bleu.json`.
"""

import argparse
import json
import os

import numpy as np

import zoo
from zoo.translation.data import add_data_arguments, evaluate_translations, load_splits


def load(run_dir, preset):
    """The trained Transformer, with `preset`'s preprocessor."""
    with open(os.path.join(run_dir, "run.json")) as f:
        run = json.load(f)
    preprocessor = zoo.from_preset(preset, load_weights=False).preprocessor
    model = zoo.Transformer(**run["arguments"], preprocessor=preprocessor)
    with np.load(os.path.join(run_dir, "weights.npz")) as stored:
        weights = [
            stored[f"arr_{i}"].astype("float32") for i in range(len(stored.files))
        ]
    model.set_weights(weights)
    return model, run


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("run_dir", help="the --out of train_transformer_gpu.py")
    p.add_argument("--preset", default="transformer_bible_en_es")
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--limit", type=int, help="score only the first N test pairs")
    add_data_arguments(p)
    args = p.parse_args(argv)
    model, run = load(args.run_dir, args.preset)
    _, _, test = load_splits(args)
    scores = evaluate_translations(model, test, args.beam, limit=args.limit)
    summary = {
        name: {"bleu": round(s["bleu"], 2), "chrf": round(s["chrf"], 2)}
        for name, s in scores.items()
    }
    summary["measures"] = run["measures"]
    with open(os.path.join(args.run_dir, "bleu.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
