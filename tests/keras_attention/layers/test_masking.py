"""Mask merging and the float32 masked softmax."""

import keras
import numpy as np
import pytest

from keras_attention.layers.masking import causal_mask, masked_softmax, merge_masks


def np_(x):
    return keras.ops.convert_to_numpy(x)


def test_merge_masks_combines_every_kind():
    q = np.zeros((2, 3, 4), "float32")
    v = np.zeros((2, 5, 4), "float32")
    qm = np.array([[1, 1, 0], [1, 1, 1]], bool)
    vm = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], bool)
    am = np.ones((2, 3, 5), bool)
    am[1, 0, 4] = False
    mask = np_(merge_masks(q, v, qm, vm, am, use_causal_mask=True))
    ref = qm[:, :, None] & vm[:, None, :] & am & np.tril(np.ones((3, 5), bool), k=2)
    np.testing.assert_array_equal(np.broadcast_to(mask, (2, 3, 5)), ref)


def test_merge_masks_none_when_nothing_applies():
    assert merge_masks(np.zeros((1, 2, 3)), np.zeros((1, 4, 3))) is None


def test_causal_mask_is_aligned_at_the_end():
    np.testing.assert_array_equal(
        np_(causal_mask(2, 4))[0], [[1, 1, 1, 0], [1, 1, 1, 1]]
    )
    np.testing.assert_array_equal(np_(causal_mask(3, 3))[0], np.tril(np.ones((3, 3))))


def test_masked_softmax_zero_weight_rows_sum_to_one_and_no_nan():
    scores = np.random.default_rng(0).normal(size=(2, 3, 4)).astype("float16")
    mask = np.ones((2, 3, 4), bool)
    mask[0, 0, 1:] = False
    mask[1, 2, :] = False
    out = np_(masked_softmax(scores, mask))
    assert out.dtype == np.float32
    assert np.all(out[~mask] == 0.0)
    np.testing.assert_allclose(out[0, 0], [1, 0, 0, 0])
    np.testing.assert_array_equal(out[1, 2], 0.0)
    sums = out.sum(-1)
    np.testing.assert_allclose(sums[mask.any(-1)], 1.0, rtol=1e-6)
    ref = np.exp(scores[0, 1].astype("float64"))
    np.testing.assert_allclose(out[0, 1], ref / ref.sum(), rtol=1e-5)


@pytest.mark.tensorflow_only
def test_masked_softmax_gradient_is_finite_on_empty_rows():
    import tensorflow as tf

    scores = tf.Variable(np.zeros((1, 2, 3), "float32"))
    mask = np.array([[[1, 0, 1], [0, 0, 0]]], bool)
    with tf.GradientTape() as tape:
        out = masked_softmax(scores, mask)
        loss = tf.reduce_sum(out * np.arange(3, dtype="float32"))
    grad = tape.gradient(loss, scores).numpy()
    assert np.all(np.isfinite(grad))
    np.testing.assert_array_equal(grad[0, 1], 0.0)
