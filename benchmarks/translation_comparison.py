"""The translation comparison table: zoo.Transformer, zoo.Seq2Seq, KerasHub recipe.

Decodes the Bible test books (763 verses) with both shipped translation
presets, greedy and beam 4, scores them with sacreBLEU, and puts them beside
the keras.io "English-to-Spanish translation with KerasHub" recipe as
measured by `benchmarks/keras_hub_translation.py --json-out` (that model is
not saved, so its row is the JSON that script wrote when it finished). The
table is printed in Markdown for the Transformer model card.

Run (the table in zoo/transformer/README.md):

    python benchmarks/translation_comparison.py \\
        --recipe experiments/benchmarks/logs/keras_hub_translation_75min.json \\
        --json experiments/benchmarks/logs/translation_comparison.json

Smoke run on the shipped sample (any two translation presets):

    python benchmarks/translation_comparison.py --data sample --limit 8
"""

import argparse
import json

import keras

import zoo
from zoo.data import bible, parallel_text
from zoo.translation import evaluate_translations


def test_pairs(data, sword_path):
    if data == "sample":
        return parallel_text.read_tsv(bible.sample_path("test"))
    return [(en, es) for en, es, _ in bible.load_pairs("test", sword_path=sword_path)]


def preset_row(name, pairs, beam_width, limit):
    """Re-measures one preset on `pairs`; training facts come from its metadata."""
    model = zoo.from_preset(name)
    metadata = model.preset_metadata or {}
    metrics = metadata.get("metrics", {})
    print(f"\n{name} ({type(model).__name__}, {model.count_params():,} parameters)")
    scores = evaluate_translations(model, pairs, beam_width, limit)
    return {
        "model": f"{type(model).__name__} preset `{name}`",
        "parameters": model.count_params(),
        "train_minutes": metrics.get("train_minutes"),
        "steps": metrics.get("steps"),
        "hardware": metadata.get("hardware"),
        "command": metadata.get("command"),
        "greedy": scores["greedy"],
        f"beam{beam_width}": scores[f"beam{beam_width}"],
    }


def markdown(rows, beam_width):
    beam = f"beam{beam_width}"
    lines = [
        f"| model | parameters | training | greedy BLEU | greedy chrF "
        f"| beam-{beam_width} BLEU | beam-{beam_width} chrF |",
        "|---|---:|---|---:|---:|---:|---:|",
    ]
    for row in rows:
        training = (
            f"{row['train_minutes']} min" if row.get("train_minutes") else "?"
        ) + (f", {row['steps']} steps" if row.get("steps") else "")
        beam_scores = row.get(beam)
        lines.append(
            f"| {row['model']} | {row['parameters'] / 1e6:.1f} M | {training} "
            f"| {row['greedy']['bleu']:.2f} | {row['greedy']['chrf']:.2f} "
            + (
                f"| {beam_scores['bleu']:.2f} | {beam_scores['chrf']:.2f} |"
                if beam_scores
                else "| - | - |"
            )
        )
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--transformer", default="transformer_bible_en_es")
    p.add_argument("--seq2seq", default="seq2seq_bahdanau_bible_en_es")
    p.add_argument(
        "--recipe", help="JSON from keras_hub_translation.py --json-out (optional)"
    )
    p.add_argument("--data", default="bible", choices=["bible", "sample"])
    p.add_argument("--sword-path", default=bible.DEFAULT_SWORD_PATH)
    p.add_argument("--beam-width", type=int, default=4)
    p.add_argument("--limit", type=int, help="score only the first N test pairs")
    p.add_argument("--json", help="also write the rows here")
    args = p.parse_args(argv)
    keras.utils.set_random_seed(0)
    pairs = test_pairs(args.data, args.sword_path)

    rows = [
        preset_row(name, pairs, args.beam_width, args.limit)
        for name in (args.transformer, args.seq2seq)
    ]
    if args.recipe:
        with open(args.recipe) as f:
            recipe = json.load(f)
        recipe["model"] = (
            f"KerasHub recipe (1+1 layers, 256/2048/8, rmsprop), "
            f"{recipe['budget_minutes']:g} min budget"
        )
        rows.append(recipe)
        if recipe["greedy"]["sentences"] != rows[0]["greedy"]["sentences"]:
            print("warning: the recipe was scored on a different number of pairs")

    print(f"\n{len(pairs[: args.limit] if args.limit else pairs)} test pairs\n")
    print(markdown(rows, args.beam_width))
    transformer, seq2seq = rows[0], rows[1]
    beam = f"beam{args.beam_width}"
    print(
        f"\nTransformer - Seq2Seq: greedy {transformer['greedy']['bleu'] - seq2seq['greedy']['bleu']:+.2f}"
        f" BLEU, beam {transformer[beam]['bleu'] - seq2seq[beam]['bleu']:+.2f} BLEU"
    )
    if args.recipe:
        print(
            f"Transformer - recipe (greedy, the recipe decodes greedily): "
            f"{transformer['greedy']['bleu'] - recipe['greedy']['bleu']:+.2f} BLEU; "
            f"beam {transformer[beam]['bleu'] - recipe['greedy']['bleu']:+.2f} BLEU"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)
        print(f"rows written to {args.json}")


if __name__ == "__main__":
    main()
