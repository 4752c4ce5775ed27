"""Which image sizes a RAM preset is good for, and a warning outside them.

A RAM's cost does not grow with the image (it reads a few glimpses), but
its policy learned where to look on canvases of one size: glimpse
locations are relative to the image, glimpse patches are in pixels, so on
a larger image the same glimpses cover less of it. Test error on 1,000
test canvases of each size (`python -m zoo.ram.evaluation PRESET
--canvas-size N --limit 1000`, 2026-11-27):

| preset (training canvas) | 0.5x | 0.75x | 1x | 1.17-1.25x | 1.33x | 1.5x | 2x |
|---|---:|---:|---:|---:|---:|---:|---:|
| `ram_fashion_mnist_translated_seeking_annealed` (60) | 16.2 | 14.9 | 15.2 | 16.7 | 18.2 | 28.1 | 60.6 |
| `ram_fashion_mnist_cluttered_100_long` (100) | 12.5 | 11.7 | 11.7 | 11.8 | | 18.0 | 43.3 |

Smaller images cost nothing down to half the canvas; larger ones cost
points from a quarter more on (4x: 82-86% error, 1000x1000 on a 60x60
preset 91%). The rule (`GOOD_RANGE`): an image is in range when both its
sides lie in `[canvas / 2, canvas * 1.25]`; `classify`, `glimpses` and
`look` warn (`CanvasSizeWarning`) outside it, and `python -m zoo classify`
prints the warning as one `warning:` line. Crop larger images to the item's
surroundings, or resize them, to bring them in range.
"""

import math
import warnings

from zoo.data import fashion_mnist

#: Image sides from `canvas * GOOD_RANGE[0]` to `canvas * GOOD_RANGE[1]` are
#: in range of a preset trained on `canvas x canvas` images.
GOOD_RANGE = (0.5, 1.25)


class CanvasSizeWarning(UserWarning):
    """An image far from the canvas size a RAM preset was trained on.

    Example:
    >>> with warnings.catch_warnings():  # to silence it, or "error" to stop
    ...     warnings.simplefilter("ignore", CanvasSizeWarning)
    ...     warn_if_far(1000, 1000, 60)
    True
    """


def preset_data(metadata):
    """`(variant, seeds, canvas_size)` of the task a RAM preset learned.

    Read from the preset's metadata as data (`data.variant`, `data.seeds`,
    `data.canvas_size`, written by `zoo.ram.train`); presets written before
    then describe the variant in prose ("translated: each 28x28 item ...")
    and used the seeds 0 (train) and 1 (test) and the loader's default
    canvas (`canvas_size` None).

    Args:
        metadata: dict (a preset's `metadata.json`) or None.

    Returns:
        `(variant, seeds, canvas_size)`: a `fashion_mnist.VARIANTS` name,
        `{"train": int, "test": int}` and an int or None.

    Raises:
        ValueError: the variant is not one the loader knows.

    Example:
    >>> preset_data({"data": {"variant": "cluttered", "canvas_size": 100,
    ...                       "seeds": {"train": 3, "test": 4}}})
    ('cluttered', {'train': 3, 'test': 4}, 100)
    >>> preset_data({"data": {"variant": "translated: each 28x28 item at"}})
    ('translated', {'train': 0, 'test': 1}, None)
    """
    data = (metadata or {}).get("data", {})
    variant = data.get("variant", "translated")
    if variant not in fashion_mnist.VARIANTS:  # The prose of older presets.
        variant = variant.split(":")[0].strip()
    if variant not in fashion_mnist.VARIANTS:
        raise ValueError(
            f"The preset's data variant is none of {fashion_mnist.VARIANTS}. "
            f"Received: variant={data.get('variant')!r}"
        )
    seeds = data.get("seeds", {"train": 0, "test": 1})
    return variant, seeds, data.get("canvas_size")


def preset_note(metadata):
    """The image sides a preset is good for, from its training canvas.

    `RecurrentAttentionModel.preset_note` and `python -m zoo presets`
    (through the registry) call it.

    Example:
    >>> preset_note({"data": {"variant": "cluttered", "canvas_size": 100}})
    'trained on 100x100 canvases: good for image sides 50 to 125'
    """
    side = training_canvas(metadata)
    low, high = good_sides(side)
    return f"trained on {side}x{side} canvases: good for image sides {low} to {high}"


def training_canvas(metadata):
    """The side of the square canvases a RAM preset learned, or `None`.

    Read from the preset's metadata (`data.canvas_size`, else the loader's
    default canvas of its variant: 28 centred, 60 translated or cluttered).
    `None` when there is no metadata (a model built in Python).

    Example:
    >>> training_canvas({"data": {"variant": "cluttered", "canvas_size": 100}})
    100
    >>> training_canvas({"data": {"variant": "translated: each 28x28 item"}})
    60
    >>> training_canvas(None) is None
    True
    """

    if not metadata:
        return None
    variant, _, canvas = preset_data(metadata)
    if canvas is not None:
        return int(canvas)
    return fashion_mnist.ITEM_SIZE if variant == "centered" else 60


def good_sides(canvas):
    """`(smallest, largest)` image side in range of a `canvas` preset.

    Example:
    >>> good_sides(60), good_sides(100)
    ((30, 75), (50, 125))
    """
    low, high = GOOD_RANGE
    return math.ceil(canvas * low), math.floor(canvas * high)


def warn_if_far(height, width, canvas, stacklevel=3):
    """Warns (`CanvasSizeWarning`) when an image side is out of range.

    Args:
        height, width: int. The image's size.
        canvas: int or `None`. The training canvas side (`None`: no check).
        stacklevel: int. Of `warnings.warn`. Defaults to `3` (the caller of
            the method that calls this).

    Returns:
        bool, whether it warned.

    Example:
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warn_if_far(60, 60, 60), warn_if_far(1000, 1000, 60)
    (False, True)
    >>> print(caught[0].message)
    images of 1000x1000 are far from the 60x60 canvases this preset was trained on (good for sides 30 to 75): expect poor classes; crop or resize them
    """
    if canvas is None:
        return False
    low, high = good_sides(canvas)
    if low <= height <= high and low <= width <= high:
        return False
    warnings.warn(
        f"images of {height}x{width} are far from the {canvas}x{canvas} "
        f"canvases this preset was trained on (good for sides {low} to "
        f"{high}): expect poor classes; crop or resize them",
        CanvasSizeWarning,
        stacklevel=stacklevel,
    )
    return True
