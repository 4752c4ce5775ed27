"""`keras-attention` / `python -m zoo`: presets, training, evaluation, translation.

Commands:
  presets                          list shipped presets with their metrics
  train MODEL [training flags]     train a zoo model and write a preset
  evaluate PRESET [--split test]   score a translation preset with sacreBLEU
  translate PRESET TEXT... [--beam 4] [--plot out.png]
"""

import argparse
import sys

MODELS = {"seq2seq": "zoo.seq2seq.train"}


def _presets(args):
    from keras_attention.presets import read_metadata
    from zoo.task import list_presets

    found = list_presets()
    if not found:
        print("No presets shipped yet.")
        return 0
    for name, path in found.items():
        meta = read_metadata(path)
        test = meta.get("metrics", {}).get("test", {})
        scores = ", ".join(
            f"{decoding}: BLEU {m['bleu']:.2f} chrF {m['chrf']:.2f}"
            for decoding, m in test.items()
            if isinstance(m, dict) and "bleu" in m
        )
        print(f"{name:40s} {meta.get('class_name', '?'):12s} {scores}")
        print(f"{'':40s} {path}")
    return 0


def _train(args, rest):
    import importlib

    if args.model not in MODELS:
        print(
            f"Unknown model {args.model!r}. Choose one of: {', '.join(MODELS)}.",
            file=sys.stderr,
        )
        return 2
    importlib.import_module(MODELS[args.model]).main(rest)
    return 0


def _load(preset):
    from zoo.task import Task

    return Task.from_preset(preset)


def _translate(args):
    model = _load(args.preset)
    if not hasattr(model, "translate"):
        print(f"Preset {args.preset} is not a translation model.", file=sys.stderr)
        return 2
    if args.plot:
        from keras_attention.plotting import plot_attention

        outputs, alignments = model.translate(
            args.text, beam_width=args.beam, return_attention=True
        )
        for i, (out, alignment) in enumerate(zip(outputs, alignments)):
            path = (
                args.plot
                if len(outputs) == 1
                else args.plot.replace(".png", f"_{i}.png")
            )
            plot_attention(
                alignment["weights"],
                path,
                alignment["source_tokens"],
                alignment["target_tokens"],
                title=out,
            )
            print(out)
            print(f"  alignment: {path}")
        return 0
    for out in model.translate(args.text, beam_width=args.beam):
        print(out)
    return 0


def _evaluate(args):
    from zoo.data import bible
    from zoo.seq2seq.train import evaluate_translations

    model = _load(args.preset)
    pairs = [
        (en, es)
        for en, es, _ in bible.load_pairs(args.split, sword_path=args.sword_path)
    ]
    evaluate_translations(model, pairs, args.beam, args.limit)
    return 0


def build_parser():
    parser = argparse.ArgumentParser(
        prog="keras-attention", description=__doc__.splitlines()[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("presets", help="list shipped presets")
    train = sub.add_parser(
        "train", help="train a model (see MODEL --help)", add_help=False
    )
    train.add_argument("model")
    evaluate = sub.add_parser("evaluate", help="BLEU/chrF of a translation preset")
    evaluate.add_argument("preset")
    evaluate.add_argument(
        "--split", default="test", choices=["train", "validation", "test"]
    )
    evaluate.add_argument("--sword-path", default="/usr/share/sword")
    evaluate.add_argument("--beam", type=int, default=4)
    evaluate.add_argument("--limit", type=int, default=None)
    translate = sub.add_parser("translate", help="translate text with a preset")
    translate.add_argument("preset")
    translate.add_argument("text", nargs="+")
    translate.add_argument("--beam", type=int, default=4)
    translate.add_argument("--plot", help="save the alignment heatmap(s) to this PNG")
    return parser


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if args.command == "train":
        return _train(args, rest)
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    try:
        return {"presets": _presets, "translate": _translate, "evaluate": _evaluate}[
            args.command
        ](args)
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
