"""What the CLI's verbs share: loading a preset, its flags, checks on paths."""

import os
import sys
import tempfile

from zoo import progress, registry

#: `--dtype` choices: the Keras dtype policies a preset can run under.
DTYPES = ("float32", "mixed_bfloat16", "mixed_float16")

#: `--quantize` choices: the Keras quantization modes offered.
QUANTIZE_MODES = ("int8",)

#: Inputs per model call when a verb shows progress over many: the tasks'
#: own decoding batch, so the outputs are those of one call on all inputs.
BATCH = 64

PRESET_HELP = "a shipped preset's name (see `presets`) or a preset folder"
BEAM_HELP = "beam width; 1 decodes greedily (default: %(default)s)"


def add_model_flags(command):
    """`--dtype` and `--quantize`: how a verb runs the preset it loads."""
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


def load_preset(preset, dtype=None):
    """The task of `preset`, under the dtype policy `dtype` when set."""
    from zoo.base.task import Task

    with progress.status(f"loading {preset}"):
        return Task.from_preset(preset, **({"dtype": dtype} if dtype else {}))


def load_model(args):
    """The task of `args.preset` under `--dtype`, quantized by `--quantize`."""
    model = load_preset(args.preset, args.dtype)
    if args.quantize:
        model.quantize(args.quantize)
    return model


def refuses(model, verb, preset):
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


def numbered(path, index, count):
    """`out.png` for one output, `out_0.png`, `out_1.png`, ... for several.

    Example:
    >>> numbered("out.png", 1, 3), numbered("out", 0, 1)
    ('out_1.png', 'out.png')
    """
    root, ext = os.path.splitext(path)
    ext = ext or ".png"
    if count == 1:
        return root + ext
    return f"{root}_{index}{ext}"


def check_writable_folder(folder, option):
    """Refuses a folder that is missing or cannot take a new file."""
    if not os.path.isdir(folder):
        raise ValueError(f"{option}: folder {folder!r} does not exist")
    try:  # os.access says yes to root, even on a read-only file system
        with tempfile.NamedTemporaryFile(dir=folder):
            pass
    except OSError as e:
        raise ValueError(f"{option}: folder {folder!r} is not writable ({e})") from e


def check_plot_path(path):
    """Refuses a `--plot` path that cannot be written, before any work.

    The extension must be an image format Matplotlib writes (`.png`,
    `.pdf`, `.svg`, ...); none means `.png`.
    """
    if path is None:
        return
    check_writable_folder(os.path.dirname(os.path.abspath(path)), "--plot")
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
