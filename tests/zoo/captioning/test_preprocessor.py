"""`CaptionPreprocessor`: image scaling, keras-hub packing, assets."""

import numpy as np
import pytest
import tensorflow as tf

from zoo.base.truncation import TruncatedWarning
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
    with pytest.warns(UserWarning, match="sequence_length=3"):
        x, labels, _ = pre(
            np.zeros((1, 4, 4, 1), "uint8"), tf.constant(["a bag above a"])
        )
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


@pytest.mark.parametrize(
    "shape, channels",
    [((2, 10, 6), 1), ((2, 10, 6, 1), 3), ((2, 10, 6, 3), 1), ((2, 10, 6, 4), 3)],
)
def test_any_size_and_channel_count_becomes_the_target(shape, channels):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=shape).astype("uint8")
    pre = CaptionPreprocessor(VOCAB, 4, image_size=(5, 3), channels=channels)
    out = np.asarray(pre.images(images))
    assert out.shape == (2, 5, 3, channels) and out.dtype == np.float32
    # Independent reference: NumPy channel conversion, then TF resize.
    x = images.astype("float32") / 255.0
    x = x[..., None] if x.ndim == 3 else x[..., :3]
    if channels == 1 and x.shape[-1] == 3:
        x = (x * [0.2989, 0.5870, 0.1140]).sum(-1, keepdims=True)
    elif channels == 3 and x.shape[-1] == 1:
        x = np.repeat(x, 3, axis=-1)
    expected = np.asarray(tf.image.resize(x, (5, 3)))
    np.testing.assert_allclose(out, expected, atol=2e-3)


def caption_warnings(pre, images, captions):
    """The messages of the warnings one eager call gives."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pre(images, tf.constant(captions))
    assert all(w.category is TruncatedWarning for w in caught)  # UserWarnings
    return [str(w.message) for w in caught]


def test_truncation_warns_on_each_eager_call_and_not_inside_tf_data():
    import warnings

    pre = CaptionPreprocessor(VOCAB, 3)
    images = np.zeros((4, 4, 4), "uint8")
    # Words (no subword splits in VOCAB): 2, 5, 2, 4. With [START], a
    # decoder input of sequence_length=3 holds 2 of them: rows 2 and 4 cut.
    captions = ["a bag", "a bag above a coat", "a coat", "a bag above a"]
    for _ in range(2):  # every call that cuts warns, not only the first
        (message,) = caption_warnings(pre, images, captions)
        assert message.startswith(
            "2 of 4 captions were longer than sequence_length=3 subwords"
        ), message
        assert "needs sequence_length=6" in message
    assert caption_warnings(pre, images[:1], captions[:1]) == []
    # Inside tf.data (as `fit` maps it) the captions are cut silently.
    ds = tf.data.Dataset.from_tensor_slices((images, captions)).batch(2).map(pre)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        batches = list(ds)
    assert [b[1].shape[1] for b in batches] == [3, 3]
    pre.sequence_length = 6  # raised to what the warning named: nothing is cut
    assert caption_warnings(pre, images, captions) == []
    x, _, _ = pre(images, tf.constant(captions))
    assert x["decoder_token_ids"].shape == (4, 6)


def test_settable_sizes_are_checked():
    pre = CaptionPreprocessor(VOCAB, 4)
    for name, value in (
        ("sequence_length", 1),
        ("sequence_length", 2.5),
        ("image_size", (0, 4)),
        ("channels", 4),
    ):
        with pytest.raises(ValueError, match=name):
            setattr(pre, name, value)
    with pytest.raises(ValueError, match="shape=\\(1, 4, 4, 2\\)"):
        pre.images(np.zeros((1, 4, 4, 2), "uint8"))
