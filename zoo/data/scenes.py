"""Fashion-MNIST scenes: 1-3 items on a canvas, captioned with their relations.

The embedded image-captioning task of `zoo.ShowAttendTell` (the standard
caption datasets cannot be downloaded here; `zoo.data.captions` loads them
when you have them). Each scene pastes 1 to 3 Fashion-MNIST items of distinct
classes at random, non-overlapping positions of an empty canvas (84x84 by
default) and captions them from a small grammar:

- one item: `"a sneaker"`;
- two items: the leftmost item, its relation to the other and the other:
  `"a sneaker to the left of a bag"`, `"a dress above a shirt"`;
- three items: the leftmost item and its relation to each of the two others
  (left to right), sharing the relation when it is the same:
  `"a dress above a shirt and a coat"`,
  `"a bag to the left of a coat and below a top"`.

The relation of the leftmost item `P` to another item `X` compares the
centres: `"to the left of"` when `X` is further right than it is above or
below, else `"above"` or `"below"`. Layouts whose relations or left-to-right
order would be ambiguous (differences within `margin` pixels) are redrawn,
so every caption follows from the picture. Scenes are deterministic given
the seed; every item's bounding box is kept (in mention order), so one can
check where a captioner looks when it names an item.

Splits use disjoint source images: `"train"` scenes are built from the
first 55,000 Fashion-MNIST training images, `"validation"` scenes from the
last 5,000, `"test"` scenes from the 10,000 test images (for the shipped
sample: the first 11/12 and last 1/12 of its 2,000 training images, and its
1,000 test images).

Reference:
    Xu et al., 2015, "Show, Attend and Tell: Neural Image Caption Generation
    with Visual Attention" (the captioner this task is made for).
    Xiao, Rasul, Vollgraf, 2017, "Fashion-MNIST".
"""

import numpy as np

from zoo.data import fashion_mnist

#: The Fashion-MNIST images each split's scenes are built from (the full
#: data set), as a preset's metadata records them.
SOURCE_IMAGES = {
    "train": "Fashion-MNIST train images 0-54,999",
    "validation": "Fashion-MNIST train images 55,000-59,999",
    "test": "Fashion-MNIST test images",
}

#: One caption word per Fashion-MNIST class (`fashion_mnist.CLASS_NAMES`
#: order); single words, none a part of another ("t-shirt" would split
#: into "t - shirt" and name a shirt).
NOUNS = (
    "top",
    "trouser",
    "pullover",
    "dress",
    "coat",
    "sandal",
    "shirt",
    "sneaker",
    "bag",
    "boot",
)
RELATIONS = ("to the left of", "above", "below")
SPLITS = ("train", "validation", "test")
DEFAULT_SIZES = {"train": 20000, "validation": 500, "test": 2000}
_SPLIT_SEEDS = {"train": 0, "validation": 1, "test": 2}
ITEM_SIZE = fashion_mnist.ITEM_SIZE


def relation(first_box, other_box):
    """The relation word of the item in `first_box` to the one in `other_box`.

    Args:
        first_box: `(top, left, bottom, right)` of the leftmost item `P`.
        other_box: `(top, left, bottom, right)` of another item `X`.

    Returns:
        One of `RELATIONS`: `"to the left of"` when `X` is further to the
        right of `P` than it is above or below it, else `"above"` (`X` is
        lower) or `"below"` (`X` is higher).

    Example:
    >>> relation((0, 0, 28, 28), (40, 4, 68, 32))
    'above'
    """
    dy = (other_box[0] + other_box[2] - first_box[0] - first_box[2]) / 2
    dx = (other_box[1] + other_box[3] - first_box[1] - first_box[3]) / 2
    if dx > abs(dy):
        return RELATIONS[0]
    return RELATIONS[1] if dy > 0 else RELATIONS[2]


def caption(labels, boxes):
    """Captions one scene from its items (the grammar of this module).

    Args:
        labels: sequence of 1-3 Fashion-MNIST class ids, distinct.
        boxes: sequence of `(top, left, bottom, right)` boxes, one per label.

    Returns:
        `(text, order)`: the caption and the indices of the items in the
        order the caption names them.

    Example:
    >>> caption([8, 7], [(0, 50, 28, 78), (10, 2, 38, 30)])
    ('a sneaker to the left of a bag', [1, 0])
    """
    if not 1 <= len(labels) <= 3 or len(labels) != len(boxes):
        raise ValueError(
            "A scene has 1 to 3 items, one box each. Received: "
            f"{len(labels)} labels, {len(boxes)} boxes"
        )
    order = sorted(range(len(labels)), key=lambda i: (boxes[i][1], boxes[i][0]))
    first, others = order[0], order[1:]
    text = f"a {NOUNS[labels[first]]}"
    relations = [relation(boxes[first], boxes[i]) for i in others]
    if len(others) == 1:
        text += f" {relations[0]} a {NOUNS[labels[others[0]]]}"
    elif len(others) == 2:
        second, third = (NOUNS[labels[i]] for i in others)
        if relations[0] == relations[1]:
            text += f" {relations[0]} a {second} and a {third}"
        else:
            text += f" {relations[0]} a {second} and {relations[1]} a {third}"
    return text, order


def _unambiguous(boxes, margin):
    """Whether the left-to-right order and every relation are clear."""
    centres = [((b[0] + b[2]) / 2, (b[1] + b[3]) / 2) for b in boxes]
    cols = sorted(c[1] for c in centres)
    if any(b - a < margin for a, b in zip(cols, cols[1:])):
        return False
    first = min(range(len(boxes)), key=lambda i: centres[i][1])
    for i, (row, col) in enumerate(centres):
        if i != first:
            dy, dx = row - centres[first][0], col - centres[first][1]
            if abs(abs(dx) - abs(dy)) < margin:
                return False
    return True


def _layout(rng, count, canvas_size, margin, attempts=1000):
    """Top-left corners of `count` non-overlapping items with clear relations."""
    span = canvas_size - ITEM_SIZE + 1
    for _ in range(attempts):
        corners = rng.integers(0, span, size=(count, 2))
        boxes = [(r, c, r + ITEM_SIZE, c + ITEM_SIZE) for r, c in corners.tolist()]
        overlap = any(
            abs(a[0] - b[0]) < ITEM_SIZE and abs(a[1] - b[1]) < ITEM_SIZE
            for i, a in enumerate(boxes)
            for b in boxes[i + 1 :]
        )
        if not overlap and _unambiguous(boxes, margin):
            return boxes
    raise ValueError(
        f"No layout of {count} items with margin {margin} found on a "
        f"{canvas_size}x{canvas_size} canvas: use a larger canvas."
    )


def make_scenes(
    images, labels, num_scenes, canvas_size=84, max_items=3, margin=8, seed=0
):
    """Builds captioned scenes from Fashion-MNIST items.

    Args:
        images: uint8 array `(N, 28, 28)`: the items to draw from.
        labels: int array `(N,)`: their classes.
        num_scenes: int. Number of scenes.
        canvas_size: int. Side of the square canvas. Defaults to `84`.
        max_items: int. 1 to 3 items per scene, drawn uniformly from
            `1..max_items`. Defaults to `3`.
        margin: int. Pixels by which the left-to-right order and each
            relation must be unambiguous. Defaults to `8`.
        seed: int. Seed of the NumPy generator. Defaults to `0`.

    Returns:
        A dict with `images` uint8 `(num_scenes, canvas_size, canvas_size)`,
        `captions` (list of str), and, in the order the caption names the
        items, `labels` int32 `(num_scenes, max_items)` and `boxes` int32
        `(num_scenes, max_items, 4)` as `(top, left, bottom, right)` pixel
        bounds (bottom/right exclusive); both padded with `-1`.

    Example:
    >>> images, labels = fashion_mnist.load_arrays("test", fashion_mnist.sample_path())
    >>> scenes = make_scenes(images, labels, 4, seed=0)
    >>> scenes["images"].shape, len(scenes["captions"])
    ((4, 84, 84), 4)
    """
    images, labels = np.asarray(images), np.asarray(labels).astype("int64")
    if not 1 <= max_items <= 3:
        raise ValueError(f"max_items must be 1, 2 or 3. Received: {max_items=}")
    if canvas_size < 2 * ITEM_SIZE and max_items > 1:
        raise ValueError(
            f"Two items need a canvas of at least {2 * ITEM_SIZE} pixels. "
            f"Received: {canvas_size=}"
        )
    by_class = [np.flatnonzero(labels == k) for k in range(len(NOUNS))]
    present = [k for k in range(len(NOUNS)) if by_class[k].size]
    if len(present) < max_items:
        raise ValueError(
            f"Scenes of {max_items} distinct items need that many classes; "
            f"the images hold {len(present)}."
        )
    rng = np.random.default_rng(seed)
    canvases = np.zeros((num_scenes, canvas_size, canvas_size), "uint8")
    scene_labels = np.full((num_scenes, max_items), -1, "int32")
    scene_boxes = np.full((num_scenes, max_items, 4), -1, "int32")
    captions = []
    for n in range(num_scenes):
        count = int(rng.integers(1, max_items + 1))
        classes = rng.choice(present, size=count, replace=False).tolist()
        boxes = _layout(rng, count, canvas_size, margin)
        for k, (top, left, bottom, right) in zip(classes, boxes):
            item = images[rng.choice(by_class[k])]
            canvases[n, top:bottom, left:right] = item
        text, order = caption(classes, boxes)
        captions.append(text)
        for j, i in enumerate(order):
            scene_labels[n, j] = classes[i]
            scene_boxes[n, j] = boxes[i]
    return {
        "images": canvases,
        "captions": captions,
        "labels": scene_labels,
        "boxes": scene_boxes,
    }


def source_items(split="train", path=None, sample=False):
    """The Fashion-MNIST items `(images, labels)` a split's scenes use.

    Args:
        split: str. `"train"`, `"validation"` or `"test"`.
        path: str or None. Directory of the IDX files.
        sample: bool. Use the shipped sample. Defaults to `False`.

    Returns:
        uint8 images `(N, 28, 28)` and their labels `(N,)`.
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}. Received: {split=}")
    if sample:
        if path is not None:
            raise ValueError("Pass either `path` or `sample=True`, not both.")
        path = fashion_mnist.sample_path()
    images, labels = fashion_mnist.load_arrays(
        "test" if split == "test" else "train", path
    )
    if split == "test":
        return images, labels
    cut = 55000 if len(images) == 60000 else len(images) - len(images) // 12
    if split == "train":
        return images[:cut], labels[:cut]
    return images[cut:], labels[cut:]


def load(
    split="train",
    num_scenes=None,
    canvas_size=84,
    max_items=3,
    margin=8,
    seed=None,
    path=None,
    sample=False,
):
    """Loads a split of Fashion-MNIST scenes (see the module docstring).

    Args:
        split: str. `"train"`, `"validation"` or `"test"`. Defaults to
            `"train"`.
        num_scenes: int or None. Defaults to 20,000 / 500 / 2,000.
        canvas_size: int. Defaults to `84`.
        max_items: int. Defaults to `3`.
        margin: int. Defaults to `8`.
        seed: int or None. Defaults to 0 / 1 / 2 by split.
        path: str or None. Directory of the Fashion-MNIST IDX files; see
            `fashion_mnist.load_arrays`.
        sample: bool. Use the shipped Fashion-MNIST sample. Defaults to
            `False`.

    Returns:
        The dict of `make_scenes`.

    Example:
    >>> test = load("test", num_scenes=10, sample=True)
    >>> test["images"].shape, test["captions"][2]
    ((10, 84, 84), 'a sneaker to the left of a sandal')
    """
    images, labels = source_items(split, path, sample)
    return make_scenes(
        images,
        labels,
        DEFAULT_SIZES[split] if num_scenes is None else num_scenes,
        canvas_size=canvas_size,
        max_items=max_items,
        margin=margin,
        seed=_SPLIT_SEEDS[split] if seed is None else seed,
    )


def pairs(scenes):
    """`(images (N, H, W, 1) uint8, captions list)`: raw input of `fit`."""
    return scenes["images"][..., None], list(scenes["captions"])
