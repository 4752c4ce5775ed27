"""Our `MultiHeadAttention` as a drop-in for `keras.layers.MultiHeadAttention`.

Each test runs Keras's class beside ours, in the same process and with the
same weights, on both of our paths: the fused one (`ops.dot_product_attention`,
taken without scores or dropout) and the explicit one (taken here through
`return_attention_scores=True`). Keras's explicit path gives a query row with
nothing to attend to (in a head) zero weights; its fused path averages the
values uniformly there. Ours gives zeros on both paths, so our fused output is
compared with Keras's explicit output everywhere, and with Keras's fused output
on the rows that have a key in every head.
"""

import keras
import numpy as np
import pytest
from keras import ops

from keras_attention.layers import MultiHeadAttention

KEY_DIM, DIM = 4, 6
# (batch, num_heads, Tq, Tv). Besides all-different sizes, the sizes where a
# mask read along the wrong axis still broadcasts: num_heads == Tq and
# batch == Tq.
DIMS = {
    "distinct": (2, 3, 4, 5),
    "heads_eq_tq": (2, 3, 3, 5),
    "batch_eq_tq": (2, 3, 2, 5),
}
# Every attention_mask form Keras accepts, in symbols of DIMS.
MASK_FORMS = [
    "Tq,Tv",
    "1,Tv",
    "Tq,1",
    "1,1",
    "B,Tq,Tv",
    "1,Tq,Tv",
    "B,1,Tv",
    "B,Tq,1",
    "1,1,Tv",
    "B,N,Tq,Tv",
    "B,1,Tq,Tv",
    "1,N,Tq,Tv",
    "1,1,Tq,Tv",
    "B,1,1,Tv",
    "B,N,1,Tv",
    "1,N,1,1",
]
# Forms Keras rejects (each raises inside Keras).
REJECTED_FORMS = ["Tv", "B,Tv,Tq", "N,Tq,Tv", "Tq+1,Tv", "B,N,Tv,Tq", "1,B,N,Tq,Tv"]


def shape_of(form, dims):
    batch, heads, q_len, v_len = dims
    sizes = {"B": batch, "N": heads, "Tq": q_len, "Tv": v_len, "Tq+1": q_len + 1}
    return tuple(1 if s == "1" else sizes[s] for s in form.split(","))


def rand(*shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype("float32")


def np_(x):
    return np.asarray(ops.convert_to_numpy(x), dtype="float32")


def twins(dims, reference_cls=keras.layers.MultiHeadAttention, ours_cls=None):
    """Keras's layer and ours (or subclasses of them) with the same weights."""
    batch, heads, q_len, v_len = dims
    keras.utils.set_random_seed(1)
    reference = reference_cls(heads, KEY_DIM, bias_initializer="random_normal")
    ours = (ours_cls or MultiHeadAttention)(
        heads, KEY_DIM, bias_initializer="random_normal"
    )
    query, value = rand(batch, q_len, DIM), rand(batch, v_len, DIM, seed=1)
    reference.build(query.shape, value.shape)
    ours.build(query.shape, value.shape)
    ours.set_weights(reference.get_weights())
    return reference, ours, query, value


def assert_same(got, expected):
    for g, e in zip(keras.tree.flatten(got), keras.tree.flatten(expected), strict=True):
        np.testing.assert_allclose(np_(g), np_(e), atol=2e-5)


def rows_with_keys_in_every_head(
    dims, attention_mask=None, value_mask=None, use_causal_mask=False
):
    """`(B, Tq)` bool: rows that have a key to attend to in every head."""
    batch, heads, q_len, v_len = dims
    mask = np.ones(dims, bool)
    if attention_mask is not None:
        attention_mask = np.asarray(attention_mask, bool)
        if attention_mask.ndim == 2:
            attention_mask = attention_mask[None]
        if attention_mask.ndim == 3:
            attention_mask = attention_mask[:, None]
        mask &= attention_mask
    if value_mask is not None:
        mask &= value_mask[:, None, None, :]
    if use_causal_mask:
        mask &= np.tril(np.ones((q_len, v_len), bool))
    return mask.any(-1).all(1)


def check_both_paths(reference, ours, query, value, dims, monkeypatch, **kwargs):
    """Ours against Keras on our fused and explicit paths."""
    expected_explicit = reference(query, value, return_attention_scores=True, **kwargs)
    got_explicit = ours(query, value, return_attention_scores=True, **kwargs)
    assert_same(got_explicit, expected_explicit)

    calls = []
    kernel = keras.ops.dot_product_attention
    monkeypatch.setattr(
        keras.ops,
        "dot_product_attention",
        lambda *a, **k: calls.append(1) or kernel(*a, **k),
    )
    got_fused = np_(ours(query, value, **kwargs))
    monkeypatch.undo()
    assert len(calls) == 1  # our fused path was taken
    np.testing.assert_allclose(got_fused, np_(expected_explicit[0]), atol=2e-5)
    expected_fused = np_(reference(query, value, **kwargs))
    rows = rows_with_keys_in_every_head(dims, **kwargs)
    np.testing.assert_allclose(got_fused[rows], expected_fused[rows], atol=2e-5)


# Attention masks ------------------------------------------------------------


@pytest.mark.parametrize("form", MASK_FORMS)
@pytest.mark.parametrize("dims_name", sorted(DIMS))
def test_every_attention_mask_form_keras_accepts(form, dims_name, monkeypatch):
    dims = DIMS[dims_name]
    reference, ours, query, value = twins(dims)
    rng = np.random.default_rng(len(form) + 7 * len(dims_name))
    mask = rng.random(shape_of(form, dims)) > 0.35
    check_both_paths(
        reference, ours, query, value, dims, monkeypatch, attention_mask=mask
    )


@pytest.mark.parametrize("form", ["Tq,Tv", "B,Tq,Tv", "B,1,Tv", "1,Tq,1"])
def test_attention_mask_with_padding_and_causal_masks(form, monkeypatch):
    dims = (2, 3, 4, 4)
    reference, ours, query, value = twins(dims)
    mask = np.random.default_rng(5).random(shape_of(form, dims)) > 0.3
    value_mask = np.array([[1, 1, 1, 0], [1, 1, 1, 1]], bool)
    for causal in (False, True):
        check_both_paths(
            reference,
            ours,
            query,
            value,
            dims,
            monkeypatch,
            attention_mask=mask,
            value_mask=value_mask,
            use_causal_mask=causal,
        )


def test_4d_attention_mask_with_padding_masks_applies_each_per_example():
    # Keras merges a (B, Tv) padding mask into a 4-D attention mask along
    # the heads axis, so it rejects (or, with B == num_heads, misreads) the
    # pair. Ours applies the padding mask per example: the same as giving
    # Keras the merged 4-D mask.
    dims = (2, 3, 4, 5)
    reference, ours, query, value = twins(dims)
    mask = np.random.default_rng(6).random(dims) > 0.3
    mask[..., 0] = True
    value_mask = np.array([[1, 1, 0, 1, 1], [1, 1, 1, 1, 0]], bool)
    merged = mask & value_mask[:, None, None, :]
    expected = reference(
        query, value, attention_mask=merged, return_attention_scores=True
    )
    for with_scores in (False, True):
        got = ours(
            query,
            value,
            attention_mask=mask,
            value_mask=value_mask,
            return_attention_scores=with_scores,
        )
        assert_same(got, expected if with_scores else expected[0])


@pytest.mark.parametrize("form", REJECTED_FORMS)
@pytest.mark.parametrize("with_scores", [False, True])
def test_attention_mask_form_keras_rejects_raises_value_error(form, with_scores):
    dims = DIMS["distinct"]
    reference, ours, query, value = twins(dims)
    mask = np.ones(shape_of(form, dims), bool)
    with pytest.raises(Exception):  # noqa: B017 (TF, JAX raise other types)
        reference(
            query, value, attention_mask=mask, return_attention_scores=with_scores
        )
    shape = str(mask.shape).replace("(", r"\(").replace(")", r"\)")
    with pytest.raises(ValueError, match=rf"Received: attention_mask.shape={shape}"):
        ours(query, value, attention_mask=mask, return_attention_scores=with_scores)


# Causal mask ----------------------------------------------------------------


@pytest.mark.parametrize("lengths", [(3, 5), (5, 3)])
def test_causal_mask_when_query_and_value_lengths_differ(lengths, monkeypatch):
    q_len, v_len = lengths
    dims = (2, 3, q_len, v_len)
    reference, ours, query, value = twins(dims)
    check_both_paths(
        reference, ours, query, value, dims, monkeypatch, use_causal_mask=True
    )
    # Keras aligns query 0 with key 0: query i sees keys 0..i.
    _, weights = ours(query, value, use_causal_mask=True, return_attention_scores=True)
    hidden = ~np.tril(np.ones((q_len, v_len), bool))
    assert np.all(np_(weights)[:, :, hidden] == 0)


# Keras's extension points ---------------------------------------------------


class DoubledQuery:
    """Overrides `_compute_attention` with Keras's older signature."""

    def _compute_attention(
        self,
        query,
        key,
        value,
        attention_mask=None,
        training=None,
        return_attention_scores=False,
    ):
        return super()._compute_attention(
            query * 2.0,
            key,
            value,
            attention_mask,
            training,
            return_attention_scores,
        )


class MeanOfValues:
    """Replaces the attention by the mean value, never calling `super`."""

    def _compute_attention(
        self,
        query,
        key,
        value,
        attention_mask=None,
        training=None,
        return_attention_scores=False,
    ):
        context = ops.mean(value, axis=1, keepdims=True)
        context = ops.broadcast_to(
            context, ops.shape(query)[:3] + (ops.shape(value)[-1],)
        )
        return context, None


class HalfTemperature:
    """Overrides `_masked_softmax`: scores halved before the softmax."""

    def _masked_softmax(self, attention_scores, attention_mask=None):
        return super()._masked_softmax(attention_scores * 0.5, attention_mask)


def subclasses(mixin):
    reference = type("KerasSub", (mixin, keras.layers.MultiHeadAttention), {})
    ours = type("OurSub", (mixin, MultiHeadAttention), {})
    return reference, ours


@pytest.mark.parametrize("mixin", [DoubledQuery, MeanOfValues])
@pytest.mark.parametrize("with_scores", [False, True])
def test_compute_attention_override_changes_the_output(mixin, with_scores):
    dims = (2, 3, 4, 4)
    reference, ours, query, _ = twins(dims, *subclasses(mixin))
    _, plain, _, _ = twins(dims)
    value_mask = np.array([[1, 1, 1, 0], [1, 1, 1, 1]], bool)
    for kwargs in ({}, {"use_causal_mask": True}, {"value_mask": value_mask}):
        expected = reference(
            query, query, return_attention_scores=with_scores, **kwargs
        )
        got = ours(query, query, return_attention_scores=with_scores, **kwargs)
        assert_same(got, expected)
        unchanged = plain(query, query, return_attention_scores=with_scores, **kwargs)
        first = keras.tree.flatten(got)[0]
        assert not np.allclose(np_(first), np_(keras.tree.flatten(unchanged)[0]))


def test_compute_attention_override_sees_the_keras_mask():
    seen = {}

    class Recording:
        def _compute_attention(self, query, key, value, attention_mask=None, *args):
            seen[type(self).__name__] = np.broadcast_to(
                np_(attention_mask).astype(bool), (2, 4, 4)
            )
            return super()._compute_attention(query, key, value, attention_mask, *args)

    reference, ours, query, _ = twins((2, 3, 4, 4), *subclasses(Recording))
    value_mask = np.array([[1, 1, 1, 0], [1, 1, 1, 1]], bool)
    for kwargs in ({"use_causal_mask": True}, {"value_mask": value_mask}):
        seen.clear()
        assert_same(ours(query, query, **kwargs), reference(query, query, **kwargs))
        np.testing.assert_array_equal(seen["OurSub"], seen["KerasSub"])


@pytest.mark.parametrize("with_scores", [False, True])
def test_masked_softmax_override_acts_where_keras_calls_it(with_scores):
    # Keras calls `_masked_softmax` on its explicit path (scores returned,
    # dropout), not in the fused kernel; so does ours.
    dims = (2, 3, 4, 4)
    reference, ours, query, _ = twins(dims, *subclasses(HalfTemperature))
    _, plain, _, _ = twins(dims)
    mask = np.tril(np.ones((4, 4), bool))
    kwargs = {"attention_mask": mask, "return_attention_scores": with_scores}
    got = ours(query, query, **kwargs)
    assert_same(got, reference(query, query, **kwargs))
    changed = not np.allclose(
        np_(keras.tree.flatten(got)[0]),
        np_(keras.tree.flatten(plain(query, query, **kwargs))[0]),
    )
    assert changed == with_scores


# Flash attention ------------------------------------------------------------


def test_flash_attention_with_scores_raises_as_keras_does():
    query = rand(2, 4, DIM)
    for cls in (keras.layers.MultiHeadAttention, MultiHeadAttention):
        layer = cls(2, KEY_DIM, flash_attention=True)
        layer.build(query.shape, query.shape)
        with pytest.raises(ValueError, match="Returning attention scores is not"):
            layer(query, query, return_attention_scores=True)
