"""`translate`, `caption` and `classify`: a preset's answers for the inputs given."""

import itertools
import sys
import warnings

from zoo import progress
from zoo.cli import common
from zoo.cli.images import read_image
from zoo.cli.warning_lines import say_warnings
from zoo.training.flags import positive_float, positive_int


def add_parsers(sub):
    """Adds `translate`, `caption` and `classify`."""
    translate = sub.add_parser("translate", help="translate text with a preset")
    translate.add_argument("preset", help=common.PRESET_HELP)
    translate.add_argument(
        "text",
        nargs="+",
        help="English sentences, each one argument (quote it); an empty one "
        "is an error",
    )
    translate.add_argument(
        "--beam", type=positive_int, default=4, help=common.BEAM_HELP
    )
    translate.add_argument(
        "--sequence-length",
        type=positive_int,
        help="longest source and output in subwords (default: the preset's); "
        "longer sources are cut with a warning",
    )
    translate.add_argument(
        "--max-length",
        type=positive_int,
        help="longest output in subwords (default: the preset's); longer "
        "outputs stop mid-sentence with a warning",
    )
    translate.add_argument("--plot", help="save the alignment heatmap(s) to this PNG")
    caption = sub.add_parser("caption", help="caption images with a preset")
    caption.add_argument("preset", help=common.PRESET_HELP)
    caption.add_argument("image", nargs="+", help="PNG/JPEG files")
    caption.add_argument("--beam", type=positive_int, default=3, help=common.BEAM_HELP)
    caption.add_argument(
        "--max-length",
        type=positive_int,
        help="longest caption in subwords (default: the preset's); longer "
        "captions stop mid-sentence with a warning",
    )
    caption.add_argument("--plot", help="save per-word attention overlays to this PNG")
    for command in (translate, caption):
        _add_sampling_flags(command)
    classify = sub.add_parser("classify", help="classify images with a RAM preset")
    classify.add_argument("preset", help=common.PRESET_HELP)
    classify.add_argument(
        "image",
        nargs="+",
        help="PNG/JPEG files; the cost does not grow with the size, but sides "
        "far from the preset's training canvas (`presets` says which) are "
        "classified poorly and warned about",
    )
    classify.add_argument("--plot", help="save the glimpse path(s) to this PNG")
    for command in (translate, caption, classify):
        common.add_model_flags(command)
    return translate, caption, classify


def _add_sampling_flags(command):
    """`--sample` and its options (Hugging Face's names) for a verb."""
    group = command.add_argument_group(
        "sampling",
        "draw the output instead of the beam search (--top-k, "
        "--top-p, --temperature and --seed imply --sample)",
    )
    group.add_argument("--sample", action="store_true", help="draw each subword")
    group.add_argument("--top-k", type=positive_int, help="draw from the K best")
    group.add_argument(
        "--top-p", type=positive_float, help="draw from the nucleus of mass P <= 1"
    )
    group.add_argument(
        "--temperature", type=positive_float, help="divides the log-probabilities"
    )
    group.add_argument(
        "--seed",
        type=int,
        help="reproduce the draws: the same seed and inputs, in the same order, "
        f"draw the same outputs, on a terminal or not; each {common.BATCH} "
        "inputs draw under their own seed, derived from it, so repeated "
        "inputs draw anew (default: new draws each run)",
    )
    group.add_argument(
        "--num-return-sequences",
        type=positive_int,
        default=1,
        metavar="N",
        help="outputs per input, in a row: N draws with --sample, else the N "
        "best of the beam search (N <= --beam)",
    )


def _sampling(args, batch):
    """The `sampler` and `num_return_sequences` of `translate`/`caption`'s flags.

    The CLI decodes `common.BATCH` inputs per call, on a terminal or not
    (`_drawing`); batch `batch` draws under the seed `chunk_seed(seed,
    batch)`, as a task's own chunks do, so a seed reproduces a whole run
    and the 1st and the 65th of two equal inputs draw apart.
    """
    from keras_attention.arguments import int_argument
    from zoo.base.generation import chunk_seed, make_sampler

    options = (args.top_k, args.top_p, args.temperature)
    sampler = None
    if _drawing(args):
        seed = int_argument("seed", args.seed, minimum=0, allowed=(None,))
        sampler = make_sampler(*options, seed=chunk_seed(seed, batch))
    return {"sampler": sampler, "num_return_sequences": args.num_return_sequences}


def _drawing(args):
    """Whether the flags ask to sample (`--sample` or one of its options)."""
    options = (args.top_k, args.top_p, args.temperature, args.seed)
    return args.sample or any(option is not None for option in options)


def translate(args):
    for i, text in enumerate(args.text, 1):
        if not text.strip():
            raise ValueError(
                f"TEXT {i} of {len(args.text)} is empty: nothing to translate. "
                f"Received: {text!r}"
            )
    model = common.load_model(args)
    if common.refuses(model, "translate", args.preset):
        return 2
    if args.sequence_length is not None:
        # Longer sources are cut (with a warning) at the preprocessor's length.
        try:
            model.preprocessor.sequence_length = args.sequence_length
        except ValueError as e:
            print(f"--sequence-length: {e}", file=sys.stderr)
            return 2

    batches = itertools.count()

    def step(texts):
        result = model.translate(
            texts,
            beam_width=args.beam,
            max_length=args.max_length,
            return_attention=bool(args.plot),
            **_sampling(args, next(batches)),
        )
        return list(zip(*result)) if args.plot else result

    results = progress.in_batches(
        args.text,
        common.BATCH,
        step,
        "sentences",
        "compiling the search (first call)",
        batched=_drawing(args),
    )
    if args.plot:
        from keras_attention.plotting import plot_attention

        for i, (out, alignment) in enumerate(results):
            path = common.numbered(args.plot, i, len(results))
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
    for out in results:
        print(out)
    return 0


def caption(args):
    import numpy as np

    model = common.load_model(args)
    if common.refuses(model, "caption", args.preset):
        return 2
    height, width, channels = model.image_shape
    images = np.stack([read_image(p, channels, (height, width)) for p in args.image])

    batches = itertools.count()

    def step(batch):
        texts, maps = model.caption(
            np.stack(batch),
            beam_width=args.beam,
            max_length=args.max_length,
            return_attention=True,
            **_sampling(args, next(batches)),
        )
        return list(zip(texts, maps))

    results = progress.in_batches(
        list(images),
        common.BATCH,
        step,
        "images",
        "compiling the search (first call)",
        batched=_drawing(args),
    )
    texts = [text for text, _ in results]
    maps = [attention for _, attention in results]
    for i, text in enumerate(texts):
        image = i // args.num_return_sequences  # Its captions come in a row.
        print(f"{args.image[image]}: {text}")
        if args.plot:
            from zoo.captioning.plotting import plot_caption_attention

            out = common.numbered(args.plot, i, len(texts))
            plot_caption_attention(
                images[image], maps[i]["tokens"], maps[i]["weights"], out, title=text
            )
            print(f"  attention: {out}")
    return 0


def classify(args):
    model = common.load_model(args)
    if common.refuses(model, "classify", args.preset):
        return 2
    channels = model.preprocessor.channels

    def step(paths):
        # Any image size runs (glimpse locations are relative to the image);
        # sizes far from the training canvas warn, one line each.
        results = []
        for path in paths:
            image = read_image(path, channels)[None]
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                names, probabilities = model.classify(image)
            results.append((image, names, probabilities, caught))
        return results

    results = progress.in_batches(
        args.image, 1, step, "images", "compiling the model (first call)"
    )
    for i, (path, (image, names, probabilities, caught)) in enumerate(
        zip(args.image, results)
    ):
        say_warnings(path, caught)
        name = str(names[0, 0])
        print(f"{path}: {name} ({probabilities[0, 0]:.2f})")
        if args.plot:
            from zoo.ram.plotting import plot_glimpses

            out = common.numbered(args.plot, i, len(args.image))
            with warnings.catch_warnings():  # said once, above
                warnings.simplefilter("ignore")
                locations = model.glimpses(image)
            plot_glimpses(
                image,
                locations,
                out,
                patch_size=model.patch_size,
                num_scales=model.num_scales,
                scale_factor=model.scale_factor,
                titles=[name],
            )
            print(f"  glimpse path: {out}")
    return 0
