"""`Attention` built and called as `keras.layers.Attention`, run beside it."""

import math

import keras
import numpy as np
import pytest
from keras import ops

from keras_attention import scores
from keras_attention.layers.attention import Attention

RNG = np.random.default_rng(2024)


def normal(*shape):
    return RNG.normal(size=shape).astype("float32")


def np_(x):
    return ops.convert_to_numpy(x)


def twins(**kwargs):
    """Our layer and Keras's, built alike, Keras's variables copied to ours.

    Keras's variables get values other than their initial ones first, so
    that a variable used in the wrong place, or not at all, shows.
    """
    kwargs.setdefault("score_mode", "dot")  # our default score is scaled_dot
    ours, theirs = Attention(**kwargs), keras.layers.Attention(**kwargs)
    shapes = [(2, 3, 4), (2, 5, 4)]
    ours.build(shapes)
    theirs.build(shapes)
    for variable, value in zip(theirs.weights, (0.7, 1.3), strict=False):
        variable.assign(value)
    ours.set_weights(theirs.get_weights())
    return ours, theirs


def assert_close(ours, theirs, atol=1e-5):
    np.testing.assert_allclose(np_(ours), np_(theirs), atol=atol, rtol=1e-5)


QUERY_MASK = np.array([[1, 0, 1], [1, 1, 0]], bool)
VALUE_MASK = np.array([[1, 1, 0, 1, 0], [1, 0, 1, 1, 1]], bool)  # first always on
MASKS = {
    "none": None,
    "both": [QUERY_MASK, VALUE_MASK],
    "query_only": [QUERY_MASK, None],
    "value_only": [None, VALUE_MASK],
    "with_key_mask": [QUERY_MASK, VALUE_MASK, ~VALUE_MASK],
}


@pytest.mark.parametrize("score_mode", ["dot", "concat"])
@pytest.mark.parametrize("use_scale", [False, True])
def test_same_variables_as_keras(score_mode, use_scale):
    ours, theirs = twins(score_mode=score_mode, use_scale=use_scale)
    assert [w.name for w in ours.weights] == [w.name for w in theirs.weights]
    assert [tuple(w.shape) for w in ours.weights] == [
        tuple(w.shape) for w in theirs.weights
    ]
    assert len(ours.trainable_weights) == len(theirs.trainable_weights)
    assert len(ours.weights) == (use_scale + (score_mode == "concat"))
    for got, want in zip(ours.get_weights(), theirs.get_weights(), strict=True):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("score_mode", ["dot", "concat"])
@pytest.mark.parametrize("use_scale", [False, True])
@pytest.mark.parametrize("mask", sorted(MASKS))
@pytest.mark.parametrize("use_key", [False, True])
@pytest.mark.parametrize("causal", [False, True])
def test_list_call_matches_keras(score_mode, use_scale, mask, use_key, causal):
    query, value, key = normal(2, 3, 4), normal(2, 5, 4), normal(2, 5, 4)
    inputs = [query, value, key] if use_key else [query, value]
    ours, theirs = twins(score_mode=score_mode, use_scale=use_scale)
    kwargs = {"use_causal_mask": causal, "return_attention_scores": True}
    out, weights = ours(inputs, mask=MASKS[mask], **kwargs)
    want_out, want_weights = theirs(inputs, mask=MASKS[mask], **kwargs)
    assert tuple(out.shape) == (2, 3, 4) and tuple(weights.shape) == (2, 3, 5)
    assert_close(out, want_out)
    # Including the rows of masked queries: Keras keeps their distribution.
    assert_close(weights, want_weights)
    if MASKS[mask] is not None and MASKS[mask][0] is not None:
        assert np.all(np_(out)[~QUERY_MASK] == 0)
        np.testing.assert_allclose(np_(weights)[~QUERY_MASK].sum(-1), 1.0, rtol=1e-5)


def test_list_call_without_return_scores_is_one_tensor():
    ours, theirs = twins()
    query, value = normal(2, 3, 4), normal(2, 5, 4)
    out = ours([query, value], return_attention_scores=False)
    assert not isinstance(out, (tuple, list))
    assert_close(out, theirs([query, value]))


@pytest.mark.parametrize("score_mode", ["dot", "concat"])
def test_rank_4_inputs_match_keras(score_mode):
    query, value = normal(2, 3, 4, 6), normal(2, 3, 5, 6)
    query_mask = RNG.random((2, 3, 4)) > 0.3
    value_mask = RNG.random((2, 3, 5)) > 0.3
    value_mask[..., 0] = True
    ours = Attention(score_mode=score_mode, use_scale=True)
    theirs = keras.layers.Attention(score_mode=score_mode, use_scale=True)
    for layer in (ours, theirs):
        layer([query, value])
    for variable, value_ in zip(theirs.weights, (0.6, 1.4), strict=False):
        variable.assign(value_)
    ours.set_weights(theirs.get_weights())
    kwargs = {"mask": [query_mask, value_mask], "return_attention_scores": True}
    out, weights = ours([query, value], use_causal_mask=True, **kwargs)
    want_out, want_weights = theirs([query, value], use_causal_mask=True, **kwargs)
    assert tuple(out.shape) == (2, 3, 4, 6) and tuple(weights.shape) == (2, 3, 4, 5)
    assert_close(out, want_out)
    assert_close(weights, want_weights)
    assert ours.compute_output_shape([query.shape, value.shape]) == (2, 3, 4, 6)


def test_broadcast_masks_match_keras():
    query, value = normal(2, 3, 4), normal(2, 5, 4)
    mask = [np.array([True, False, True]), np.array([True, True, False, True, True])]
    ours, theirs = twins()
    assert_close(ours([query, value], mask=mask), theirs([query, value], mask=mask))


@pytest.mark.parametrize("training", [False, True])
def test_dropout_matches_keras(training):
    query, value = normal(2, 3, 4), normal(2, 5, 4)
    ours, theirs = twins(score_mode="dot", dropout=0.5, seed=17)
    kwargs = {"return_attention_scores": True, "training": training}
    out, weights = ours([query, value], **kwargs)
    want_out, want_weights = theirs([query, value], **kwargs)
    assert_close(out, want_out)
    assert_close(weights, want_weights)
    dropped = np_(weights) == 0
    assert dropped.any() == training


def test_default_score_is_scaled_dot_unlike_keras():
    # Our default divides the scores by sqrt(d); Keras's default does not.
    query, value = normal(2, 3, 4), normal(2, 5, 4)
    ours = Attention()([query, value])
    theirs = keras.layers.Attention()([query / math.sqrt(4), value])
    assert_close(ours, theirs)
    assert not np.allclose(np_(ours), np_(keras.layers.Attention()([query, value])))


def test_fully_masked_row_gives_zeros_where_keras_gives_a_distribution():
    query, value = normal(2, 3, 4), normal(2, 5, 4)
    value_mask = np.array([[0, 0, 0, 0, 0], [1, 1, 1, 0, 0]], bool)
    ours, theirs = twins()
    out, weights = ours(
        [query, value], mask=[None, value_mask], return_attention_scores=True
    )
    want_out, _ = theirs(
        [query, value], mask=[None, value_mask], return_attention_scores=True
    )
    out, weights = np_(out), np_(weights)
    assert np.all(out[0] == 0) and np.all(weights[0] == 0)
    np.testing.assert_allclose(out[1], np_(want_out)[1], atol=1e-5)


@pytest.mark.parametrize("score_mode", ["dot", "concat"])
def test_functional_model_with_implicit_masks_matches_keras(score_mode):
    query_ids = keras.Input((None,), dtype="int32")
    value_ids = keras.Input((None,), dtype="int32")
    embedding = keras.layers.Embedding(10, 4, mask_zero=True)
    query, value = embedding(query_ids), embedding(value_ids)
    outputs = []
    for layer in (
        Attention(score_mode=score_mode),
        keras.layers.Attention(score_mode=score_mode),
    ):
        context, weights = layer([query, value], return_attention_scores=True)
        pooled = keras.layers.GlobalAveragePooling1D()(context)  # sees the mask
        outputs += [context, weights, pooled]
    model = keras.Model([query_ids, value_ids], outputs)
    q_ids = np.array([[1, 2, 0], [3, 0, 0]])
    v_ids = np.array([[4, 5, 6, 0], [7, 8, 0, 0]])
    results = model.predict([q_ids, v_ids], verbose=0)
    for got, want in zip(results[:3], results[3:], strict=True):
        np.testing.assert_allclose(got, want, atol=1e-5)
    assert np.all(results[0][q_ids == 0] == 0)


def test_symbolic_shapes_match_keras_and_do_not_leak():
    ours, theirs = Attention(score_mode="dot"), keras.layers.Attention()
    x, y = keras.Input((3, 5)), keras.Input((4, 5))
    for layer in (ours, theirs):
        out, weights = layer([x, y], return_attention_scores=True)
        assert tuple(out.shape) == (None, 3, 5)
        assert tuple(weights.shape) == (None, 3, 4)
        out = layer([x, y])
        assert not isinstance(out, (tuple, list))
        assert tuple(out.shape) == (None, 3, 5)
    shapes = [(2, 3, 4), (2, 5, 6), (2, 5, 4)]
    assert ours.compute_output_shape(shapes) == theirs.compute_output_shape(shapes)
    assert ours.compute_output_shape(*shapes) == (2, 3, 6)


def test_compute_mask_matches_keras():
    ours, theirs = Attention(score_mode="dot"), keras.layers.Attention()
    inputs = [np.ones((2, 3, 4)), np.ones((2, 4, 4))]
    assert ours.compute_mask(inputs, None) is None
    assert ours.compute_mask(inputs, [None, np.array([True, False])]) is None
    for mask in ([1, 0, 1], [True, True, False]):
        masks = [np.array(mask), np.array(mask)]
        np.testing.assert_array_equal(
            np_(ours.compute_mask(inputs, masks)),
            np_(theirs.compute_mask(inputs, masks)),
        )


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"use_scale": True},
        {"score_mode": "concat", "dropout": 0.2, "seed": 3},
        {"score_mode": "concat", "use_scale": True},
    ],
)
def test_from_keras_config(kwargs):
    theirs = keras.layers.Attention(**kwargs)
    ours = Attention.from_config(theirs.get_config())
    query, value = normal(2, 3, 4), normal(2, 5, 4)
    want = theirs([query, value])
    ours([query, value])
    assert [w.name for w in ours.weights] == [w.name for w in theirs.weights]
    ours.set_weights(theirs.get_weights())
    assert_close(ours([query, value]), want)
    config = ours.get_config()
    assert config["score"] is None
    assert Attention.from_config(config).get_config() == config


def test_model_with_list_call_saves_and_loads(tmp_path):
    query, value = keras.Input((3, 4)), keras.Input((5, 4))
    context = Attention(score_mode="concat", use_scale=True, name="attention")(
        [query, value], use_causal_mask=True
    )
    model = keras.Model([query, value], context)
    model.get_layer("attention").set_weights([np.float32(0.5), np.float32(2.0)])
    inputs = [normal(2, 3, 4), normal(2, 5, 4)]
    path = tmp_path / "list_call.keras"
    model.save(path)
    restored = keras.saving.load_model(path)
    np.testing.assert_allclose(
        restored.predict(inputs, verbose=0), model.predict(inputs, verbose=0), atol=1e-6
    )


@pytest.mark.parametrize("use_scale", [False, True])
def test_additive_score_with_identity_projections_is_keras_additive(use_scale):
    query, value, key = normal(2, 3, 4), normal(2, 5, 4), normal(2, 5, 4)
    mask = [QUERY_MASK, VALUE_MASK]
    theirs = keras.layers.AdditiveAttention(use_scale=use_scale)
    want, want_weights = theirs(
        [query, value, key], mask=mask, return_attention_scores=True
    )
    score = scores.Additive(name="score")
    ours = Attention(score=score)
    ours([query, value, key])
    score.query_kernel.assign(np.eye(4, dtype="float32"))
    score.key_kernel.assign(np.eye(4, dtype="float32"))
    v = np_(theirs.scale) if use_scale else np.ones(4, "float32")
    score.scale.assign(v)
    out, weights = ours([query, value, key], mask=mask, return_attention_scores=True)
    assert_close(out, want)
    assert_close(weights, want_weights)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"score_mode": "sum"}, "score_mode='sum'"),
        ({"use_scale": 1}, "use_scale=1"),
        ({"score": "dot", "score_mode": "dot"}, "score='dot'"),
        ({"score": "additive", "use_scale": True}, "use_scale=True"),
    ],
)
def test_bad_keras_constructor_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Attention(**kwargs)


def test_bad_list_calls():
    tensor = normal(1, 2, 2)
    layer = Attention(score_mode="dot")
    with pytest.raises(ValueError, match="list call takes .*Received: input"):
        layer([tensor, tensor, tensor, tensor])
    with pytest.raises(ValueError, match="list call takes .*Received: input"):
        layer([tensor])
    with pytest.raises(ValueError, match="Received: mask="):
        layer([tensor, tensor], mask=tensor)
    with pytest.raises(ValueError, match="Received: mask="):
        layer([tensor, tensor], mask=[tensor])
    with pytest.raises(ValueError, match="Received: value_mask="):
        layer([tensor, tensor], value_mask=np.ones((1, 2), bool))
    with pytest.raises(ValueError, match="mask="):
        layer(tensor, tensor, mask=[None, None])
    with pytest.raises(ValueError, match="rank 3"):
        layer(normal(1, 1, 2, 2), normal(1, 1, 2, 2))


def test_list_call_with_more_batch_axes_keeps_our_modes_and_outputs():
    query, value = normal(2, 3, 4, 6), normal(2, 3, 5, 6)
    layer = Attention(score="dot", mode="hard", seed=1)
    context, weights, log_prob = layer(
        [query, value], return_attention_scores=True, return_log_prob=True
    )
    assert tuple(context.shape) == (2, 3, 4, 6)
    assert tuple(log_prob.shape) == (2, 3, 4)
    weights = np_(weights)
    np.testing.assert_array_equal(weights.sum(-1), 1.0)
    expected = np.einsum("abqv,abvd->abqd", weights, value)
    np.testing.assert_allclose(np_(context), expected, atol=1e-6)
