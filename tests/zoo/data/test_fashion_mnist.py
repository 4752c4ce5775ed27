import gzip
import os
import struct

import numpy as np
import pytest

from zoo.data import fashion_mnist

pytestmark = pytest.mark.tensorflow_only

REAL = fashion_mnist.DEFAULT_PATH
HAS_REAL = os.path.isfile(os.path.join(REAL, "t10k-labels-idx1-ubyte.gz"))


def idx_bytes(array, type_code):
    """IDX encoding written out by hand from the format description."""
    header = bytes([0, 0, type_code, array.ndim])
    header += b"".join(struct.pack(">I", d) for d in array.shape)
    big_endian = array.astype(array.dtype.newbyteorder(">"))
    return header + big_endian.tobytes()


@pytest.mark.parametrize("compress", [False, True])
def test_read_idx_parses_hand_written_uint8_file(tmp_path, compress):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(3, 4, 5), dtype=np.uint8)
    data = idx_bytes(images, 0x08)
    path = tmp_path / ("x.idx.gz" if compress else "x.idx")
    path.write_bytes(gzip.compress(data) if compress else data)
    result = fashion_mnist.read_idx(path)
    assert result.dtype == np.uint8
    np.testing.assert_array_equal(result, images)


def test_read_idx_big_endian_int32(tmp_path):
    values = np.array([[1, -2], [70000, 2**31 - 1]], dtype=np.int32)
    path = tmp_path / "ints.idx"
    path.write_bytes(idx_bytes(values, 0x0C))
    result = fashion_mnist.read_idx(path)
    np.testing.assert_array_equal(result, values)
    assert result.dtype.byteorder in ("=", "<", "|")  # native, usable


def test_write_idx_matches_hand_encoding_and_round_trips(tmp_path):
    labels = np.arange(10, dtype=np.uint8)
    fashion_mnist.write_idx(tmp_path / "l.idx", labels)
    assert (tmp_path / "l.idx").read_bytes() == idx_bytes(labels, 0x08)
    fashion_mnist.write_idx(tmp_path / "a.gz", labels)
    fashion_mnist.write_idx(tmp_path / "b.gz", labels)
    assert (tmp_path / "a.gz").read_bytes() == (tmp_path / "b.gz").read_bytes()
    np.testing.assert_array_equal(fashion_mnist.read_idx(tmp_path / "a.gz"), labels)


def test_corrupt_magic_number_raises(tmp_path):
    data = bytearray(idx_bytes(np.zeros((2, 2), np.uint8), 0x08))
    data[0] = 0x1F  # not zero
    (tmp_path / "bad.idx").write_bytes(bytes(data))
    with pytest.raises(ValueError, match="magic"):
        fashion_mnist.read_idx(tmp_path / "bad.idx")
    data[0] = 0
    data[2] = 0x42  # unknown type code
    (tmp_path / "bad2.idx").write_bytes(bytes(data))
    with pytest.raises(ValueError, match="type code"):
        fashion_mnist.read_idx(tmp_path / "bad2.idx")


def test_truncated_payload_raises(tmp_path):
    data = idx_bytes(np.zeros((4, 28, 28), np.uint8), 0x08)
    (tmp_path / "short.idx").write_bytes(data[:-5])
    with pytest.raises(ValueError, match="corrupt"):
        fashion_mnist.read_idx(tmp_path / "short.idx")


@pytest.mark.parametrize("split,count", [("train", 2000), ("test", 1000)])
def test_sample_loads_balanced(split, count):
    images, labels = fashion_mnist.load_arrays(split, path=fashion_mnist.sample_path())
    assert images.shape == (count, 28, 28) and images.dtype == np.uint8
    assert labels.shape == (count,) and labels.dtype == np.uint8
    assert labels.min() == 0 and labels.max() == len(fashion_mnist.CLASS_NAMES) - 1
    np.testing.assert_array_equal(np.bincount(labels), [count // 10] * 10)
    assert images.max() > 200  # real pictures, not blanks
    assert len(fashion_mnist.CLASS_NAMES) == 10


@pytest.mark.skipif(not HAS_REAL, reason="dataset-fashion-mnist not installed")
def test_real_debian_files_and_sample_provenance():
    train_images, train_labels = fashion_mnist.load_arrays("train")
    test_images, test_labels = fashion_mnist.load_arrays("test")
    assert train_images.shape == (60000, 28, 28)
    assert test_images.shape == (10000, 28, 28)
    assert train_labels.shape == (60000,) and test_labels.shape == (10000,)
    np.testing.assert_array_equal(np.bincount(test_labels), [1000] * 10)
    # The shipped test sample is the first 100 test images of every class.
    sample, sample_labels = fashion_mnist.load_arrays(
        "test", path=fashion_mnist.sample_path()
    )
    keep = sorted(i for c in range(10) for i in np.flatnonzero(test_labels == c)[:100])
    np.testing.assert_array_equal(sample, test_images[keep])
    np.testing.assert_array_equal(sample_labels, test_labels[keep])


def test_missing_data_error_names_debian_package(tmp_path, monkeypatch):
    monkeypatch.setattr(fashion_mnist, "DEFAULT_PATH", str(tmp_path / "nowhere"))
    monkeypatch.setattr(fashion_mnist, "_keras_fallback", lambda split: None)
    with pytest.raises(FileNotFoundError) as info:
        fashion_mnist.load_arrays("test")
    assert "dataset-fashion-mnist" in str(info.value)
    assert str(tmp_path / "nowhere") in str(info.value)
    with pytest.raises(FileNotFoundError, match=str(tmp_path)):
        fashion_mnist.load_arrays("test", path=tmp_path)


def test_keras_fallback_used_when_no_debian_files(tmp_path, monkeypatch):
    import keras

    fake_train = (np.ones((3, 28, 28), "uint8"), np.array([1, 2, 3], "uint8"))
    fake_test = (np.zeros((2, 28, 28), "uint8"), np.array([4, 5], "uint8"))
    monkeypatch.setattr(fashion_mnist, "DEFAULT_PATH", str(tmp_path / "nowhere"))
    monkeypatch.setattr(
        keras.datasets.fashion_mnist, "load_data", lambda: (fake_train, fake_test)
    )
    images, labels = fashion_mnist.load_arrays("test")
    np.testing.assert_array_equal(labels, [4, 5])
    assert images.shape == (2, 28, 28)


def distinct_items(n):
    """Item i is a 28x28 block of value i + 1, so every pixel names its source."""
    return np.repeat(np.arange(1, n + 1, dtype=np.uint8), 28 * 28).reshape(n, 28, 28)


def test_translate_places_exact_item_at_returned_position():
    rng = np.random.default_rng(1)
    images = rng.integers(1, 256, size=(6, 28, 28), dtype=np.uint8)
    canvas, positions = fashion_mnist.translate(images, canvas_size=45, seed=3)
    assert canvas.shape == (6, 45, 45) and canvas.dtype == np.uint8
    assert positions.shape == (6, 2)
    assert positions.min() >= 0 and positions.max() <= 45 - 28
    for i, (r, c) in enumerate(positions):
        np.testing.assert_array_equal(canvas[i, r : r + 28, c : c + 28], images[i])
        # Nothing else on the canvas.
        assert int(canvas[i].astype(int).sum()) == int(images[i].astype(int).sum())
    assert len({tuple(p) for p in positions}) > 1  # positions actually vary
    again, positions_again = fashion_mnist.translate(images, canvas_size=45, seed=3)
    np.testing.assert_array_equal(again, canvas)
    np.testing.assert_array_equal(positions_again, positions)


def test_clutter_keeps_item_intact_and_uses_other_items():
    images = distinct_items(5)
    canvas, positions = fashion_mnist.clutter(
        images, canvas_size=60, num_pieces=4, piece_size=8, seed=0
    )
    assert canvas.shape == (5, 60, 60)
    _, translated_positions = fashion_mnist.translate(images, 60, seed=0)
    np.testing.assert_array_equal(positions, translated_positions)
    for i, (r, c) in enumerate(positions):
        np.testing.assert_array_equal(canvas[i, r : r + 28, c : c + 28], images[i])
        outside = canvas[i].copy()
        outside[r : r + 28, c : c + 28] = 0
        values = set(np.unique(outside)) - {0}
        assert values, "no clutter was placed"
        assert i + 1 not in values  # pieces come from *other* items
        assert values <= set(range(1, 6))
        clutter_pixels = np.count_nonzero(outside)
        assert 64 <= clutter_pixels <= 4 * 64


def test_clutter_deterministic_per_seed():
    rng = np.random.default_rng(2)
    images = rng.integers(0, 256, size=(8, 28, 28), dtype=np.uint8)
    a, _ = fashion_mnist.clutter(images, seed=5)
    b, _ = fashion_mnist.clutter(images, seed=5)
    c, _ = fashion_mnist.clutter(images, seed=6)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_clutter_from_blank_sources_equals_translate():
    rng = np.random.default_rng(4)
    images = rng.integers(0, 256, size=(4, 28, 28), dtype=np.uint8)
    blank = np.zeros((3, 28, 28), np.uint8)
    cluttered, _ = fashion_mnist.clutter(images, seed=9, source_images=blank)
    translated, _ = fashion_mnist.translate(images, seed=9)
    np.testing.assert_array_equal(cluttered, translated)


def test_clutter_without_room_raises():
    with pytest.raises(ValueError, match="room"):
        fashion_mnist.clutter(distinct_items(2), canvas_size=30, piece_size=8)


def test_load_variants_on_sample():
    images, labels = fashion_mnist.load("test", sample=True)
    assert images.shape == (1000, 28, 28)
    centered, _ = fashion_mnist.load("test", canvas_size=40, sample=True)
    np.testing.assert_array_equal(centered[:, 6:34, 6:34], images)
    assert centered[:, :6].max() == 0
    translated, t_labels = fashion_mnist.load("test", "translated", sample=True)
    assert translated.shape == (1000, 60, 60)
    np.testing.assert_array_equal(t_labels, labels)
    # Every translated canvas holds exactly the pixels of its item.
    np.testing.assert_array_equal(
        translated.reshape(1000, -1).astype(int).sum(1),
        images.reshape(1000, -1).astype(int).sum(1),
    )
    cluttered, _ = fashion_mnist.load("test", "cluttered", canvas_size=100, sample=True)
    assert cluttered.shape == (1000, 100, 100)
    assert (
        cluttered.reshape(1000, -1).astype(int).sum(1)
        >= images.reshape(1000, -1).astype(int).sum(1)
    ).all()
    with pytest.raises(ValueError, match="variant"):
        fashion_mnist.load("test", "rotated", sample=True)


def test_as_dataset_batches_and_scales():
    images, labels = fashion_mnist.load("test", sample=True)
    ds = fashion_mnist.as_dataset(images[:100], labels[:100], batch_size=32, seed=1)
    batches = list(ds)
    assert [int(b[0].shape[0]) for b in batches] == [32, 32, 32, 4]
    x, y = batches[0]
    assert tuple(x.shape[1:]) == (28, 28, 1) and x.dtype.name == "float32"
    assert float(np.max(x)) <= 1.0 and float(np.min(x)) >= 0.0
    all_labels = np.concatenate([b[1].numpy() for b in batches])
    assert sorted(all_labels) == sorted(labels[:100])  # shuffled, nothing lost
    # The first element of each batch matches its own image (pairs kept).
    index = {images[i].tobytes(): labels[i] for i in range(100)}
    for xb, yb in batches:
        raw = np.round(xb.numpy()[0, ..., 0] * 255).astype(np.uint8)
        assert index[raw.tobytes()] == yb.numpy()[0]


def test_translated_dataset_draws_new_positions_each_epoch():
    images, labels = fashion_mnist.load("test", sample=True)
    items, item_labels = images[:50], labels[:50]
    ds = fashion_mnist.translated_dataset(
        items,
        item_labels,
        batch_size=50,
        canvas_size=45,
        seed=3,
        shuffle=False,
        normalize=False,
    )
    epochs = [next(iter(ds)) for _ in range(3)]
    for canvases, batch_labels in epochs:
        canvases = canvases.numpy()
        assert canvases.shape == (50, 45, 45) and canvases.dtype == np.uint8
        np.testing.assert_array_equal(batch_labels, item_labels)
        for canvas, item in zip(canvases, items):
            # The whole item, once, on an otherwise empty canvas.
            rows, cols = np.nonzero(canvas)
            r0 = int(rows.min()) - int(np.nonzero(item)[0].min())
            c0 = int(cols.min()) - int(np.nonzero(item)[1].min())
            assert 0 <= r0 <= 17 and 0 <= c0 <= 17
            np.testing.assert_array_equal(canvas[r0 : r0 + 28, c0 : c0 + 28], item)
            assert canvas.astype(int).sum() == item.astype(int).sum()
    assert not np.array_equal(epochs[0][0], epochs[1][0])  # fresh positions
    again = fashion_mnist.translated_dataset(
        items, item_labels, 50, 45, seed=3, shuffle=False, normalize=False
    )
    np.testing.assert_array_equal(next(iter(again))[0], epochs[0][0])  # seeded
    x, _ = next(iter(fashion_mnist.translated_dataset(items, item_labels, 8)))
    assert tuple(x.shape) == (8, 60, 60, 1) and x.dtype.name == "float32"
    with pytest.raises(ValueError, match="items must have shape"):
        fashion_mnist.translated_dataset(np.zeros((2, 60, 60), "uint8"), [0, 1], 2)
    with pytest.raises(ValueError, match="canvas_size"):
        fashion_mnist.translated_dataset(items, item_labels, 8, canvas_size=20)


def test_cluttered_dataset_draws_new_clutter_each_epoch_beside_the_intact_item():
    # Item k is filled with the value k + 1, so a pixel's value says which
    # item it came from.
    count, size, pieces = 40, 60, 4
    items = np.repeat(np.arange(1, count + 1, dtype="uint8"), 28 * 28)
    items = items.reshape(count, 28, 28)
    labels = np.arange(count) % 10
    ds = fashion_mnist.cluttered_dataset(
        items, labels, count, size, seed=5, shuffle=False, normalize=False
    )
    epochs = [next(iter(ds))[0].numpy() for _ in range(2)]
    for canvases in epochs:
        assert canvases.shape == (count, size, size) and canvases.dtype == np.uint8
        for k, canvas in enumerate(canvases):
            rows, cols = np.nonzero(canvas == k + 1)
            r0, c0 = rows.min(), cols.min()
            assert len(rows) == 28 * 28  # the whole item, and nowhere else
            assert (rows.max() - r0, cols.max() - c0) == (27, 27)
            outside = canvas.copy()
            outside[r0 : r0 + 28, c0 : c0 + 28] = 0
            # Up to 4 pieces of 8x8 from other items (overlaps take the max).
            assert 0 < np.count_nonzero(outside) <= pieces * 64
            assert set(np.unique(outside)) <= set(range(count + 1)) - {k + 1}
    assert not np.array_equal(epochs[0], epochs[1])  # fresh clutter
    again = fashion_mnist.cluttered_dataset(
        items, labels, count, size, seed=5, shuffle=False, normalize=False
    )
    np.testing.assert_array_equal(next(iter(again))[0], epochs[0])  # seeded
    x, y = next(iter(fashion_mnist.cluttered_dataset(items, labels, 8, 100)))
    assert tuple(x.shape) == (8, 100, 100, 1) and x.dtype.name == "float32"
    assert y.dtype.name == "int32"
    empty = fashion_mnist.cluttered_dataset(
        items, labels, count, 40, num_pieces=0, shuffle=False, normalize=False
    )  # no pieces: a translated canvas
    assert np.count_nonzero(next(iter(empty))[0].numpy()) == count * 28 * 28


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"items": np.zeros((2, 60, 60), "uint8")}, "items must have shape"),
        ({"items": np.zeros((1, 28, 28), "uint8")}, "at least two items"),
        ({"canvas_size": 40}, "canvas_size must be at least 43"),
        ({"canvas_size": 20}, "canvas_size must be at least 28"),
        ({"piece_size": 0}, "piece_size"),
        ({"num_pieces": -1}, "num_pieces"),
    ],
)
def test_cluttered_dataset_refuses_bad_arguments(kwargs, match):
    arguments = {"items": np.zeros((4, 28, 28), "uint8"), **kwargs}
    labels = np.zeros(len(arguments["items"]), "int32")
    with pytest.raises(ValueError, match=match):
        fashion_mnist.cluttered_dataset(labels=labels, batch_size=2, **arguments)
