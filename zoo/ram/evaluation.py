"""How well a RAM preset classifies, and where it looks, per glimpse.

`evaluate_classifier` prints the error on the canvases the preset learned
(what `python -m zoo evaluate` runs). The rest measures the policy.

On translated Fashion-MNIST canvases the item's position is known, so the
policy can be judged directly: a policy that looks moves its glimpses towards
the item after the first one (at the canvas centre); a policy that does not
wanders. Distances are in the `[-1, 1]` units of the glimpse locations (half
the canvas side is 1). Two more rows per glimpse: the slope of the glimpse
position on the item position (1: the glimpses follow the item; 0: they go
to the same place on every canvas, however near the items that place is on
average) and the share of the finest patch that falls on the item's pixels.

The canvases are those the preset was trained for (its metadata's variant,
canvas size and test seed; translated 60x60 with seed 1 for older presets),
or those of `--variant`, `--canvas-size` and `--seed`. On cluttered canvases
the distance is to the item (not the clutter).

`--test-samples M` (M > 1) also prints the error when the agent samples M
glimpse paths per canvas and averages their class probabilities (the
`test_samples` argument of `RecurrentAttention`): M times the inference
cost, and the table still describes the mean path.

Usage:
    python -m zoo.ram.evaluation ram_fashion_mnist_translated_seeking_annealed --limit 2000
    python -m zoo.ram.evaluation ./my_preset --path /usr/share/fashion-mnist
    python -m zoo.ram.evaluation ./my_preset --canvas-size 200
    python -m zoo.ram.evaluation ram_fashion_mnist_translated_seeking_annealed --test-samples 10
"""

import argparse

import numpy as np

from zoo import progress
from zoo.base.task import Task
from zoo.data import fashion_mnist
from zoo.ram.canvas import preset_data
from zoo.training.flags import positive_int


def item_centres(positions, canvas_size, item_size=fashion_mnist.ITEM_SIZE):
    """Item centres `(N, 2)` `(y, x)` in `[-1, 1]` from top-left pixel positions.

    Pixel `i` covers `[i, i + 1)`, so an item at row `r` spans
    `[r, r + item_size)` and its centre is `r + item_size / 2`.

    Example:
    >>> item_centres(np.array([[16, 0]]), 60)
    array([[ 0.        , -0.53333333]])
    """
    centres = np.asarray(positions, "float64") + item_size / 2.0
    return centres / canvas_size * 2.0 - 1.0


def glimpse_distances(locations, centres, edge=0.99):
    """Per glimpse: mean distance to the item, and the share on the border.

    Args:
        locations: `(N, T, 2)` glimpse centres in `[-1, 1]`.
        centres: `(N, 2)` item centres in `[-1, 1]`.
        edge: float. A glimpse is on the border when a coordinate's absolute
            value exceeds it (`1 - patch / canvas`: its finest patch leaves
            the canvas). Defaults to `0.99`.

    Returns:
        `(mean_distance, on_border)`: two arrays of `T` values.

    Example:
    >>> locations = np.array([[[0.0, 0.0], [0.5, 0.0]]])
    >>> glimpse_distances(locations, np.array([[0.5, 0.0]]))
    (array([0.5, 0. ]), array([0., 0.]))
    """
    locations = np.asarray(locations, "float64")
    distances = np.linalg.norm(locations - np.asarray(centres)[:, None], axis=-1)
    border = np.any(np.abs(locations) > edge, axis=-1)
    return distances.mean(axis=0), border.mean(axis=0)


def following_slopes(locations, centres):
    """Per glimpse: least-squares slope of glimpse position on item position.

    Averaged over the two axes: 1 when the glimpses follow the item wherever
    it is, 0 when they go to the same place whatever the canvas (however
    close to the items that place is on average).

    Example:
    >>> centres = np.array([[0.5, -0.5], [-0.5, 0.5], [0.0, 0.2]])
    >>> locations = np.stack([np.zeros_like(centres), 0.8 * centres], axis=1)
    >>> following_slopes(locations, centres).round(6)
    array([0. , 0.8])
    """
    locations = np.asarray(locations, "float64")
    c = np.asarray(centres, "float64")
    c = c - c.mean(axis=0)
    moves = locations - locations.mean(axis=0)
    spread = (c**2).sum(axis=0)  # 0 when every item sits at one place
    covariance = (moves * c[:, None]).sum(axis=0)
    slopes = np.divide(
        covariance, spread, out=np.zeros_like(covariance), where=spread > 0
    )
    return slopes.mean(axis=-1)


def item_coverage(canvases, positions, locations, patch_size, item_size=None):
    """Per glimpse: mean share of the finest patch on the item's pixels.

    The item's pixels are the non-zero pixels of its box (clutter never
    overlaps the box, so this holds for cluttered canvases too).

    Example:
    >>> canvases = np.zeros((1, 8, 8), "uint8")
    >>> canvases[0, :4, :4] = 255  # a 4x4 item in the top-left corner
    >>> locations = np.array([[[-0.5, -0.5], [0.5, 0.5], [-0.5, 0.0]]])
    >>> item_coverage(canvases, [[0, 0]], locations, 4, item_size=4)
    array([1. , 0. , 0.5])
    """
    item_size = item_size or fashion_mnist.ITEM_SIZE
    canvases = np.asarray(canvases)
    canvases = canvases.reshape(canvases.shape[:3])
    n, height, width = canvases.shape
    positions = np.asarray(positions)
    locations = np.asarray(locations, "float64")
    # Ink of each canvas inside its item's box, summed: an integral image.
    ink = canvases > 0
    rows, cols = np.arange(height)[None, :, None], np.arange(width)[None, None, :]
    top, left = positions[:, 0, None, None], positions[:, 1, None, None]
    ink &= (rows >= top) & (rows < top + item_size)
    ink &= (cols >= left) & (cols < left + item_size)
    table = np.zeros((n, height + 1, width + 1))
    table[:, 1:, 1:] = ink.cumsum(axis=1).cumsum(axis=2)
    index = np.arange(n)
    shares = []
    for t in range(locations.shape[1]):
        # The sensor's corner of the finest patch (GlimpseSensor._corner).
        centre = (locations[:, t] + 1.0) * 0.5 * np.array([height, width])
        corner = np.floor(centre - 0.5 * patch_size + 0.5).astype(int)
        y0, x0 = np.clip(corner[:, 0], 0, height), np.clip(corner[:, 1], 0, width)
        y1 = np.clip(corner[:, 0] + patch_size, 0, height)
        x1 = np.clip(corner[:, 1] + patch_size, 0, width)
        count = (
            table[index, y1, x1]
            - table[index, y0, x1]
            - table[index, y1, x0]
            + table[index, y0, x0]
        )
        shares.append(np.mean(count / patch_size**2))
    return np.array(shares)


#: Images per `predict` call (and per step of the progress bar).
PREDICT_BATCH = 256


def error_percent(logits, labels):
    """Share of images whose highest logit is not their label, in percent.

    Example:
    >>> error_percent(np.array([[0.1, 0.9], [0.8, 0.2]]), np.array([1, 1]))
    50.0
    """
    return 100.0 * float(np.mean(np.argmax(logits, -1) != labels))


def evaluate_classifier(model, split="test", limit=None, path=None):
    """Prints and returns the error (%) of a RAM task on what it learned.

    The images are the preset's (`preset_data`): its variant, canvas size
    and the seed of `split`, from the Fashion-MNIST files at `path`.

    Args:
        model: a `RecurrentAttentionModel` (its `preset_metadata` says the
            task; none: translated 60x60 canvases).
        split: `"train"` or `"test"`. Defaults to `"test"`.
        limit: optional int, the first images only.
        path: optional Fashion-MNIST IDX directory.

    Returns:
        float, the error in percent.
    """
    if split not in ("train", "test"):
        raise ValueError(
            "`split` must be 'train' or 'test' (Fashion-MNIST has no "
            f"validation split). Received: split={split!r}"
        )
    variant, seeds, canvas_size = preset_data(getattr(model, "preset_metadata", None))
    images, labels = fashion_mnist.load(
        split, variant, canvas_size=canvas_size, seed=seeds[split], path=path
    )
    if limit:
        images, labels = images[:limit], labels[:limit]
    logits = np.asarray(
        progress.in_batches(  # a bar on a terminal's stderr; stdout: the answer
            images,
            PREDICT_BATCH,
            lambda batch: model.predict(batch, batch_size=PREDICT_BATCH, verbose=0),
            "images",
            "compiling the model (first call)",
        )
    )
    error = error_percent(logits, labels)
    side = images.shape[1]
    print(
        f"{variant} {side}x{side} Fashion-MNIST {split}: error {error:.2f}% "
        f"({len(labels)} images)"
    )
    return error


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("preset", help="shipped preset name or ./path")
    p.add_argument("--limit", type=positive_int, default=2000, help="test canvases")
    p.add_argument(
        "--variant",
        choices=["translated", "cluttered"],
        help="canvases (default: the preset's; translated for a centred one)",
    )
    p.add_argument(
        "--canvas-size", type=positive_int, help="default: the preset's, else 60"
    )
    p.add_argument("--seed", type=int, help="default: the preset's test seed")
    p.add_argument(
        "--start",
        choices=["centre", "random"],
        default="centre",
        help="first glimpse at the canvas centre (as the model does) or at a "
        "uniformly random place of each canvas (seeded by --seed): does the "
        "policy reach the item from anywhere?",
    )
    p.add_argument(
        "--test-samples",
        type=positive_int,
        default=1,
        help="also the error with this many sampled glimpse paths per canvas, "
        "their class probabilities averaged (the table stays on the mean path)",
    )
    p.add_argument("--plot", help="PNG of the glimpse paths of the first 8 canvases")
    p.add_argument("--path", help="Fashion-MNIST IDX directory")
    args = p.parse_args(argv)
    model = Task.from_preset(args.preset, test_samples=1)
    variant, seeds, canvas_size = preset_data(model.preset_metadata)
    variant = args.variant or ("translated" if variant == "centered" else variant)
    canvas_size = args.canvas_size or canvas_size or 60
    seed = seeds["test"] if args.seed is None else args.seed
    images, labels = fashion_mnist.load_arrays("test", args.path)
    # The whole test set is placed (the canvases of zoo.ram.train), then cut.
    if variant == "cluttered":
        pieces = fashion_mnist.clutter_pieces(canvas_size)
        canvases, positions = fashion_mnist.clutter(
            images, canvas_size, pieces, seed=seed
        )
    else:
        canvases, positions = fashion_mnist.translate(images, canvas_size, seed=seed)
    canvases, positions = canvases[: args.limit], positions[: args.limit]
    labels = labels[: args.limit]
    first = None
    if args.start == "random":
        first = np.random.default_rng(seed).uniform(-1, 1, (len(labels), 2))
    locations, logits = model.look(canvases, first)
    error = error_percent(logits, labels)
    edge = 1.0 - model.patch_size / canvas_size
    centres = item_centres(positions, canvas_size)
    mean, border = glimpse_distances(locations, centres, edge)
    print(
        f"{args.preset}: {len(labels)} {variant} {canvas_size}x{canvas_size} "
        f"test canvases (seed {seed}), first glimpse "
        f"{'at random' if args.start == 'random' else 'at the centre'}, "
        f"error {error:.2f}%"
    )
    if args.test_samples > 1:
        sampled = Task.from_preset(args.preset, test_samples=args.test_samples)
        _, sampled_logits = sampled.look(canvases, first)
        sampled_error = error_percent(sampled_logits, labels)
        print(
            f"with {args.test_samples} sampled glimpse paths per canvas "
            f"(class probabilities averaged): error {sampled_error:.2f}%"
        )
    print("| glimpse | " + " | ".join(str(t + 1) for t in range(len(mean))) + " |")
    print("|---|" + "---:|" * len(mean))
    print(
        "| mean distance to the item | " + " | ".join(f"{d:.2f}" for d in mean) + " |"
    )
    slopes = following_slopes(locations, centres)
    print(
        "| slope on the item's position (1: follows it) | "
        + " | ".join(f"{v:.2f}" for v in slopes)
        + " |"
    )
    coverage = item_coverage(canvases, positions, locations, model.patch_size)
    print(
        "| item pixels in the finest patch (%) | "
        + " | ".join(f"{100 * v:.0f}" for v in coverage)
        + " |"
    )
    print(
        "| finest patch off the canvas (%) | "
        + " | ".join(f"{100 * b:.1f}" for b in border)
        + " |"
    )
    if args.plot:
        from zoo.ram.plotting import plot_glimpses

        names = model.class_names or [str(k) for k in range(model.num_classes)]
        predicted = logits.argmax(-1)
        plot_glimpses(
            canvases[:8],
            locations[:8],
            args.plot,
            model.patch_size,
            model.num_scales,
            model.scale_factor,
            titles=[f"{names[t]} / {names[p]}" for t, p in zip(labels, predicted)],
        )
        print(f"glimpse paths drawn to {args.plot}")
    return mean, border


if __name__ == "__main__":
    main()
