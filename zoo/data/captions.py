"""Caption datasets in Karpathy's split format (Flickr8k, Flickr30k, COCO).

Karpathy and Fei-Fei's `dataset_flickr8k.json`, `dataset_flickr30k.json`
and `dataset_coco.json` hold one entry per image:

```
{"dataset": "flickr8k",
 "images": [{"filename": "1000268201_693b08cb0e.jpg", "imgid": 0,
             "split": "train",            # "train", "val", "test", "restval"
             "filepath": "val2014",       # COCO only: subfolder of the image
             "sentids": [0, 1, 2, 3, 4],
             "sentences": [{"raw": "A child in a pink dress ...",
                            "tokens": ["a", "child", ...],
                            "imgid": 0, "sentid": 0}, ...]}, ...]}
```

`load_karpathy` reads that file with the images folder next to it (or one
you name) and returns one `CaptionedImage` per image of a split; COCO's
`"restval"` images count as training images by default, as in the usual
Karpathy split. `load_images` decodes and resizes the files, and
`as_dataset` streams `(image, caption)` pairs for `ShowAttendTell.fit`.

Reference:
    Karpathy and Fei-Fei, 2015, "Deep Visual-Semantic Alignments for
    Generating Image Descriptions" (the splits).
    Xu et al., 2015, "Show, Attend and Tell" (evaluated on these splits).
"""

import dataclasses
import json
import os

import numpy as np

SPLITS = ("train", "val", "test", "restval")


@dataclasses.dataclass(frozen=True)
class CaptionedImage:
    """One image and its reference captions.

    Attributes:
        path: str. The image file.
        captions: tuple of str. The raw captions.
        split: str. Its split in the file (`"train"`, `"val"`, `"test"` or
            `"restval"`).
        image_id: int. Its `imgid` (or its COCO `cocoid` when there is no
            `imgid`).

    Example (what `load_karpathy` reads from a Karpathy split file):
    >>> import json, tempfile
    >>> folder = tempfile.TemporaryDirectory()
    >>> path = os.path.join(folder.name, "dataset_tiny.json")
    >>> sentences = [{"raw": "A dog  runs ."}, {"tokens": ["a", "dog"]}]
    >>> images = [{"filename": "dog.jpg", "split": "restval", "imgid": 7,
    ...            "sentences": sentences}]
    >>> with open(path, "w") as f:
    ...     json.dump({"images": images}, f)
    >>> (record,) = load_karpathy(path)
    >>> os.path.basename(record.path), record.captions, record.split, record.image_id
    ('dog.jpg', ('A dog runs .', 'a dog'), 'train', 7)
    >>> pairs([record])[1]  # one (image, caption) pair per caption
    ['A dog runs .', 'a dog']
    >>> folder.cleanup()
    """

    path: str
    captions: tuple
    split: str
    image_id: int


def _caption(sentence):
    raw = sentence.get("raw")
    if raw:
        return " ".join(str(raw).strip().split())
    return " ".join(sentence.get("tokens", []))


def load_karpathy(json_path, images_dir=None, split="train", restval_as_train=True):
    """Reads one split of a Karpathy `dataset_*.json`.

    Args:
        json_path: str. The JSON file.
        images_dir: str or None. Folder of the images (COCO: the folder that
            holds `train2014/` and `val2014/`). Defaults to the JSON's folder.
        split: str or None. `"train"`, `"val"`, `"test"` or `"restval"`, or
            `None` for every image. Defaults to `"train"`.
        restval_as_train: bool. Count `"restval"` images as `"train"`.
            Defaults to `True`.

    Returns:
        A list of `CaptionedImage`, in file order.

    Raises:
        ValueError: when the file is not in the Karpathy format.

    Example:
    >>> records = load_karpathy("dataset_flickr8k.json", "Flicker8k_Dataset")  # doctest: +SKIP
    >>> len(records), records[0].captions[0]  # doctest: +SKIP
    (6000, 'A child in a pink dress is climbing up a set of stairs in an entry way .')
    """
    if split is not None and split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS} or None. Received: {split=}")
    with open(json_path, encoding="utf-8") as f:
        data = json.load(f)
    if not isinstance(data, dict) or not isinstance(data.get("images"), list):
        raise ValueError(
            f"{json_path} is not a Karpathy split file: expected a JSON object "
            'with an "images" list.'
        )
    if images_dir is None:
        images_dir = os.path.dirname(os.path.abspath(json_path))
    records = []
    for number, entry in enumerate(data["images"]):
        try:
            filename, entry_split = entry["filename"], entry["split"]
            sentences = entry["sentences"]
        except (KeyError, TypeError) as e:
            raise ValueError(
                f"{json_path}: image entry {number} lacks {e} (needs filename, "
                "split and sentences)."
            ) from None
        if entry_split == "restval" and restval_as_train:
            entry_split = "train"
        if split is not None and entry_split != split:
            continue
        path = os.path.join(images_dir, entry.get("filepath", ""), filename)
        records.append(
            CaptionedImage(
                path=path,
                captions=tuple(_caption(s) for s in sentences),
                split=entry_split,
                image_id=int(entry.get("imgid", entry.get("cocoid", number))),
            )
        )
    return records


def pairs(records):
    """Flattens records into `(paths, captions)`: one pair per caption."""
    paths = [r.path for r in records for _ in r.captions]
    captions = [c for r in records for c in r.captions]
    return paths, captions


def _decode(path, image_size, channels):
    import tensorflow as tf

    image = tf.io.decode_image(
        tf.io.read_file(path), channels=channels, expand_animations=False
    )
    image = tf.image.resize(image, image_size)
    return tf.cast(tf.clip_by_value(tf.round(image), 0, 255), "uint8")


def load_images(paths, image_size=(224, 224), channels=3):
    """Decodes and resizes image files into one uint8 array.

    Args:
        paths: list of str. JPEG, PNG, GIF or BMP files.
        image_size: `(height, width)`. Defaults to `(224, 224)`.
        channels: int. Defaults to `3`.

    Returns:
        uint8 array `(N, height, width, channels)`.
    """
    missing = [p for p in paths if not os.path.isfile(p)]
    if missing:
        raise FileNotFoundError(
            f"{len(missing)} image files are missing, e.g. {missing[0]}: check "
            "`images_dir`."
        )
    size = tuple(image_size)
    if not paths:
        return np.zeros((0, *size, channels), "uint8")
    return np.stack([_decode(p, size, channels).numpy() for p in paths])


def as_dataset(records, image_size=(224, 224), channels=3, shuffle=True, seed=0):
    """Unbatched `tf.data` of `(uint8 image, caption string)` pairs.

    Images are read lazily, one pair per reference caption.

    Args:
        records: list of `CaptionedImage`.
        image_size: `(height, width)`. Defaults to `(224, 224)`.
        channels: int. Defaults to `3`.
        shuffle: bool. Shuffle the pairs each epoch. Defaults to `True`.
        seed: int. Defaults to `0`.

    Returns:
        A `tf.data.Dataset`; batch it (or let `ShowAttendTell.fit` do it).
    """
    import tensorflow as tf

    paths, captions = pairs(records)
    ds = tf.data.Dataset.from_tensor_slices((paths, captions))
    if shuffle:
        ds = ds.shuffle(len(paths), seed=seed, reshuffle_each_iteration=True)
    size = tuple(image_size)
    return ds.map(
        lambda path, caption: (_decode(path, size, channels), caption),
        num_parallel_calls=tf.data.AUTOTUNE,
    )
