"""Fashion-MNIST loader and the translated / cluttered task variants.

The images are read from IDX files (the format of the original MNIST
distribution, gzip-compressed or not): from a directory you name, from the
Debian package `dataset-fashion-mnist` (`/usr/share/datasets/fashion-mnist`),
or, as a last resort, through `keras.datasets.fashion_mnist` (which downloads).
A 2,000 + 1,000 image sample ships with the package (`sample_path()`).

The translated and cluttered variants follow Mnih et al. (2014): each 28x28
item is pasted at a random position of a larger empty canvas, and for the
cluttered variant random 8x8 crops of *other* items are scattered around it.

Reference:
    Mnih, Heess, Graves, Kavukcuoglu. "Recurrent Models of Visual Attention",
    NeurIPS 2014. https://arxiv.org/abs/1406.6247
    Xiao, Rasul, Vollgraf. "Fashion-MNIST: a Novel Image Dataset for
    Benchmarking Machine Learning Algorithms", 2017.
    https://arxiv.org/abs/1708.07747
"""

import gzip
import os
import pathlib
import struct

import numpy as np

from zoo.data import pipeline

DEFAULT_PATH = "/usr/share/datasets/fashion-mnist"
DEBIAN_PACKAGE = "dataset-fashion-mnist"
ITEM_SIZE = 28
CLASS_NAMES = (
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
)
FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
VARIANTS = ("centered", "translated", "cluttered")

# IDX type codes (third byte of the magic number) and their big-endian dtypes.
_IDX_DTYPES = {
    0x08: np.dtype("u1"),
    0x09: np.dtype("i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}


def _open(path):
    path = str(path)
    return gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")


def read_idx(path):
    """Reads an IDX file (optionally gzip-compressed) into a NumPy array.

    Args:
        path: str or path-like. An IDX file; names ending in `.gz` are
            decompressed on the fly.

    Returns:
        A NumPy array with the file's shape and (native-endian) dtype.

    Raises:
        ValueError: when the magic number, the type code, or the payload size
            does not match the IDX format.

    Example:
    >>> import os
    >>> images = read_idx(os.path.join(sample_path(), "t10k-images-idx3-ubyte.gz"))
    >>> images.shape, images.dtype  # the full test file is (10000, 28, 28)
    ((1000, 28, 28), dtype('uint8'))
    """
    with _open(path) as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0:
        raise ValueError(
            f"{path} is not an IDX file: bad magic number "
            f"{data[:4].hex() or '(empty file)'} (expected 0x0000TTNN)."
        )
    type_code, ndim = data[2], data[3]
    if type_code not in _IDX_DTYPES:
        raise ValueError(
            f"{path} is not an IDX file: unknown type code {type_code:#04x} "
            "in the magic number."
        )
    header_size = 4 + 4 * ndim
    if len(data) < header_size:
        raise ValueError(f"{path} is truncated: the IDX header is incomplete.")
    shape = struct.unpack(f">{ndim}I", data[4:header_size])
    dtype = _IDX_DTYPES[type_code]
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(data) - header_size != expected:
        raise ValueError(
            f"{path} is corrupt: the header announces shape {shape} "
            f"({expected} bytes) but {len(data) - header_size} bytes follow."
        )
    array = np.frombuffer(data, dtype=dtype, offset=header_size).reshape(shape)
    return array.astype(dtype.newbyteorder("="))


def write_idx(path, array):
    """Writes a NumPy array as an IDX file, gzip-compressed if `path` ends in `.gz`.

    The gzip header carries no timestamp or file name, so writing the same
    array twice gives identical bytes.

    Args:
        path: str or path-like. Destination file.
        array: array-like of uint8, int8, int16, int32, float32 or float64.
    """
    array = np.asarray(array)
    codes = {dtype.newbyteorder("="): code for code, dtype in _IDX_DTYPES.items()}
    native = array.dtype.newbyteorder("=")
    if native not in codes:
        raise ValueError(f"IDX cannot store dtype {array.dtype}.")
    header = bytes([0, 0, codes[native], array.ndim])
    header += struct.pack(f">{array.ndim}I", *array.shape)
    payload = header + array.astype(_IDX_DTYPES[codes[native]]).tobytes()
    path = str(path)
    with open(path, "wb") as f:
        if path.endswith(".gz"):
            with gzip.GzipFile(fileobj=f, mode="wb", filename="", mtime=0) as gz:
                gz.write(payload)
        else:
            f.write(payload)


def _find(directory, name):
    for candidate in (name + ".gz", name):
        full = os.path.join(directory, candidate)
        if os.path.isfile(full):
            return full
    return None


def _read_split(directory, split):
    image_name, label_name = FILES[split]
    image_file = _find(directory, image_name)
    label_file = _find(directory, label_name)
    if image_file is None or label_file is None:
        return None
    images, labels = read_idx(image_file), read_idx(label_file)
    if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
        raise ValueError(
            f"{directory}: {split} images {images.shape} and labels "
            f"{labels.shape} do not form a Fashion-MNIST split."
        )
    return images.astype("uint8"), labels.astype("uint8")


def _keras_fallback(split):
    """Loads a split through `keras.datasets` (may download); None on failure."""
    import keras

    try:
        train, test = keras.datasets.fashion_mnist.load_data()
    except Exception:  # No network, no cache: report our own error instead.
        return None
    images, labels = train if split == "train" else test
    return np.asarray(images, "uint8"), np.asarray(labels, "uint8")


def load_arrays(split="train", path=None):
    """Loads one Fashion-MNIST split as NumPy arrays.

    Args:
        split: str. `"train"` (60,000 images) or `"test"` (10,000 images).
            Defaults to `"train"`.
        path: str or None. Directory holding the four IDX files (gzipped or
            not) under their original names. When `None`, the Debian package
            directory `/usr/share/datasets/fashion-mnist` is used if present,
            else `keras.datasets.fashion_mnist`. Defaults to `None`.

    Returns:
        `(images, labels)`: uint8 arrays of shape `(N, 28, 28)` and `(N,)`.

    Raises:
        FileNotFoundError: when no source has the data.

    Example:
    >>> images, labels = load_arrays("test", path=sample_path())
    >>> images.shape, labels.shape
    ((1000, 28, 28), (1000,))
    """
    if split not in FILES:
        raise ValueError(f"split must be one of {sorted(FILES)}. Received: {split=}")
    if path is not None:
        arrays = _read_split(str(path), split)
        if arrays is None:
            raise FileNotFoundError(
                f"No Fashion-MNIST {split} files ({', '.join(FILES[split])}, "
                f"optionally .gz) in {path}."
            )
        return arrays
    arrays = _read_split(DEFAULT_PATH, split) if os.path.isdir(DEFAULT_PATH) else None
    if arrays is None:
        arrays = _keras_fallback(split)
    if arrays is None:
        raise FileNotFoundError(
            f"Fashion-MNIST not found in {DEFAULT_PATH} and keras.datasets "
            f"could not download it. Install the Debian package "
            f"`{DEBIAN_PACKAGE}` (apt install {DEBIAN_PACKAGE}), pass "
            "`path=` a directory with the IDX files, or use `sample=True` / "
            "`sample_path()` for the shipped sample."
        )
    return arrays


def sample_path():
    """Directory of the shipped Fashion-MNIST sample.

    It holds the four IDX files under their original names: 2,000 training
    and 1,000 test images (class-balanced, cut by `scripts/make_samples.py`).

    Returns:
        str. A directory to pass as `path=` to `load_arrays` or `load`.
    """
    return str(pathlib.Path(__file__).parent / "samples")


def _check_canvas(canvas_size):
    if canvas_size < ITEM_SIZE:
        raise ValueError(
            f"canvas_size must be at least {ITEM_SIZE}. Received: {canvas_size=}"
        )


def translate(images, canvas_size=60, seed=0):
    """Pastes each 28x28 item at a uniformly random position of an empty canvas.

    Args:
        images: uint8 array `(N, 28, 28)`.
        canvas_size: int. Side of the square canvas. Defaults to `60`.
        seed: int. Seed of the NumPy generator drawing the positions.
            Defaults to `0`.

    Returns:
        `(canvases, positions)`: canvases `(N, canvas_size, canvas_size)` with
        the input dtype, and int32 positions `(N, 2)` holding the `(row,
        column)` of each item's top-left pixel.

    Example:
    >>> canvas, positions = translate(np.ones((2, 28, 28), "uint8"), 40)
    >>> canvas.shape, positions.shape
    ((2, 40, 40), (2, 2))
    """
    images = np.asarray(images)
    _check_canvas(canvas_size)
    rng = np.random.default_rng(seed)
    n = len(images)
    positions = rng.integers(0, canvas_size - ITEM_SIZE + 1, size=(n, 2))
    positions = positions.astype("int32")
    canvases = np.zeros((n, canvas_size, canvas_size), images.dtype)
    for i, (row, col) in enumerate(positions):
        canvases[i, row : row + ITEM_SIZE, col : col + ITEM_SIZE] = images[i]
    return canvases, positions


def clutter(
    images,
    canvas_size=60,
    num_pieces=4,
    piece_size=8,
    seed=0,
    source_images=None,
):
    """Translated items plus `num_pieces` random crops of other items as clutter.

    Each item is placed as in `translate`; then `num_pieces` crops of
    `piece_size x piece_size` pixels, cut at random from other images, are
    placed at random positions that do not overlap the item's 28x28 box
    (overlapping pieces combine by pixel-wise maximum). The item itself is
    therefore left intact, as in the cluttered MNIST task of Mnih et al.

    Args:
        images: uint8 array `(N, 28, 28)`.
        canvas_size: int. Side of the square canvas. Defaults to `60`
            (the paper uses 60 with 4 pieces and 100 with 8 pieces).
        num_pieces: int. Clutter pieces per canvas. Defaults to `4`.
        piece_size: int. Side of each square piece. Defaults to `8`.
        seed: int. Seed of the NumPy generator. Defaults to `0`.
        source_images: optional array `(M, 28, 28)` to cut the pieces from.
            Defaults to `images`, in which case a canvas never receives a
            piece of its own item.

    Returns:
        `(canvases, positions)` as in `translate`.

    Example:
    >>> rng = np.random.default_rng(0)
    >>> items = rng.integers(0, 255, (3, 28, 28), dtype="uint8")
    >>> canvas, positions = clutter(items, canvas_size=60, num_pieces=4)
    >>> canvas.shape
    (3, 60, 60)
    """
    images = np.asarray(images)
    _check_pieces(num_pieces, piece_size)
    own_sources = source_images is None
    sources = images if own_sources else np.asarray(source_images)
    if own_sources and len(sources) < 2 and num_pieces > 0:
        raise ValueError("clutter needs at least two images to cut pieces from.")
    canvases, positions = translate(images, canvas_size, seed)
    # A separate stream, so the item positions equal translate(..., seed).
    rng = np.random.default_rng([seed, 1])
    span = canvas_size - piece_size + 1
    rows = np.arange(span)[:, None]
    cols = np.arange(span)[None, :]
    for i, (row, col) in enumerate(positions):
        free = (
            (rows + piece_size <= row)
            | (rows >= row + ITEM_SIZE)
            | (cols + piece_size <= col)
            | (cols >= col + ITEM_SIZE)
        )
        free_places = np.flatnonzero(free)
        if num_pieces and free_places.size == 0:
            raise ValueError(
                f"No room for a {piece_size}x{piece_size} piece beside the item "
                f"on a {canvas_size}x{canvas_size} canvas."
            )
        for _ in range(num_pieces):
            if own_sources:
                j = rng.integers(0, len(sources) - 1)
                j = j + 1 if j >= i else j  # any image but the item itself
            else:
                j = rng.integers(0, len(sources))
            r0, c0 = rng.integers(0, ITEM_SIZE - piece_size + 1, size=2)
            piece = sources[j, r0 : r0 + piece_size, c0 : c0 + piece_size]
            r, c = divmod(int(rng.choice(free_places)), span)
            target = canvases[i, r : r + piece_size, c : c + piece_size]
            np.maximum(target, piece, out=target)
    return canvases, positions


def clutter_pieces(canvas_size):
    """Default clutter pieces of a canvas: 8 from 100x100 up, else 4.

    The paper's two settings (4 pieces on 60x60, 8 on 100x100).

    Example:
    >>> clutter_pieces(60), clutter_pieces(100)
    (4, 8)
    """
    return 8 if canvas_size >= 100 else 4


def load(
    split="train",
    variant="centered",
    canvas_size=None,
    num_pieces=None,
    path=None,
    seed=0,
    sample=False,
):
    """Loads a Fashion-MNIST split in one of the three task variants.

    Args:
        split: str. `"train"` or `"test"`. Defaults to `"train"`.
        variant: str. `"centered"` (the original 28x28 images, or centered on a
            larger canvas when `canvas_size` is given), `"translated"` or
            `"cluttered"`. Defaults to `"centered"`.
        canvas_size: int or None. Canvas side; defaults to 28 for
            `"centered"` and 60 for the other variants.
        num_pieces: int or None. Clutter pieces for `"cluttered"`; defaults to
            4, or 8 when `canvas_size >= 100` (the paper's two settings).
        path: str or None. Directory of IDX files; see `load_arrays`.
        seed: int. Seed for positions and clutter. Defaults to `0`.
        sample: bool. Load the shipped sample instead of the full data.
            Defaults to `False`.

    Returns:
        `(images, labels)`: uint8 arrays `(N, canvas_size, canvas_size)` and
        `(N,)`.

    Example:
    >>> images, labels = load("test", "cluttered", sample=True)
    >>> images.shape
    (1000, 60, 60)
    """
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}. Received: {variant=}")
    if sample:
        if path is not None:
            raise ValueError("Pass either `path` or `sample=True`, not both.")
        path = sample_path()
    images, labels = load_arrays(split, path)
    if variant == "centered":
        if canvas_size is None or canvas_size == ITEM_SIZE:
            return images, labels
        _check_canvas(canvas_size)
        offset = (canvas_size - ITEM_SIZE) // 2
        canvases = np.zeros((len(images), canvas_size, canvas_size), "uint8")
        canvases[:, offset : offset + ITEM_SIZE, offset : offset + ITEM_SIZE] = images
        return canvases, labels
    canvas_size = 60 if canvas_size is None else canvas_size
    if variant == "translated":
        return translate(images, canvas_size, seed)[0], labels
    if num_pieces is None:
        num_pieces = clutter_pieces(canvas_size)
    return clutter(images, canvas_size, num_pieces, seed=seed)[0], labels


def translated_dataset(
    items,
    labels,
    batch_size,
    canvas_size=60,
    seed=0,
    shuffle=True,
    normalize=True,
    drop_remainder=False,
):
    """Translated canvases drawn afresh every epoch, as a `tf.data.Dataset`.

    `translate` composes each canvas once: a model trained for many epochs
    sees every item at one position and learns the positions by heart. Here
    each pass over the dataset pastes every 28x28 item at a new uniformly
    random position (the augmentation of Mnih et al., whose translated MNIST
    is generated on the fly), so only the 28x28 items stay in memory.

    Args:
        items: uint8 array `(N, 28, 28)`.
        labels: integer array `(N,)`.
        batch_size: int. Batch size.
        canvas_size: int. Side of the square canvas. Defaults to `60`.
        seed: int. Seed of the positions and of the shuffle; the sequence of
            epochs is the same for the same seed. Defaults to `0`.
        shuffle: bool. Shuffle the items each epoch. Defaults to `True`.
        normalize: bool. As in `as_dataset`. Defaults to `True`.
        drop_remainder: bool. As in `as_dataset`. Defaults to `False`.

    Returns:
        A `tf.data.Dataset` of `(canvases, labels)` batches.

    Example:
    >>> images, labels = load("test", sample=True)
    >>> ds = translated_dataset(images, labels, batch_size=32, canvas_size=40)
    >>> first, second = [next(iter(ds))[0] for _ in range(2)]
    >>> tuple(first.shape), bool((first != second).numpy().any())
    ((32, 40, 40, 1), True)
    """
    _check_canvas(canvas_size)

    def paste(item, label, index, seeds):
        del index  # Every canvas holds its own item only.
        return _paste(item, seeds[0], canvas_size), label

    return _fresh_canvases(
        items, labels, batch_size, paste, 1, seed, shuffle, normalize, drop_remainder
    )


def cluttered_dataset(
    items,
    labels,
    batch_size,
    canvas_size=60,
    num_pieces=None,
    piece_size=8,
    seed=0,
    shuffle=True,
    normalize=True,
    drop_remainder=False,
):
    """Cluttered canvases drawn afresh every epoch, as a `tf.data.Dataset`.

    The recipe of `clutter` (the item at a uniformly random position, then
    `num_pieces` crops of `piece_size x piece_size` cut at random from other
    items, placed where they do not overlap the item's 28x28 box and
    combined by pixel-wise maximum), drawn anew on every pass: the item's
    position, the pieces, where they are cut and where they go. `clutter`
    composes each canvas once, and a model trained for many epochs can learn
    the training canvases by heart. The pieces are cut from `items`, never
    from a canvas's own item. The same distribution as `clutter`, not the
    same canvases.

    Args:
        items: uint8 array `(N, 28, 28)`, `N >= 2` when `num_pieces > 0`.
        labels: integer array `(N,)`.
        batch_size: int. Batch size.
        canvas_size: int. Side of the square canvas. Defaults to `60`.
        num_pieces: int or None. Clutter pieces per canvas; defaults to
            `clutter_pieces(canvas_size)` (4, or 8 from 100x100 up).
        piece_size: int. Side of each piece, in `[1, 28]`. Defaults to `8`.
        seed: int. Seed of the canvases and of the shuffle; the sequence of
            epochs is the same for the same seed. Defaults to `0`.
        shuffle: bool. Shuffle the items each epoch. Defaults to `True`.
        normalize: bool. As in `as_dataset`. Defaults to `True`.
        drop_remainder: bool. As in `as_dataset`. Defaults to `False`.

    Returns:
        A `tf.data.Dataset` of `(canvases, labels)` batches.

    Example:
    >>> images, labels = load("test", sample=True)
    >>> ds = cluttered_dataset(images, labels, batch_size=32, canvas_size=44)
    >>> first, second = [next(iter(ds))[0] for _ in range(2)]
    >>> tuple(first.shape), bool((first != second).numpy().any())
    ((32, 44, 44, 1), True)
    """
    import tensorflow as tf

    _check_canvas(canvas_size)
    if num_pieces is None:
        num_pieces = clutter_pieces(canvas_size)
    _check_clutter(num_pieces, piece_size, canvas_size)
    items = _checked_items(items)
    if len(items) < 2 and num_pieces > 0:
        raise ValueError(
            "cluttered_dataset needs at least two items to cut pieces from. "
            f"Received: items.shape={items.shape}"
        )
    sources = tf.convert_to_tensor(items)
    count = len(items)
    span = canvas_size - piece_size + 1
    grid = tf.range(span)

    def paste(item, label, index, seeds):
        canvas, row, col = _paste(item, seeds[0], canvas_size, with_position=True)
        if num_pieces == 0:
            return canvas, label
        # Any item but this one: index + 1 + [0, N - 2], modulo N.
        others = tf.random.stateless_uniform(
            [num_pieces], seeds[1], maxval=count - 1, dtype="int32"
        )
        cuts = tf.random.stateless_uniform(
            [num_pieces, 2], seeds[2], maxval=ITEM_SIZE - piece_size + 1, dtype="int32"
        )
        source = tf.gather(sources, (tf.cast(index, "int32") + 1 + others) % count)
        steps = tf.range(piece_size)
        pieces = tf.gather(source, cuts[:, :1] + steps, axis=1, batch_dims=1)
        pieces = tf.gather(pieces, cuts[:, 1:] + steps, axis=2, batch_dims=1)
        # The top-left corners that keep a piece off the item's box.
        free = (
            (grid[:, None] + piece_size <= row)
            | (grid[:, None] >= row + ITEM_SIZE)
            | (grid[None, :] + piece_size <= col)
            | (grid[None, :] >= col + ITEM_SIZE)
        )
        logits = tf.where(tf.reshape(free, [1, -1]), 0.0, float("-inf"))
        places = tf.random.stateless_categorical(
            logits, num_pieces, seeds[3], dtype="int32"
        )[0]
        # Each piece's pixels at their canvas cells, combined by maximum.
        shape = [num_pieces, piece_size, piece_size]
        rows = (places // span)[:, None, None] + steps[None, :, None]
        cols = (places % span)[:, None, None] + steps[None, None, :]
        cells = tf.stack(
            [tf.broadcast_to(rows, shape), tf.broadcast_to(cols, shape)], axis=-1
        )
        canvas = tf.tensor_scatter_nd_max(
            canvas, tf.reshape(cells, [-1, 2]), tf.reshape(pieces, [-1])
        )
        return tf.ensure_shape(canvas, (canvas_size, canvas_size)), label

    return _fresh_canvases(
        items, labels, batch_size, paste, 4, seed, shuffle, normalize, drop_remainder
    )


def _check_pieces(num_pieces, piece_size):
    if not 0 < piece_size <= ITEM_SIZE:
        raise ValueError(
            f"piece_size must be in [1, {ITEM_SIZE}]. Received: {piece_size=}"
        )
    if num_pieces < 0:
        raise ValueError(f"num_pieces must be >= 0. Received: {num_pieces=}")


def _check_clutter(num_pieces, piece_size, canvas_size):
    """Errors for pieces that do not fit beside the item at every position."""
    _check_pieces(num_pieces, piece_size)
    margin = canvas_size - ITEM_SIZE
    if num_pieces and (margin + 1) // 2 < piece_size:
        raise ValueError(
            f"A {piece_size}x{piece_size} piece does not fit beside a centred "
            f"item on a {canvas_size}x{canvas_size} canvas; canvas_size must "
            f"be at least {ITEM_SIZE + 2 * piece_size - 1}. "
            f"Received: {canvas_size=}"
        )


def _checked_items(items):
    items = np.asarray(items)
    if items.ndim != 3 or items.shape[1:] != (ITEM_SIZE, ITEM_SIZE):
        raise ValueError(
            f"items must have shape (N, {ITEM_SIZE}, {ITEM_SIZE}). "
            f"Received: items.shape={items.shape}"
        )
    return items


def _paste(item, seed, canvas_size, with_position=False):
    """`item` padded to the canvas at a random position (and the position)."""
    import tensorflow as tf

    margin = canvas_size - ITEM_SIZE
    row, col = tf.unstack(
        tf.random.stateless_uniform([2], seed, maxval=margin + 1, dtype="int32")
    )
    canvas = tf.pad(item, [[row, margin - row], [col, margin - col]])
    canvas = tf.ensure_shape(canvas, (canvas_size, canvas_size))
    return (canvas, row, col) if with_position else canvas


def _fresh_canvases(
    items,
    labels,
    batch_size,
    paste,
    num_seeds,
    seed,
    shuffle,
    normalize,
    drop_remainder,
):
    """Batches of `paste(item, label, index, seeds)` drawn anew each epoch.

    `seeds` holds `num_seeds` stateless seeds per item and epoch.
    """
    import tensorflow as tf

    items = _checked_items(items)
    ds = _examples(items, labels, shuffle, seed, with_index=True)
    # Fresh seeds per item and epoch: rerandomized on each iteration.
    seeds = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True)
    seeds = seeds.batch(2 * num_seeds).map(lambda s: tf.reshape(s, [num_seeds, 2]))
    ds = tf.data.Dataset.zip(ds, seeds).map(
        lambda example, s: paste(*example, s), num_parallel_calls=tf.data.AUTOTUNE
    )
    ds = ds.batch(batch_size, drop_remainder=drop_remainder)
    if normalize:
        ds = ds.map(_scale, num_parallel_calls=tf.data.AUTOTUNE)
    return pipeline.finish(ds)


def _examples(images, labels, shuffle, seed, with_index=False):
    """One `(image, label)` element per image, shuffled each epoch or not.

    With `with_index`, `(image, label, index)`: the image's index in `images`.
    """
    import tensorflow as tf

    images = np.asarray(images)
    labels = np.asarray(labels).astype("int32")
    if len(images) != len(labels):
        raise ValueError(
            f"images and labels differ in length: {len(images)} vs {len(labels)}."
        )
    columns = (images, labels)
    if with_index:
        columns += (np.arange(len(images), dtype="int32"),)
    ds = tf.data.Dataset.from_tensor_slices(columns)
    if shuffle:
        ds = ds.shuffle(len(images), seed=seed, reshuffle_each_iteration=True)
    return ds


def _scale(x, y):
    import tensorflow as tf

    return tf.cast(x, "float32")[..., None] / 255.0, y


def as_dataset(
    images,
    labels,
    batch_size,
    shuffle=True,
    seed=0,
    normalize=True,
    drop_remainder=False,
):
    """Wraps image and label arrays in a batched `tf.data.Dataset`.

    Args:
        images: uint8 array `(N, H, W)`.
        labels: integer array `(N,)`.
        batch_size: int. Batch size; the last batch may be smaller unless
            `drop_remainder`.
        shuffle: bool. Shuffle the whole set each epoch. Defaults to `True`.
        seed: int. Shuffle seed. Defaults to `0`.
        normalize: bool. Yield float32 images in `[0, 1]` with a trailing
            channel axis `(H, W, 1)`; otherwise the raw uint8 `(H, W)`.
            Defaults to `True`.
        drop_remainder: bool. Skip the last partial batch, so every batch
            has one static shape (TPUs). Defaults to `False`.

    Returns:
        A `tf.data.Dataset` of `(images, labels)` batches, labels int32.

    Example:
    >>> images, labels = load("test", sample=True)
    >>> ds = as_dataset(images, labels, batch_size=32)
    >>> next(iter(ds))[0].shape
    TensorShape([32, 28, 28, 1])
    """
    import tensorflow as tf

    ds = _examples(images, labels, shuffle, seed)
    ds = ds.batch(batch_size, drop_remainder=drop_remainder)
    if normalize:  # per batch, so the set stays uint8 in memory
        ds = ds.map(_scale, num_parallel_calls=tf.data.AUTOTUNE)
    return pipeline.finish(ds)
