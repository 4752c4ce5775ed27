"""`CaptionPreprocessor`: image scaling, keras-hub packing, assets."""

import numpy as np
import pytest
import tensorflow as tf

from zoo.show_attend_tell import CaptionPreprocessor

pytestmark = pytest.mark.tensorflow_only

VOCAB = ["[PAD]", "[UNK]", "[START]", "[END]", "a", "bag", "coat", "above"]


def test_packs_captions_and_scales_images():
    pre = CaptionPreprocessor(VOCAB, 6)
    images = np.full((2, 4, 4), 255, "uint8")
    x, labels, weights = pre(images, tf.constant(["a bag above a coat", "A Coat"]))
    assert x["images"].shape == (2, 4, 4, 1)
    np.testing.assert_allclose(np.asarray(x["images"]), 1.0)
    np.testing.assert_array_equal(
        x["decoder_token_ids"], [[2, 4, 5, 7, 4, 6], [2, 4, 6, 0, 0, 0]]
    )
    np.testing.assert_array_equal(labels, [[4, 5, 7, 4, 6, 3], [4, 6, 3, 0, 0, 0]])
    np.testing.assert_array_equal(weights, [[1] * 6, [1, 1, 1, 0, 0, 0]])


def test_trims_padding_and_truncates():
    pre = CaptionPreprocessor(VOCAB, 3)
    x, labels, _ = pre(np.zeros((1, 4, 4, 1), "uint8"), tf.constant(["a bag above a"]))
    # [START] a bag | labels a bag [END]: truncated to sequence_length.
    np.testing.assert_array_equal(x["decoder_token_ids"], [[2, 4, 5]])
    np.testing.assert_array_equal(labels, [[4, 5, 3]])
    pre = CaptionPreprocessor(VOCAB, 10)
    x, _, _ = pre(np.zeros((1, 4, 4, 1), "uint8"), tf.constant(["a coat"]))
    assert x["decoder_token_ids"].shape == (1, 3)


def test_resizes_float_images_and_images_only_call():
    pre = CaptionPreprocessor(VOCAB, 4, image_size=(8, 6))
    out = pre(np.full((3, 4, 4, 3), 0.5, "float32"))
    assert set(out) == {"images"} and out["images"].shape == (3, 8, 6, 3)
    np.testing.assert_allclose(np.asarray(out["images"]), 0.5, rtol=1e-6)


def test_detokenize_stops_at_end_and_drops_specials():
    pre = CaptionPreprocessor(VOCAB, 4)
    assert pre.detokenize(np.array([[4, 5, 3, 6], [4, 0, 6, 0]])) == [
        "a bag",
        "a coat",
    ]
    assert pre.tokens([4, 3]) == ["a", "[END]"]


def test_assets_round_trip(tmp_path):
    import keras

    pre = CaptionPreprocessor(VOCAB, 5)
    pre.save_assets(str(tmp_path))
    config = keras.saving.serialize_keras_object(pre)
    loaded = keras.saving.deserialize_keras_object(config)
    loaded.load_assets(str(tmp_path))
    assert loaded.tokenizer.get_vocabulary() == VOCAB
    assert loaded.sequence_length == 5


def test_invalid_arguments():
    with pytest.raises(ValueError, match="sequence_length"):
        CaptionPreprocessor(VOCAB, 1)
    with pytest.raises(ValueError, match="image_size"):
        CaptionPreprocessor(VOCAB, 4, image_size=(8,))
    with pytest.raises(ValueError, match="no vocabulary"):
        _ = CaptionPreprocessor().end_id
