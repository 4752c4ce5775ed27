"""Fashion-MNIST scenes: layouts, the caption grammar, boxes and splits."""

import numpy as np
import pytest

from zoo.data import fashion_mnist, scenes

ITEM = fashion_mnist.ITEM_SIZE


@pytest.fixture(scope="module")
def sample_test():
    return scenes.load("test", num_scenes=60, sample=True)


def box(top, left):
    return (top, left, top + ITEM, left + ITEM)


@pytest.mark.parametrize(
    "labels, boxes, expected",
    [
        ([7], [box(3, 40)], "a sneaker"),
        ([8, 7], [box(0, 50), box(10, 2)], "a sneaker to the left of a bag"),
        ([3, 6], [box(0, 10), box(50, 20)], "a dress above a shirt"),
        ([3, 6], [box(50, 10), box(0, 20)], "a dress below a shirt"),
        (
            [4, 3, 6],
            [box(50, 40), box(0, 0), box(50, 5)],
            "a dress above a shirt and a coat",
        ),
        (
            [8, 4, 0],
            [box(30, 0), box(30, 50), box(0, 12)],
            "a bag below a top and to the left of a coat",
        ),
    ],
)
def test_caption_grammar(labels, boxes, expected):
    text, order = scenes.caption(labels, boxes)
    assert text == expected
    assert sorted(order) == list(range(len(labels)))
    # The first named item is the leftmost one.
    assert boxes[order[0]][1] == min(b[1] for b in boxes)


def test_caption_rejects_empty_scene():
    with pytest.raises(ValueError, match="1 to 3 items"):
        scenes.caption([], [])


def test_scenes_paste_real_items_inside_their_boxes(sample_test):
    images, _ = fashion_mnist.load_arrays("test", fashion_mnist.sample_path())
    item_set = {img.tobytes() for img in images}
    for canvas, labels, boxes in zip(
        sample_test["images"], sample_test["labels"], sample_test["boxes"]
    ):
        covered = np.zeros(canvas.shape, bool)
        for label, (top, left, bottom, right) in zip(labels, boxes):
            if label < 0:
                continue
            assert bottom - top == ITEM and right - left == ITEM
            assert 0 <= top and bottom <= 84 and 0 <= left and right <= 84
            # Every box holds an unmodified test image: items never overlap.
            assert canvas[top:bottom, left:right].tobytes() in item_set
            assert not covered[top:bottom, left:right].any()
            covered[top:bottom, left:right] = True
        assert not canvas[~covered].any()


def test_captions_name_the_items_in_box_order(sample_test):
    for text, labels, boxes in zip(
        sample_test["captions"], sample_test["labels"], sample_test["boxes"]
    ):
        words = text.split()
        nouns = [w for w in words if w in scenes.NOUNS]
        named = [scenes.NOUNS[k] for k in labels if k >= 0]
        assert nouns == named
        assert len(set(named)) == len(named)  # distinct classes
        real = [b for b, k in zip(boxes, labels) if k >= 0]
        assert scenes.caption([scenes.NOUNS.index(n) for n in named], real)[0] == text


def test_scenes_have_one_to_three_items_and_every_relation(sample_test):
    counts = (sample_test["labels"] >= 0).sum(axis=1)
    assert set(counts.tolist()) == {1, 2, 3}
    text = " ".join(sample_test["captions"])
    for relation in scenes.RELATIONS:
        assert relation in text


def test_scenes_are_deterministic_and_seeded():
    a = scenes.load("validation", num_scenes=5, sample=True)
    b = scenes.load("validation", num_scenes=5, sample=True)
    c = scenes.load("validation", num_scenes=5, sample=True, seed=7)
    np.testing.assert_array_equal(a["images"], b["images"])
    assert a["captions"] == b["captions"]
    assert a["captions"] != c["captions"]


def test_splits_use_disjoint_source_images():
    images, _ = fashion_mnist.load_arrays("train", fashion_mnist.sample_path())
    cut = len(images) - len(images) // 12
    train_items = {img.tobytes() for img in images[:cut]}
    validation = scenes.load("validation", num_scenes=20, sample=True)
    for canvas, boxes, labels in zip(
        validation["images"], validation["boxes"], validation["labels"]
    ):
        for (top, left, bottom, right), k in zip(boxes, labels):
            if k >= 0:
                assert canvas[top:bottom, left:right].tobytes() not in train_items


def test_relations_are_unambiguous_by_margin(sample_test):
    for boxes, labels in zip(sample_test["boxes"], sample_test["labels"]):
        real = [b for b, k in zip(boxes, labels) if k >= 0]
        cols = sorted((b[1] + b[3]) / 2 for b in real)
        assert all(b - a >= 8 for a, b in zip(cols, cols[1:]))
        first = real[0]
        for other in real[1:]:
            dy = (other[0] + other[2] - first[0] - first[2]) / 2
            dx = (other[1] + other[3] - first[1] - first[3]) / 2
            assert abs(abs(dx) - abs(dy)) >= 8


def test_invalid_arguments():
    with pytest.raises(ValueError, match="split"):
        scenes.load("dev", sample=True)
    with pytest.raises(ValueError, match="max_items"):
        scenes.make_scenes(
            np.zeros((10, 28, 28), "uint8"), np.arange(10), 1, max_items=4
        )
    with pytest.raises(ValueError, match="canvas"):
        scenes.make_scenes(
            np.zeros((10, 28, 28), "uint8"), np.arange(10), 1, canvas_size=40
        )


def test_pairs_adds_a_channel(sample_test):
    images, captions = scenes.pairs(sample_test)
    assert images.shape == (60, 84, 84, 1) and images.dtype == np.uint8
    assert captions == sample_test["captions"]
