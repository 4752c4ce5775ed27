"""Translation pairs as arrays of token ids: written with TensorFlow, read without.

A translator trains from prepared inputs on any backend, but tokenizing
text needs TensorFlow (the WordPiece tokenizers run in `tf.data`). So the
preprocessor's work is done once, where TensorFlow is installed, and kept
as a NumPy `.npz` file; a machine with only Keras, JAX (or PyTorch) and
NumPy (a lent GPU) trains from it:

    python -m zoo.translation.arrays --out bible_arrays.npz   # with TensorFlow

- `write_arrays(path, preprocessor, splits)`: each split's pairs through
  the preprocessor, padded to its full lengths: `<split>_encoder_token_ids`,
  `<split>_decoder_token_ids`, `<split>_labels` (int32) and
  `<split>_sample_weight` (float32), with the `vocabulary` and `pad_id`.
- `read_arrays(path)`: those arrays, with NumPy alone.
- `ArrayBatches(arrays, batch_size)`: `(x, y, sample_weight)` batches
  of one split that `fit` takes as they are (a `keras.utils.PyDataset`):
  in a seeded order reshuffled each epoch, each batch cut to its longest
  row, source or target (rounded up to `pad_to_multiple`, so few shapes
  compile).

Example:
>>> import tempfile, os
>>> from zoo.translation import TranslationPreprocessor
>>> vocab = ["[PAD]", "[UNK]", "[START]", "[END]", "in", "the", "en", "el"]
>>> pre = TranslationPreprocessor(vocab, vocab, 8, 8)
>>> path = os.path.join(tempfile.mkdtemp(), "pairs.npz")
>>> write_arrays(path, pre, {"train": [("in the", "en el"), ("the", "el")]})
>>> arrays = read_arrays(path)
>>> arrays["train_encoder_token_ids"].tolist()
[[4, 5, 3, 0, 0, 0, 0, 0], [5, 3, 0, 0, 0, 0, 0, 0]]
>>> x, y, w = ArrayBatches(arrays, 2, shuffle=False, pad_to_multiple=4)[0]
>>> x["encoder_token_ids"].tolist()
[[4, 5, 3, 0], [5, 3, 0, 0]]
>>> x["decoder_token_ids"].tolist(), y.tolist(), w.tolist()
([[2, 6, 7, 0], [2, 7, 0, 0]], [[6, 7, 3, 0], [7, 3, 0, 0]], \
[[1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 0.0, 0.0]])
"""

import argparse
import math

import keras
import numpy as np

#: The arrays of one split, each prefixed with `<split>_` in the file.
FIELDS = ("encoder_token_ids", "decoder_token_ids", "labels", "sample_weight")


def prepared_pairs(preprocessor, pairs, chunk=4096):
    """`{field: array}` of `pairs` through `preprocessor`, padded to full length.

    Needs TensorFlow (the tokenizers). Pairs longer than the preprocessor's
    lengths are cut, as in training.
    """
    trim, preprocessor.trim_padding = preprocessor.trim_padding, False
    try:
        parts = {name: [] for name in FIELDS}
        for begin in range(0, len(pairs), chunk):
            block = pairs[begin : begin + chunk]
            x, y, w = preprocessor([p[0] for p in block], [p[1] for p in block])
            values = (x["encoder_token_ids"], x["decoder_token_ids"], y, w)
            for name, value in zip(FIELDS, values):
                parts[name].append(np.asarray(value))
    finally:
        preprocessor.trim_padding = trim
    dtypes = ("int32", "int32", "int32", "float32")
    return {
        name: np.concatenate(parts[name]).astype(dtype)
        for name, dtype in zip(FIELDS, dtypes)
    }


def write_arrays(path, preprocessor, splits):
    """Writes the prepared arrays of `splits` (`{name: pairs}`) to `path` (.npz)."""
    arrays = {
        "vocabulary": np.array(preprocessor.target_tokenizer.get_vocabulary()),
        "pad_id": np.array(preprocessor.pad_id, "int32"),
    }
    for split, pairs in splits.items():
        for name, value in prepared_pairs(preprocessor, list(pairs)).items():
            arrays[f"{split}_{name}"] = value
    np.savez_compressed(path, **arrays)


def read_arrays(path):
    """The arrays `write_arrays` wrote, as a dict (NumPy only)."""
    with np.load(path) as data:
        return {name: data[name] for name in data.files}


class ArrayBatches(keras.utils.PyDataset):
    """`(x, y, sample_weight)` batches of one split of `read_arrays`.

    Args:
        arrays: dict, as `read_arrays` returns it.
        batch_size: int. Pairs per batch; the last partial batch is dropped.
        split: str. The split. Defaults to `"train"`.
        shuffle: bool. A new seeded order each epoch. Defaults to `True`.
        seed: int. Defaults to `0`.
        pad_to_multiple: int. Each batch is cut to its longest row (source
            or target; both sides get one width) rounded up to this (`None`: kept at full length, one shape). Defaults to
            `8`.

    Example:
    >>> ids = np.array([[4, 3, 0, 0], [4, 4, 3, 0], [5, 3, 0, 0]], "int32")
    >>> arrays = {f"train_{name}": ids for name in FIELDS}
    >>> batches = ArrayBatches(arrays, 2, seed=0, pad_to_multiple=2)
    >>> len(batches), batches[0][0]["encoder_token_ids"].shape  # 1 pair left over
    (1, (2, 2))
    """

    def __init__(
        self,
        arrays,
        batch_size,
        split="train",
        shuffle=True,
        seed=0,
        pad_to_multiple=8,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.fields = {name: arrays[f"{split}_{name}"] for name in FIELDS}
        self.pad_id = int(arrays.get("pad_id", 0))
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.pad_to_multiple = pad_to_multiple
        self.rng = np.random.default_rng(seed)
        self.rows = len(self.fields["labels"])
        self.order = self._new_order()

    def _new_order(self):
        rows = np.arange(self.rows)
        return self.rng.permutation(rows) if self.shuffle else rows

    def __len__(self):
        return self.rows // self.batch_size

    def _cut(self, *arrays):
        if self.pad_to_multiple is None:
            return arrays
        used = max(int(np.max(np.sum(a != self.pad_id, axis=1))) for a in arrays[:2])
        width = math.ceil(max(used, 1) / self.pad_to_multiple) * self.pad_to_multiple
        return tuple(a[:, :width] for a in arrays)

    def __getitem__(self, index):
        rows = self.order[index * self.batch_size : (index + 1) * self.batch_size]
        encoder, decoder, labels, weights = (self.fields[n][rows] for n in FIELDS)
        encoder, decoder, labels, weights = self._cut(encoder, decoder, labels, weights)
        x = {"encoder_token_ids": encoder, "decoder_token_ids": decoder}
        return x, labels, weights

    def on_epoch_end(self):
        """Draws the next epoch's order (when shuffling).

        Example:
        >>> arrays = {f"train_{name}": np.ones((6, 2), "int32") for name in FIELDS}
        >>> batches = ArrayBatches(arrays, 3, seed=1)
        >>> first = batches.order.tolist()
        >>> batches.on_epoch_end()
        >>> sorted(batches.order.tolist()) == sorted(first) == list(range(6))
        True
        """
        self.order = self._new_order()


def main(argv=None):
    """`python -m zoo.translation.arrays`: a preset's arrays of the Bible pairs."""
    from zoo.base.task import Task
    from zoo.translation.data import add_data_arguments, load_splits

    parser = argparse.ArgumentParser(
        prog="python -m zoo.translation.arrays", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--preset",
        default="transformer_bible_en_es",
        help="the preset whose preprocessor (vocabulary, lengths) writes the ids",
    )
    parser.add_argument("--out", required=True, help="the .npz file to write")
    add_data_arguments(parser)
    args = parser.parse_args(argv)
    preprocessor = Task.from_preset(args.preset, load_weights=False).preprocessor
    splits = dict(zip(("train", "validation", "test"), load_splits(args)))
    write_arrays(args.out, preprocessor, splits)
    sizes = ", ".join(f"{name} {len(pairs)}" for name, pairs in splits.items())
    print(f"wrote {args.out}: {sizes} pairs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
