"""Trains the RAM error table on Fashion-MNIST and writes the RAM preset.

Every row of the table (RAM with 2/4/6 glimpses on 28x28; RAM on translated
and cluttered 60x60; a fully-connected network and a small convnet on the
full image of each task) is trained with the same optimizer, batch size and
number of epochs, then scored on the 10,000 test images.

Example (the command behind the table and the first RAM preset; its log
and figure are in `experiments/ram/`):

    python -m zoo.ram.train --epochs 6 --cell lstm \
        --out runs/ram_fashion_mnist_translated \
        --results runs/table.json --plot runs/glimpses_translated.png

On the shipped sample (no Debian data needed, a minute):

    python -m zoo.ram.train --data sample --epochs 1 --rows ram_translated_6 \
        fc_translated --out /tmp/ram

`--fresh-canvases` pastes each training item at a new random position every
epoch (`fashion_mnist.translated_dataset`; on cluttered rows with new
clutter, `fashion_mnist.cluttered_dataset`) instead of composing the
training set once; the test canvases stay fixed (seed + 1):

    python -m zoo.ram.train --epochs 150 --max-minutes 100 \
        --rows ram_translated_6 --fresh-canvases \
        --policy-learning-rate-scale 0.1 --out runs/fresh

`--initial-weights PRESET` starts the RAM rows from a preset's weights (the
optimizer starts afresh), e.g. to train the default preset
`ram_fashion_mnist_translated_seeking_annealed` further with its own
settings:

    python -m zoo.ram.train --rows ram_translated_6 --fresh-canvases \
        --num-scales 2 --random-first-glimpse --reinforce-core \
        --policy-learning-rate-scale 1.0 --learning-rate 1e-4 \
        --initial-weights ram_fashion_mnist_translated_seeking_annealed \
        --out runs/longer

`--out` writes the `ram_translated_6` row as a preset; `--preset-row`
names another RAM row, e.g. a cluttered 100x100 preset that `python -m
zoo.ram.evaluation` then scores on cluttered canvases:

    python -m zoo.ram.train --rows ram_cluttered_6 --canvas-size 100 \
        --num-scales 4 --preset-row ram_cluttered_6 --out runs/cluttered100

`--num-glimpses`, `--patch-size` and `--num-scales` replace the retina of
every RAM row of the command (the table names the retina each row had), and
`--canvas-size` the side of the translated and cluttered canvases; e.g.
RAM against the convnet on cluttered 100x100, 45 minutes each:

    python -m zoo.ram.train --rows ram_cluttered_6 conv_cluttered \
        --canvas-size 100 --num-scales 4 --max-minutes 45 --epochs 1000

`--anneal-fraction F` trains the last F of each row's budget (the first of
`--max-minutes`, `--max-steps` and `--epochs` to end) at a tenth of the
learning rate (`--anneal-factor`), the same schedule for every row; e.g. the
centred rows of the card, 30 minutes each, the last 9 at 1e-4:

    python -m zoo.ram.train --rows ram_centered_6 fc_centered conv_centered \
        --num-scales 3 --max-minutes 30 --epochs 1000 --anneal-fraction 0.3

`--test-samples M` scores each RAM row twice: averaging the class
probabilities of M glimpse paths sampled per test image (the row's
`test_error_percent`) and following the mean path only
(`test_error_one_path_percent`); training is the same.

The shared options (seed, strategy, budgets, the run directory) are those
of every training script (`zoo.training.flags`, `zoo.training.harness`); here the budgets
apply to each row's training. Each row's state is saved after every epoch in
`--run-dir` (`<out>.run`, else `<results>.run`): the same command run again
after a kill skips the rows done and resumes the row it was training.
"""

import argparse
import time

import keras
import numpy as np

from zoo.data import fashion_mnist
from zoo.ram import RecurrentAttentionModel
from zoo.ram.plotting import plot_glimpses
from zoo.training.callbacks import AnnealLearningRate
from zoo.training.flags import (
    fraction,
    pick_options,
    positive_float,
    positive_int,
    training_parser,
)
from zoo.training.harness import TrainingRun, compile_classifier

PRESET_ROW = "ram_translated_6"  # --preset-row, unless given.
ROWS_FILE = "results.json"  # In the run directory: the rows trained.

# name: (task variant, model kind, model options)
RETINA_28 = {"patch_size": 8, "num_scales": 1}
RETINA_60 = {"patch_size": 12, "num_scales": 3, "scale_factor": 2}
ROWS = {
    "ram_centered_2": ("centered", "ram", {"num_glimpses": 2, **RETINA_28}),
    "ram_centered_4": ("centered", "ram", {"num_glimpses": 4, **RETINA_28}),
    "ram_centered_6": ("centered", "ram", {"num_glimpses": 6, **RETINA_28}),
    "fc_centered": ("centered", "fc", {}),
    "conv_centered": ("centered", "conv", {}),
    "ram_translated_6": ("translated", "ram", {"num_glimpses": 6, **RETINA_60}),
    "fc_translated": ("translated", "fc", {}),
    "conv_translated": ("translated", "conv", {}),
    "ram_cluttered_6": ("cluttered", "ram", {"num_glimpses": 6, **RETINA_60}),
    "fc_cluttered": ("cluttered", "fc", {}),
    "conv_cluttered": ("cluttered", "conv", {}),
}
#: The options `RecurrentAttentionModel` takes as arguments of the same name.
MODEL_OPTIONS = (
    "units cell location_std test_samples seed reinforce_core reinforce_weight "
    "policy_learning_rate_scale random_first_glimpse glimpse_filters"
).split()
#: RAM row options that `--num-glimpses`, `--patch-size` and `--num-scales`
#: replace in every RAM row of a command.
RETINA_OPTIONS = ("num_glimpses", "patch_size", "num_scales")
CANVAS_SIZE = 60  # Translated and cluttered rows, unless --canvas-size.
ANNEAL_FACTOR = 0.1  # --anneal-factor, unless given.


def task_label(variant, canvas_size=CANVAS_SIZE):
    """The table's name of a task, e.g. `"translated 60x60"`.

    Example:
    >>> task_label("cluttered", 100)
    'cluttered 100x100 (8 pieces 8x8)'
    """
    if variant == "centered":
        return "centred 28x28"
    size = f"{canvas_size}x{canvas_size}"
    if variant == "translated":
        return f"translated {size}"
    pieces = fashion_mnist.clutter_pieces(canvas_size)
    return f"cluttered {size} ({pieces} pieces 8x8)"


def row_options(name, args):
    """The options of row `name` with this command's retina options applied.

    Example:
    >>> args = parse_args(["--num-scales", "2", "--num-glimpses", "8"])
    >>> row_options("ram_translated_6", args)
    {'num_glimpses': 8, 'patch_size': 12, 'num_scales': 2, 'scale_factor': 2}
    >>> row_options("fc_translated", args)
    {}
    """
    _, kind, options = ROWS[name]
    if kind != "ram":
        return dict(options)
    given = {k: getattr(args, k) for k in RETINA_OPTIONS}
    return {**options, **{k: v for k, v in given.items() if v is not None}}


def parse_args(argv=None):
    p = training_parser(
        __doc__,
        epochs=3,
        batch_size=128,
        learning_rate=1e-3,
        verbose=2,
        out_required=False,
        out_help="preset directory for the --preset-row row",
    )
    p.add_argument("--data", default="full", choices=["full", "sample"])
    p.add_argument("--path", help="directory with the Fashion-MNIST IDX files")
    p.add_argument("--rows", nargs="+", default=list(ROWS), choices=list(ROWS))
    p.add_argument("--units", type=int, default=256, help="RAM core state size")
    p.add_argument("--cell", default="lstm", choices=["rnn", "lstm"])
    p.add_argument("--location-std", type=float, default=0.1)
    p.add_argument(
        "--test-samples",
        type=positive_int,
        default=1,
        help="RAM rows average this many sampled glimpse paths per test image "
        "(RecurrentAttention test_samples); above 1 the table also gives the "
        "one-path (mean) error of the same weights",
    )
    p.add_argument(
        "--reinforce-core",
        action="store_true",
        help="let the REINFORCE gradient reach the core network too",
    )
    p.add_argument(
        "--reinforce-weight",
        type=positive_float,
        default=1.0,
        help="weight of the REINFORCE term of the hybrid loss",
    )
    p.add_argument(
        "--policy-learning-rate-scale",
        type=positive_float,
        default=1.0,
        help="step size of the location policy relative to the rest of the "
        "model under Adam (LocationPolicy learning_rate_scale)",
    )
    p.add_argument(
        "--random-first-glimpse",
        action="store_true",
        help="in training, place each image's first glimpse uniformly at "
        "random instead of at the centre (inference starts at the centre)",
    )
    p.add_argument(
        "--glimpse-filters",
        type=positive_int,
        nargs="+",
        metavar="N",
        help="RAM rows read each patch with 3x3 convolutions of these many "
        "filters, each followed by 2x2 max pooling (GlimpseNetwork "
        "glimpse_filters), instead of the paper's fully connected layer",
    )
    p.add_argument(
        "--fresh-canvases",
        action="store_true",
        help="translated and cluttered rows: compose each training canvas "
        "anew every epoch (a new position, and new clutter: "
        "fashion_mnist.translated_dataset, cluttered_dataset) instead of one "
        "fixed canvas per item; the test canvases stay fixed",
    )
    p.add_argument(
        "--canvas-size",
        type=positive_int,
        default=CANVAS_SIZE,
        help="side of the translated and cluttered canvases (cluttered "
        "canvases of 100 or more get 8 pieces of clutter, else 4)",
    )
    for option, what in (
        ("num_glimpses", "glimpses"),
        ("patch_size", "side of the finest patch"),
        ("num_scales", "patches per glimpse"),
    ):
        p.add_argument(
            "--" + option.replace("_", "-"),
            type=positive_int,
            help=f"{what} of every RAM row (default: the row's own)",
        )
    p.add_argument(
        "--initial-weights",
        metavar="PRESET",
        help="RAM rows start from the weights of this preset (a shipped name "
        "or ./path) instead of random ones, e.g. to fine-tune a preset with "
        "other training options; the rows' network (retina, --units, --cell, "
        "--glimpse-filters) must be the preset's",
    )
    p.add_argument(
        "--anneal-fraction",
        type=fraction,
        metavar="F",
        help="train the last F of each row's budget (--max-minutes, "
        "--max-steps or --epochs, whichever ends first) at --anneal-factor "
        "times the learning rate (zoo.training.callbacks.AnnealLearningRate)",
    )
    p.add_argument(
        "--anneal-factor",
        type=positive_float,
        help="what --anneal-fraction multiplies the learning rate by "
        f"(default {ANNEAL_FACTOR})",
    )
    p.add_argument(
        "--preset-row",
        default=PRESET_ROW,
        choices=[name for name, row in ROWS.items() if row[1] == "ram"],
        help="the RAM row that --out writes as a preset, with its task in the "
        f"metadata (default {PRESET_ROW})",
    )
    p.add_argument("--plot", help="PNG of glimpse paths of the preset row")
    args = p.parse_args(argv)
    if args.anneal_factor is not None and args.anneal_fraction is None:
        p.error(
            "--anneal-factor needs --anneal-fraction (the part of the budget "
            f"it applies to); received --anneal-factor {args.anneal_factor}"
        )
    if args.out and args.preset_row not in args.rows:
        p.error(
            f"--out writes the {args.preset_row} row (--preset-row) as a preset, "
            f"and --rows does not train it; received --out {args.out} "
            f"--preset-row {args.preset_row} --rows {' '.join(args.rows)}"
        )
    return args


def fully_connected(input_shape, num_classes=10):
    """The paper's FC baseline: two ReLU layers of 256 units on the pixels."""
    return keras.Sequential(
        [
            keras.Input(input_shape, name="images"),
            keras.layers.Flatten(),
            keras.layers.Dense(256, activation="relu"),
            keras.layers.Dense(256, activation="relu"),
            keras.layers.Dense(num_classes),
        ],
        name="fully_connected",
    )


def small_convnet(channels=1, num_classes=10):
    """A small convnet over the whole image, any size (global max pooling).

    Two 5x5 convolutions (16 filters with stride 2, then 32 filters) each
    followed by 2x2 max pooling, global max pooling, a 256-unit ReLU layer
    and the classifier. Its cost is proportional to the number of pixels.
    """
    return keras.Sequential(
        [
            keras.Input((None, None, channels), name="images"),
            keras.layers.Conv2D(16, 5, strides=2, activation="relu", padding="same"),
            keras.layers.MaxPooling2D(2),
            keras.layers.Conv2D(32, 5, activation="relu", padding="same"),
            keras.layers.MaxPooling2D(2),
            keras.layers.GlobalMaxPooling2D(),
            keras.layers.Dense(256, activation="relu"),
            keras.layers.Dense(num_classes),
        ],
        name="small_convnet",
    )


def build_model(kind, options, image_size, args):
    if kind == "fc":
        return fully_connected((image_size, image_size, 1))
    if kind == "conv":
        return small_convnet()
    model = RecurrentAttentionModel(
        glimpse_output_units=args.units,
        class_names=fashion_mnist.CLASS_NAMES,
        **pick_options(args, *MODEL_OPTIONS),
        **options,
    )
    if args.initial_weights:
        start_from(model, args.initial_weights)
    return model


def start_from(model, preset):
    """Gives `model` the weights of the RAM preset `preset` (same network).

    Raises:
        ValueError: the preset's weights do not have the model's shapes.
    """
    source = RecurrentAttentionModel.from_preset(preset)
    given = [tuple(w.shape) for w in source.weights]
    have = [tuple(w.shape) for w in model.weights]
    if given != have:
        differ = [
            f"{w.path} {g} in the preset, {h} here"
            for w, g, h in zip(model.weights, given, have)
            if g != h
        ] or [f"{len(given)} weights in the preset, {len(have)} here"]
        raise ValueError(
            f"--initial-weights is a different network from this row's "
            f"({differ[0]}); give the preset's retina, --units, --cell and "
            "--glimpse-filters. "
            f"Received: initial_weights={preset!r}"
        )
    model.set_weights(source.get_weights())


def fresh(variant, args):
    """Whether the training canvases of `variant` are drawn every epoch."""
    return args.fresh_canvases and variant in ("translated", "cluttered")


def load_task(variant, args):
    """`(train_images, train_labels, test_images, test_labels)` of one task.

    With fresh canvases the training images are the 28x28 items.
    """
    kwargs = {"sample": args.data == "sample", "path": args.path}
    canvas = None if variant == "centered" else args.canvas_size
    train = fashion_mnist.load(
        "train",
        "centered" if fresh(variant, args) else variant,
        canvas_size=None if fresh(variant, args) else canvas,
        seed=args.seed,
        **kwargs,
    )
    # A different seed for the test canvases: no shared positions or clutter.
    test = fashion_mnist.load(
        "test", variant, canvas_size=canvas, seed=args.seed + 1, **kwargs
    )
    return (*train, *test)


def schedule(args, budgets):
    """The learning-rate callbacks of `--anneal-fraction` (none without it).

    Example:
    >>> args = parse_args(["--anneal-fraction", "0.25"])
    >>> [(c.fraction, c.factor) for c in schedule(args, budgets=[])]
    [(0.25, 0.1)]
    >>> schedule(parse_args([]), budgets=[])
    []
    """
    if args.anneal_fraction is None:
        return []
    factor = ANNEAL_FACTOR if args.anneal_factor is None else args.anneal_factor
    return [
        AnnealLearningRate(
            args.learning_rate,
            args.anneal_fraction,
            factor,
            budgets,
            verbose=bool(args.verbose),
        )
    ]


def train_row(name, data, args, run, result=None):
    """Trains (or resumes) one row; `result`: the row's scores, if known."""
    variant, kind, _ = ROWS[name]
    options = row_options(name, args)
    x_train, y_train, x_test, y_test = data
    with run.strategy.scope():
        model = build_model(kind, options, x_test.shape[1], args)
        compile_classifier(model, args.learning_rate)
    batching = {"seed": args.seed, "drop_remainder": run.static_shapes()}
    if fresh(variant, args):
        compose = {
            "translated": fashion_mnist.translated_dataset,
            "cluttered": fashion_mnist.cluttered_dataset,
        }[variant]
        train_ds = compose(
            x_train, y_train, args.batch_size, x_test.shape[1], **batching
        )
    else:
        train_ds = fashion_mnist.as_dataset(
            x_train, y_train, args.batch_size, **batching
        )
    test_ds = fashion_mnist.as_dataset(x_test, y_test, 500, shuffle=False)
    print(
        f"\n== {name}: {kind} on {task_label(variant, x_test.shape[1])}, "
        f"{model.count_params():,} parameters"
    )
    budgets = run.budgets()  # The schedule reads how far they are spent.
    anneal = schedule(args, budgets)
    fit = run.fit(
        model,
        train_ds,
        stage=name,
        shuffle=False,
        callbacks=anneal + budgets,
        budgets=False,
    )
    if result is not None:  # Trained and scored before a kill.
        return model, result
    error = error_percent(model, test_ds)
    print(f"{name}: test error {error:.2f}% ({len(y_test)} images)")
    if kind == "ram" and args.test_samples > 1:
        with run.strategy.scope():
            copy = one_path_model(model, options, args)
        one_path = error_percent(copy, test_ds)
        print(f"{name}: test error with one glimpse path {one_path:.2f}%")
    result = {
        "task": task_label(variant, x_test.shape[1]),
        "model": kind,
        "options": options,
        "parameters": int(model.count_params()),
        "test_error_percent": round(error, 2),
        "test_images": int(len(y_test)),
        **(
            {"test_error_one_path_percent": round(one_path, 2)}
            if kind == "ram" and args.test_samples > 1
            else {}
        ),
        **(
            {"glimpse_filters": args.glimpse_filters}
            if kind == "ram" and args.glimpse_filters
            else {}
        ),
        "train_minutes": round(fit.seconds / 60, 2),
        "epochs": fit.epochs,
        "steps": fit.steps,
        "learning_rate": args.learning_rate,
        "history": fit.history,
    }
    if anneal:
        result["anneal"] = {
            "fraction": anneal[0].fraction,
            "factor": anneal[0].factor,
            "from_step": anneal[0].annealed_at_step,
        }
    return model, result


def error_percent(model, test_ds):
    """`model`'s error on `test_ds` in percent (from its accuracy metric)."""
    scores = model.evaluate(test_ds, verbose=0, return_dict=True)
    return 100.0 * (1.0 - scores["accuracy"])


def one_path_model(model, options, args):
    """A copy of the RAM row `model` that follows one (the mean) glimpse path.

    `options` are the row's (`row_options`). The weights are `model`'s; only
    `test_samples` differs, which changes inference and not the network.
    """
    one_path = argparse.Namespace(
        **{**vars(args), "test_samples": 1, "initial_weights": None}
    )
    copy = build_model("ram", options, None, one_path)
    copy.set_weights(model.get_weights())
    compile_classifier(copy, args.learning_rate)
    return copy


def format_table(results):
    """The error table as Markdown (rows in the order trained)."""
    lines = ["| task | model | test error (%) | train min |", "|---|---|---:|---:|"]
    for r in results.values():
        if r["model"] == "ram":
            o = r["options"]
            label = (
                f"RAM, {o['num_glimpses']} glimpses, {o['patch_size']}x"
                f"{o['patch_size']}, {o.get('num_scales', 1)} scale(s)"
            )
            if r.get("glimpse_filters"):
                filters = "-".join(map(str, r["glimpse_filters"]))
                label += f", conv glimpse network ({filters} filters)"
        else:
            label = {"fc": "FC, 2 layers (256 ReLU)", "conv": "small convnet"}[
                r["model"]
            ]
        error = f"{r['test_error_percent']:.2f}"
        if "test_error_one_path_percent" in r:
            error += f" (one path {r['test_error_one_path_percent']:.2f})"
        lines.append(f"| {r['task']} | {label} | {error} | {r['train_minutes']:.1f} |")
    return "\n".join(lines)


def data_metadata(args, data, variant):
    """The preset's data, as data: source, sizes, variant and seeds."""
    return {
        "source": "full" if args.data == "full" else "shipped sample",
        "train_images": int(len(data[1])),
        "test_images": int(len(data[3])),
        "variant": variant,
        "canvas_size": int(data[2].shape[1]),
        "fresh_canvases": bool(fresh(variant, args)),
        "seeds": {"train": args.seed, "test": args.seed + 1},
        "loader": "zoo.data.fashion_mnist.load",
    }


def save_preset(run, model, result, data, results, draw=True):
    """Writes the preset row's model with the table so far (and `--plot`)."""
    variant = ROWS[run.args.preset_row][0]
    metadata = run.metadata(
        f"Fashion-MNIST classification, {task_label(variant, data[2].shape[1])}",
        data_metadata(run.args, data, variant),
        {
            "test_error_percent": result["test_error_percent"],
            "epochs": result.get("epochs", run.args.epochs),
            "steps": result.get("steps"),
            "batch_size": run.args.batch_size,
            "learning_rate": run.args.learning_rate,
            **({"anneal": result["anneal"]} if "anneal" in result else {}),
            "train_minutes": result["train_minutes"],
        },
        table={
            name: {k: r[k] for k in ("task", "model", "test_error_percent")}
            for name, r in results.items()
        },
    )
    metadata = run.write_history(metadata, result["history"])
    model.save_to_preset(run.args.out, metadata=metadata)
    print(f"preset written to {run.args.out}")
    if draw and run.args.plot:
        plot(model, data, run.args.plot)


def plot(model, data, path):
    """Glimpse paths of the first 8 test images, titled true / predicted."""
    x_test, y_test = data[2], data[3]
    idx = np.arange(8)
    locations = model.glimpses(x_test[idx])
    predicted = np.argmax(model.predict(x_test[idx], verbose=0), axis=-1)
    names = fashion_mnist.CLASS_NAMES
    titles = [f"{names[y_test[i]]} / {names[p]}" for i, p in zip(idx, predicted)]
    plot_glimpses(
        x_test[idx],
        locations,
        path,
        model.patch_size,
        model.num_scales,
        model.scale_factor,
        titles=titles,
    )
    print(f"glimpse paths drawn to {path}")


def main(argv=None):
    args = parse_args(argv)
    run = TrainingRun("zoo.ram.train", args, argv, files=[("--plot", args.plot)])
    print(run.command)
    print(run.describe_strategy())
    cache, results = {}, run.directory.read(ROWS_FILE, {})
    total = time.time()
    for name in args.rows:
        if name in results and not (name == args.preset_row and args.out):
            print(f"\n== {name}: trained before (run directory)")
            continue
        variant = ROWS[name][0]
        if variant not in cache:
            start = time.time()
            cache = {variant: load_task(variant, args)}  # keep one task in memory
            x_train, _, x_test, _ = cache[variant]
            print(
                f"data {variant}: {len(x_train)} train, {len(x_test)} test images "
                f"{x_test.shape[1:]}"
                + (
                    ", training canvases drawn every epoch"
                    if fresh(variant, args)
                    else ""
                )
                + f" ({time.time() - start:.0f} s)"
            )
        keras.utils.set_random_seed(args.seed)
        model, results[name] = train_row(
            name, cache[variant], args, run, results.get(name)
        )
        run.directory.write(ROWS_FILE, results)
        run.write_results({"command": run.command, "rows": results})
        if name == args.preset_row and args.out:
            preset = (model, results[name], cache[variant])
            # Saved now (table so far), and again with the whole table below.
            save_preset(run, *preset, results, draw=False)
    print(f"\ntotal {(time.time() - total) / 60:.1f} min\n")
    print(format_table(results))
    if args.out and args.preset_row in results:
        save_preset(run, *preset, results)
    run.finish()
    return results


if __name__ == "__main__":
    main()
