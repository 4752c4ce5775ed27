"""Karpathy split loader on a tiny fixture in the exact file format."""

import json
import os

import numpy as np
import pytest

from zoo.data import captions

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "karpathy")
JSON = os.path.join(FIXTURE, "dataset_tiny.json")
IMAGES = os.path.join(FIXTURE, "images")


def test_fixture_is_in_karpathy_format():
    with open(JSON) as f:
        data = json.load(f)
    assert set(data) == {"images", "dataset"}
    for entry in data["images"]:
        assert {"filename", "imgid", "split", "sentids", "sentences"} <= set(entry)
        for sentence in entry["sentences"]:
            assert {"raw", "tokens", "imgid", "sentid"} == set(sentence)


def test_train_split_includes_restval_with_its_subfolder():
    records = captions.load_karpathy(JSON, IMAGES, split="train")
    assert [os.path.basename(r.path) for r in records] == [
        "img_train_0.png",
        "img_train_1.png",
        "img_restval_0.png",
    ]
    assert records[2].path == os.path.join(IMAGES, "val2014", "img_restval_0.png")
    assert records[1].captions == ("A green square .", "a green block", "green")
    assert all(os.path.isfile(r.path) for r in records)


def test_other_splits_and_restval_kept_apart():
    assert [r.image_id for r in captions.load_karpathy(JSON, IMAGES, "val")] == [2]
    assert [r.captions for r in captions.load_karpathy(JSON, IMAGES, "test")] == [
        ("A white square .", "a white block")
    ]
    restval = captions.load_karpathy(JSON, IMAGES, "restval", restval_as_train=False)
    assert [r.image_id for r in restval] == [4]
    assert len(captions.load_karpathy(JSON, IMAGES, split=None)) == 5


def test_images_dir_defaults_to_the_json_folder(tmp_path):
    records = captions.load_karpathy(JSON, split="test")
    assert records[0].path == os.path.join(FIXTURE, "img_test_0.png")


def test_pairs_one_per_caption():
    paths, texts = captions.pairs(captions.load_karpathy(JSON, IMAGES, "train"))
    assert len(paths) == len(texts) == 6
    assert texts[:2] == ["A red square on black .", "a red block"]


def test_load_images_decodes_and_resizes():
    records = captions.load_karpathy(JSON, IMAGES, "train")
    images = captions.load_images([r.path for r in records], (6, 8))
    assert images.shape == (3, 6, 8, 3) and images.dtype == np.uint8
    # The fixture draws a coloured 4x4 square at rows 1-4, columns 2-5.
    np.testing.assert_array_equal(images[0, 2, 3], [255, 0, 0])
    np.testing.assert_array_equal(images[1, 2, 3], [0, 255, 0])
    np.testing.assert_array_equal(images[2, 2, 3], [128, 128, 128])
    assert images[0, 0, 0].sum() == 0
    assert captions.load_images([r.path for r in records], (12, 16)).shape[1:3] == (
        12,
        16,
    )


@pytest.mark.tensorflow_only
def test_as_dataset_streams_image_caption_pairs():
    records = captions.load_karpathy(JSON, IMAGES, "train")
    pairs = list(captions.as_dataset(records, (6, 8), shuffle=False))
    assert len(pairs) == 6
    image, text = pairs[1]
    assert image.shape == (6, 8, 3) and text.numpy() == b"a red block"


def test_missing_images_and_bad_files_raise(tmp_path):
    with pytest.raises(FileNotFoundError, match="images_dir"):
        captions.load_images([str(tmp_path / "nope.jpg")])
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"annotations": []}))
    with pytest.raises(ValueError, match="Karpathy"):
        captions.load_karpathy(str(bad))
    bad.write_text(json.dumps({"images": [{"filename": "x.jpg"}]}))
    with pytest.raises(ValueError, match="entry 0"):
        captions.load_karpathy(str(bad))
    with pytest.raises(ValueError, match="split"):
        captions.load_karpathy(JSON, split="dev")
