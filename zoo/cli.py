"""`keras-attention` / `python -m zoo`: presets, training, evaluation, translation.

Commands:
  presets                          list shipped presets with their metrics
  train MODEL [training flags]     train a zoo model and write a preset
  evaluate PRESET [--split test]   translation: sacreBLEU BLEU/chrF; glimpse
                                   classifier: error rate; captioner: BLEU-1..4
                                   and attention correctness
  translate PRESET TEXT... [--beam 4] [--sequence-length N] [--max-length N]
                                   [--plot out.png]
  caption PRESET IMAGE... [--beam 3] [--max-length N] [--plot out.png]
  classify PRESET IMAGE... [--plot out.png]
  export PRESET DIR [--beam N]     write a serving SavedModel (raw inputs in,
                                   finished outputs out; no zoo needed to load)
  serve DIR [--port 8501]          TF Serving REST API, JSON and a page over an export
"""

import argparse
import os
import sys
import tempfile
import textwrap
import warnings

import keras_attention
import zoo
from zoo import progress, quiet, registry
from zoo.base import backends
from zoo.base.task import Task, list_presets
from zoo.base.truncation import UnfinishedWarning
from zoo.training.flags import positive_float, positive_int, program_name

#: The command's name in usage lines: `keras-attention` (the installed
#: script); `python -m zoo` passes its own.
PROG = "keras-attention"


def _task_class(meta):
    """The task class a preset's metadata names (`Task` for an unknown one)."""
    family = registry.for_class_name(meta.get("class_name"))
    return Task if family is None else family.task


def metrics_summary(meta):
    """One line of the measured quality stored in a preset's metadata.

    The task's kind says which metrics it reports (`Task.metrics_summary`).

    Example:
    >>> metrics_summary({"class_name": "RecurrentAttentionModel",
    ...                  "metrics": {"test_error_percent": 14.98}})
    'test error 14.98%'
    >>> metrics_summary({"class_name": "Unknown", "metrics": {"x": 1}})
    '(no metrics recorded)'
    """
    return _task_class(meta).metrics_summary(meta.get("metrics", {}))


def _presets(args):
    from keras_attention.presets import read_metadata

    found = list_presets()
    if not found:
        print("No presets shipped yet.")
        return 0
    descriptions = {
        name: text
        for family in registry.families()
        for name, text in family.presets.items()
    }
    for name, path in found.items():
        meta = read_metadata(path)
        print(f"{name:40s} {meta.get('class_name', '?'):24s} {metrics_summary(meta)}")
        for line in textwrap.wrap(descriptions.get(name, ""), 76):
            print(f"    {line}")
        sizes = image_sizes(meta)
        if sizes:
            print(f"    {sizes}")
        print(f"    {path}")
    return 0


def image_sizes(meta):
    """For an image model's metadata: the image sizes it is good for.

    The task class answers (`Task.preset_note`).

    Returns:
        str, or `None` for a preset that works at any size.

    Example:
    >>> image_sizes({"class_name": "RecurrentAttentionModel",
    ...              "data": {"variant": "cluttered", "canvas_size": 100}})
    'trained on 100x100 canvases: good for image sides 50 to 125'
    >>> image_sizes({"class_name": "Seq2Seq"}) is None
    True
    """
    return _task_class(meta).preset_note(meta)


def _train(args, rest, parser):
    import importlib

    if args.model is None:
        if "-h" in rest or "--help" in rest:
            parser.print_help()
            return 0
        parser.print_usage(sys.stderr)
        print(
            f"error: name the model to train, one of: {', '.join(registry.names())}",
            file=sys.stderr,
        )
        return 2
    if args.model not in registry.names():
        print(
            f"Unknown model {args.model!r}. "
            f"Choose one of: {', '.join(registry.names())}.",
            file=sys.stderr,
        )
        return 2
    try:
        with program_name(f"{parser.prog} {args.model}"):
            importlib.import_module(registry.get(args.model).train_module).main(rest)
    except (ValueError, TypeError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


#: `--dtype` choices: the Keras dtype policies a preset can run under.
DTYPES = ("float32", "mixed_bfloat16", "mixed_float16")

#: `--quantize` choices: the Keras quantization modes offered.
QUANTIZE_MODES = ("int8",)


#: Inputs per model call when a verb shows progress over many: the tasks'
#: own decoding batch, so the outputs are those of one call on all inputs.
BATCH = 64


def _load(preset, dtype=None):
    with progress.status(f"loading {preset}"):
        return Task.from_preset(preset, **({"dtype": dtype} if dtype else {}))


def _quantized(model, mode):
    """`model` with its weights quantized (`--quantize`), when `mode` is set."""
    if mode:
        model.quantize(mode)
    return model


def _refuses(model, verb, preset):
    """Says (one line) and returns `True` when `model`'s kind has no `verb`.

    The task's kind names its verbs (`Task.verbs`); the CLI asks the
    object, not its type or the methods it happens to have.
    """
    if verb in getattr(model, "verbs", ()):
        return False
    kinds = [f.kind for f in registry.families() if verb in f.task.verbs]
    print(
        f"Preset {preset} is not a {kinds[0] if kinds else verb} model "
        f"(`{verb}` runs on those).",
        file=sys.stderr,
    )
    return True


def _translate(args):
    for i, text in enumerate(args.text, 1):
        if not text.strip():
            raise ValueError(
                f"TEXT {i} of {len(args.text)} is empty: nothing to translate. "
                f"Received: {text!r}"
            )
    model = _quantized(_load(args.preset, args.dtype), args.quantize)
    if _refuses(model, "translate", args.preset):
        return 2
    if args.sequence_length is not None:
        # Longer sources are cut (with a warning) at the preprocessor's length.
        try:
            model.preprocessor.sequence_length = args.sequence_length
        except ValueError as e:
            print(f"--sequence-length: {e}", file=sys.stderr)
            return 2

    def step(texts):
        result = model.translate(
            texts,
            beam_width=args.beam,
            max_length=args.max_length,
            return_attention=bool(args.plot),
            **_sampling(args),
        )
        return list(zip(*result)) if args.plot else result

    results = progress.in_batches(
        args.text, BATCH, step, "sentences", "compiling the search (first call)"
    )
    if args.plot:
        from keras_attention.plotting import plot_attention

        for i, (out, alignment) in enumerate(results):
            path = _numbered(args.plot, i, len(results))
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


def _read_image(path, channels, size=None):
    """A PNG/JPEG file as a uint8 array `(H, W, channels)`, resized to `size`.

    16-bit images are scaled to 8 bits (not wrapped modulo 256); a file that
    is not a readable, non-empty image raises a `ValueError` naming it.
    """
    import numpy as np
    from PIL import Image, UnidentifiedImageError

    if not os.path.isfile(path):
        raise FileNotFoundError(f"No image file {path!r}")
    try:
        with Image.open(path) as image:
            image.load()
            if image.width == 0 or image.height == 0:
                raise ValueError(f"{path!r} is an empty (0x0) image")
            if image.mode in ("I", "I;16", "I;16B", "I;16L", "F"):
                wide = np.asarray(image, dtype="float64")
                # 16-bit PNGs arrive as mode I (32-bit ints) holding 0-65535.
                scale = 255.0 / 65535.0 if image.mode != "F" else 255.0
                image = Image.fromarray(
                    np.clip(np.rint(wide * scale), 0, 255).astype("uint8")
                )
            image = image.convert("L" if channels == 1 else "RGB")
            if size is not None and image.size != (size[1], size[0]):
                image = image.resize((size[1], size[0]), Image.NEAREST)
            array = np.asarray(image, dtype="uint8")
    except (UnidentifiedImageError, OSError, SyntaxError) as e:
        raise ValueError(f"{path!r} is not a readable image ({e})") from e
    return array.reshape(array.shape[0], array.shape[1], channels)


def _numbered(path, index, count):
    """`out.png` for one output, `out_0.png`, `out_1.png`, ... for several."""
    root, ext = os.path.splitext(path)
    ext = ext or ".png"
    if count == 1:
        return root + ext
    return f"{root}_{index}{ext}"


def _check_writable_folder(folder, option):
    """Refuses a folder that is missing or cannot take a new file."""
    if not os.path.isdir(folder):
        raise ValueError(f"{option}: folder {folder!r} does not exist")
    try:  # os.access says yes to root, even on a read-only file system
        with tempfile.NamedTemporaryFile(dir=folder):
            pass
    except OSError as e:
        raise ValueError(f"{option}: folder {folder!r} is not writable ({e})") from e


def _check_plot_path(path):
    """Refuses a `--plot` path that cannot be written, before any work.

    The extension must be an image format Matplotlib writes (`.png`,
    `.pdf`, `.svg`, ...); none means `.png`.
    """
    if path is None:
        return
    _check_writable_folder(os.path.dirname(os.path.abspath(path)), "--plot")
    if os.path.isdir(path):
        raise ValueError(f"--plot: {path!r} is a folder, not a file name")
    extension = os.path.splitext(path)[1].lower().lstrip(".")
    if extension:
        from matplotlib.backend_bases import FigureCanvasBase

        formats = FigureCanvasBase.get_supported_filetypes()
        if extension not in formats:
            raise ValueError(
                f"--plot: {path!r} is not an image file name: use one of "
                f"{', '.join('.' + name for name in sorted(formats))}"
            )


def _check_export_directory(path):
    """Refuses an export `DIR` that is a file or cannot be written, at once."""
    if os.path.lexists(path) and not os.path.isdir(path):
        raise ValueError(f"export DIR {path!r} is a file, not a folder")
    folder = os.path.abspath(path)
    while not os.path.lexists(folder):  # the nearest folder that exists
        folder = os.path.dirname(folder)
    if not os.path.isdir(folder):
        raise ValueError(f"export DIR {path!r} is inside a file, {folder!r}")
    _check_writable_folder(folder, "export DIR")


def _caption(args):
    import numpy as np

    model = _quantized(_load(args.preset, args.dtype), args.quantize)
    if _refuses(model, "caption", args.preset):
        return 2
    height, width, channels = model.image_shape
    images = np.stack([_read_image(p, channels, (height, width)) for p in args.image])

    def step(batch):
        texts, maps = model.caption(
            np.stack(batch),
            beam_width=args.beam,
            max_length=args.max_length,
            return_attention=True,
            **_sampling(args),
        )
        return list(zip(texts, maps))

    results = progress.in_batches(
        list(images), BATCH, step, "images", "compiling the search (first call)"
    )
    texts = [text for text, _ in results]
    maps = [attention for _, attention in results]
    for i, text in enumerate(texts):
        image = i // args.num_return_sequences  # Its captions come in a row.
        print(f"{args.image[image]}: {text}")
        if args.plot:
            from zoo.captioning.plotting import plot_caption_attention

            out = _numbered(args.plot, i, len(texts))
            plot_caption_attention(
                images[image], maps[i]["tokens"], maps[i]["weights"], out, title=text
            )
            print(f"  attention: {out}")
    return 0


def _sampling(args):
    """The `sampler` and `num_return_sequences` of `translate`/`caption`'s flags."""
    from zoo.base.generation import make_sampler

    options = (args.top_k, args.top_p, args.temperature, args.seed)
    sampler = None
    if args.sample or any(option is not None for option in options):
        sampler = make_sampler(*options)
    return {"sampler": sampler, "num_return_sequences": args.num_return_sequences}


def _classify(args):
    model = _quantized(_load(args.preset, args.dtype), args.quantize)
    if _refuses(model, "classify", args.preset):
        return 2
    channels = model.preprocessor.channels

    def step(paths):
        # Any image size runs (glimpse locations are relative to the image);
        # sizes far from the training canvas warn, one line each.
        results = []
        for path in paths:
            image = _read_image(path, channels)[None]
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
        _say_warnings(path, caught)
        name = str(names[0, 0])
        print(f"{path}: {name} ({probabilities[0, 0]:.2f})")
        if args.plot:
            from zoo.ram.plotting import plot_glimpses

            out = _numbered(args.plot, i, len(args.image))
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


def _say_warnings(path, caught):
    """Prints the user warnings of `caught` (about the input at `path`) once
    each, one line; the others (libraries' deprecations) go to `warnings`,
    whose filters decide, as if they had not been caught.
    """
    user = [w for w in caught if issubclass(w.category, UserWarning)]
    for message in dict.fromkeys(str(w.message) for w in user):
        print(f"warning: {path}: {message}", file=sys.stderr)
    for w in caught:
        if not issubclass(w.category, UserWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


#: What a verb advises when its outputs reached the decoding length before
#: [END] (`UnfinishedWarning`): the library names a Python argument
#: (`max_length`); a verb names its flag. `evaluate` has none (it scores the preset as shipped, as its card
#: does), so it says what happened to the score.
_LONGER = "Raise --max-length to let them finish."
CUT_ADVICE = {
    (UnfinishedWarning, "translate"): _LONGER,
    (UnfinishedWarning, "caption"): _LONGER,
    (UnfinishedWarning, "train"): _LONGER,
    (UnfinishedWarning, "evaluate"): "They are scored as cut, as on the "
    "preset's card (evaluate decodes at the preset's length).",
}

#: Folders whose `UserWarning`s are the project's: the CLI prints them as
#: one `warning:` line each, other libraries' as Python shows them.
OWN_FOLDERS = tuple(
    os.path.dirname(os.path.abspath(package.__file__)) + os.sep
    for package in (zoo, keras_attention)
)


def _warning_printer(command, show):
    """A `warnings.showwarning` that prints the project's warnings in one line.

    A `UserWarning` raised from the project's code is printed as
    `warning: TEXT` on stderr, its advice worded for `command`
    (`CUT_ADVICE`); any other warning goes to `show`.
    """

    def printer(message, category, filename, lineno, file=None, line=None):
        own = os.path.abspath(filename).startswith(OWN_FOLDERS)
        if not (own and issubclass(category, UserWarning)):
            return show(message, category, filename, lineno, file, line)
        advice = CUT_ADVICE.get((type(message), command))
        text = message.advise(advice) if advice else str(message)
        print(f"warning: {text}", file=sys.stderr)

    return printer


def _evaluate(args):
    model = _quantized(_load(args.preset, args.dtype), args.quantize)
    if getattr(model, "kind", None) is None:
        print(f"Preset {args.preset} has no evaluation here.", file=sys.stderr)
        return 2
    model.evaluate_split(
        args.split,
        limit=args.limit,
        beam_width=args.beam,
        sword_path=args.sword_path,
        data_path=args.data_path,
    )
    return 0


def _export(args):
    from zoo.serving.export import export_preset

    _check_export_directory(args.directory)
    metadata = export_preset(
        args.preset,
        args.directory,
        beam_width=args.beam,
        dtype=args.dtype,
        quantize=args.quantize,
    )
    signatures = ", ".join(sorted(metadata.get("signatures", {})))
    print(f"Exported {args.preset} to {args.directory} (signatures: {signatures})")
    return 0


def _serve(args):
    from zoo.serving.server import serve

    if not os.path.isdir(args.directory):
        raise FileNotFoundError(f"No export directory {args.directory!r}")
    serve(
        args.directory,
        args.host,
        args.port,
        grpc_port=args.grpc_port,
        allow_hosts=args.allow_host,
        model_name=args.model_name,
        **{
            flag[2:].replace("-", "_"): getattr(args, flag[2:].replace("-", "_"))
            for flag, _, _ in SERVE_LIMITS
        },
        batch_delay=args.batch_delay_ms / 1000.0,
    )
    return 0


def _non_negative_float(text):
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, received {text!r}")
    return value


#: `zoo serve`'s flags for `zoo.serving.server.Limits` (their defaults are its).
SERVE_LIMITS = [
    ("--max-request-bytes", positive_int, "larger bodies get 413"),
    ("--max-rows", positive_int, "rows (sentences, images) per request"),
    ("--max-batch", positive_int, "rows per model call"),
    ("--max-beam-width", positive_int, "largest beam_width input"),
    ("--max-length", positive_int, "largest max_length input"),
    ("--max-image-pixels", positive_int, "pixels of one image"),
    ("--max-request-pixels", positive_int, "pixels of a request's images"),
    ("--request-timeout", positive_float, "seconds to answer, else 503"),
    ("--read-timeout", positive_float, "seconds to send a request, else 408"),
    ("--workers", positive_int, "threads handling connections"),
    ("--max-queued", positive_int, "connections waiting, else 503"),
    ("--max-client-connections", positive_int, "open connections per client IP"),
]


PRESET_HELP = "a shipped preset's name (see `presets`) or a preset folder"
BEAM_HELP = "beam width; 1 decodes greedily (default: %(default)s)"


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
        "--seed", type=int, help="reproduce the draws (default: new ones each run)"
    )
    group.add_argument(
        "--num-return-sequences",
        type=positive_int,
        default=1,
        metavar="N",
        help="outputs per input, in a row (N > 1 needs sampling)",
    )


def build_parser(prog=PROG):
    """The CLI's `argparse` parser; `prog` is the command in usage lines.

    Example:
    >>> parser = build_parser("python -m zoo")
    >>> parser.parse_args(["translate", "p", "Jesus wept.", "--beam", "2"]).beam
    2
    >>> parser.format_usage().split()[:4]
    ['usage:', 'python', '-m', 'zoo']
    """
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("presets", help="list shipped presets")
    width = max(len(f.name) for f in registry.families()) + 2
    families = "\n".join(f"  {f.name:{width}s}{f.summary}" for f in registry.families())
    train = sub.add_parser(
        "train",
        help="train a model (see train MODEL --help)",
        add_help=False,  # `train MODEL --help` is the script's help
        description="Trains a zoo model and writes a preset. "
        "`train MODEL --help` lists the options of MODEL's script.",
        epilog=f"models:\n{families}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    train.add_argument(
        "model",
        nargs="?",
        metavar="MODEL",
        help=f"one of: {', '.join(registry.names())}",
    )
    train.set_defaults(train_parser=train)  # for `train --help`
    evaluate = sub.add_parser("evaluate", help="score a preset on held-out data")
    evaluate.add_argument("preset", help=PRESET_HELP)
    evaluate.add_argument(
        "--split",
        default="test",
        choices=["train", "validation", "test"],
        help="held-out data to score (default: test)",
    )
    evaluate.add_argument(
        "--sword-path",
        default="/usr/share/sword",
        help="SWORD modules of the Bible, translation presets (default: %(default)s)",
    )
    evaluate.add_argument(
        "--data-path", help="Fashion-MNIST IDX directory (default: the Debian one)"
    )
    evaluate.add_argument(
        "--beam",
        type=positive_int,
        default=4,
        help="beam width scored beside greedy decoding (default: %(default)s)",
    )
    evaluate.add_argument(
        "--limit",
        type=positive_int,
        default=None,
        help="first N samples only (more than the split holds: all of it)",
    )
    translate = sub.add_parser("translate", help="translate text with a preset")
    translate.add_argument("preset", help=PRESET_HELP)
    translate.add_argument(
        "text",
        nargs="+",
        help="English sentences, each one argument (quote it); an empty one "
        "is an error",
    )
    translate.add_argument("--beam", type=positive_int, default=4, help=BEAM_HELP)
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
    caption.add_argument("preset", help=PRESET_HELP)
    caption.add_argument("image", nargs="+", help="PNG/JPEG files")
    caption.add_argument("--beam", type=positive_int, default=3, help=BEAM_HELP)
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
    classify.add_argument("preset", help=PRESET_HELP)
    classify.add_argument(
        "image",
        nargs="+",
        help="PNG/JPEG files; the cost does not grow with the size, but sides "
        "far from the preset's training canvas (`presets` says which) are "
        "classified poorly and warned about",
    )
    classify.add_argument("--plot", help="save the glimpse path(s) to this PNG")
    export = sub.add_parser("export", help="write a preset as a serving SavedModel")
    export.add_argument("preset", help=PRESET_HELP)
    export.add_argument(
        "directory",
        help="SavedModel directory to write (BASE/1 for tensorflow_model_server "
        "--model_base_path=BASE, and for `serve BASE`)",
    )
    export.add_argument(
        "--beam",
        type=positive_int,
        default=None,
        help="beam width of the default signature (translation, captioning)",
    )
    for command in (evaluate, translate, caption, classify, export):
        command.add_argument(
            "--dtype",
            choices=DTYPES,
            help="dtype policy to run the preset under (default: the preset's); "
            "mixed_bfloat16 pays on CPUs with bfloat16 matrix units (AMX)",
        )
        command.add_argument(
            "--quantize",
            choices=QUANTIZE_MODES,
            help="quantize the weights after loading (Task.quantize)",
        )
    serve = sub.add_parser(
        "serve",
        help="serve an export over HTTP: TF Serving's REST API, JSON and a page",
    )
    serve.add_argument(
        "directory",
        help="a directory written by `export` (or a folder of numbered versions)",
    )
    serve.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on; 0.0.0.0 for every interface "
        "(default: %(default)s, this machine only)",
    )
    serve.add_argument(
        "--port", type=positive_int, default=8501, help="default: %(default)s"
    )
    serve.add_argument(
        "--grpc-port",
        type=int,
        help="gRPC port (TF Serving's and KServe v2's services); 0: none "
        "(default: 8500 if it is free)",
    )
    serve.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a Host name to answer besides the loopback ones (repeatable; '*': any)",
    )
    serve.add_argument(
        "--model-name", help="the NAME of /v1/models/NAME (default: the preset's)"
    )
    from zoo.serving.server import Limits

    defaults = Limits()
    for flag, kind, meaning in SERVE_LIMITS:
        default = getattr(defaults, flag[2:].replace("-", "_"))
        serve.add_argument(
            flag, type=kind, default=default, help=f"{meaning} (default {default})"
        )
    serve.add_argument(
        "--batch-delay-ms",
        type=_non_negative_float,
        default=5.0,
        help="how long a request waits for others to batch with",
    )
    for command in (parser, *sub.choices.values()):
        if command is train:  # `train`'s `--verbose N` is fit's (zoo/quiet.py)
            continue
        command.add_argument(
            quiet.VERBOSE_FLAG,
            action="store_true",
            help="show TensorFlow's own start-up and runtime logs (hidden by default)",
        )
    return parser


def main(argv=None, prog=PROG):
    """Runs the CLI on `argv` (default: `sys.argv[1:]`); returns the exit status.

    Run on the process's own command line (`argv=None`: `python -m zoo`,
    `keras-attention`), the project's warnings are printed as one
    `warning: TEXT` line each, worded for the verb (`_warning_printer`);
    called with a list (from Python, a test), they stay Python warnings.

    Args:
        argv: optional list of str.
        prog: str. The command in usage lines. Defaults to `"keras-attention"`.
    """
    command_line = argv is None
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(prog)
    args, rest = parser.parse_known_args(argv)
    if args.command != "train" and rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    with warnings.catch_warnings():
        if command_line:
            warnings.showwarning = _warning_printer(args.command, warnings.showwarning)
        if args.command == "train":
            return _train(args, rest, args.train_parser)
        return _verb(args)


def _verb(args):
    """Runs the verb `args.command` (not `train`); returns the exit status."""
    try:
        _check_plot_path(getattr(args, "plot", None))
        return _run(args)
    # A bad value or type (a preset's config, say) is one line and exit 2.
    except (ValueError, TypeError, FileNotFoundError, backends.BackendError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def _run(args):
    """Runs the verb `args.command`; returns its exit status."""
    return {
        "presets": _presets,
        "translate": _translate,
        "evaluate": _evaluate,
        "caption": _caption,
        "classify": _classify,
        "export": _export,
        "serve": _serve,
    }[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
