"""Tests of `keras_attention.layers.Attention` (soft, hard and local modes)."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_attention import scores
from keras_attention.layers.attention import Attention

RNG = np.random.default_rng(1234)


def normal(*shape, scale=1.0):
    return (scale * RNG.normal(size=shape)).astype("float32")


def np_softmax(x, mask=None):
    """Reference softmax; masked entries 0, a fully masked row all zeros."""
    x = np.asarray(x, dtype="float64")
    if mask is None:
        mask = np.ones(x.shape, bool)
    mask = np.broadcast_to(mask, x.shape)
    filled = np.where(mask, x, -np.inf)
    peak = np.max(filled, axis=-1, keepdims=True)
    peak = np.where(np.isfinite(peak), peak, 0.0)
    exp = np.where(mask, np.exp(filled - peak), 0.0)
    total = exp.sum(-1, keepdims=True)
    return np.divide(exp, total, out=np.zeros_like(exp), where=total > 0)


def np_dot_weights(query, key, mask=None):
    return np_softmax(np.einsum("bqd,bvd->bqv", query, key), mask)


@pytest.fixture
def policy():
    """Sets a global dtype policy for one test and restores the old one."""
    old = keras.mixed_precision.global_policy()
    yield keras.mixed_precision.set_global_policy
    keras.mixed_precision.set_global_policy(old)


# --- Soft attention against keras.layers.Attention -----------------------


@pytest.mark.parametrize("use_query_mask", [False, True])
@pytest.mark.parametrize("use_value_mask", [False, True])
@pytest.mark.parametrize("causal", [False, True])
def test_dot_matches_keras_attention(use_query_mask, use_value_mask, causal):
    query, value, key = normal(3, 5, 4), normal(3, 5, 6), normal(3, 5, 4)
    query_mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 1, 1, 0]], bool)
    value_mask = np.array([[1, 1, 0, 1, 0], [1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], bool)
    qm = query_mask if use_query_mask else None
    vm = value_mask if use_value_mask else None

    ours, ours_w = Attention(score="dot")(
        query,
        value,
        key,
        query_mask=qm,
        value_mask=vm,
        use_causal_mask=causal,
        return_attention_scores=True,
    )
    theirs, theirs_w = keras.layers.Attention(score_mode="dot")(
        [query, value, key],
        mask=[qm, vm],
        use_causal_mask=causal,
        return_attention_scores=True,
    )
    rows = query_mask if use_query_mask else np.ones((3, 5), bool)
    np.testing.assert_allclose(
        ops.convert_to_numpy(ours), ops.convert_to_numpy(theirs), atol=1e-5
    )
    ours_w, theirs_w = ops.convert_to_numpy(ours_w), ops.convert_to_numpy(theirs_w)
    np.testing.assert_allclose(ours_w[rows], theirs_w[rows], atol=1e-6)
    # Masked query rows: Keras keeps a distribution, this layer zeros it.
    assert np.all(ours_w[~rows] == 0)


def test_masked_positions_get_exactly_zero_weight():
    query, value = normal(2, 3, 4), normal(2, 5, 4)
    value_mask = np.array([[1, 0, 1, 1, 0], [0, 1, 1, 1, 1]], bool)
    attention_mask = RNG.random((2, 3, 5)) > 0.4
    attention_mask[..., 2] = True  # position 2 is valid in every row
    _, weights = Attention(score="scaled_dot")(
        query,
        value,
        value_mask=value_mask,
        attention_mask=attention_mask,
        return_attention_scores=True,
    )
    weights = ops.convert_to_numpy(weights)
    allowed = attention_mask & value_mask[:, None, :]
    assert weights.dtype == np.float32
    assert np.all(weights[~allowed] == 0.0)
    assert np.all(weights[allowed] > 0.0)
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-6)
    reference = np_softmax(np.einsum("bqd,bvd->bqv", query, value) / 2.0, allowed)
    np.testing.assert_allclose(weights, reference, atol=1e-6)


def test_key_mask_is_combined_with_value_mask():
    query, value, key = normal(2, 3, 4), normal(2, 5, 4), normal(2, 5, 4)
    value_mask = np.array([[1, 1, 0, 1, 1], [1, 1, 1, 1, 0]], bool)
    key_mask = np.array([[1, 0, 1, 1, 1], [1, 1, 1, 0, 1]], bool)
    _, weights = Attention(score="dot")(
        query,
        value,
        key,
        value_mask=value_mask,
        key_mask=key_mask,
        return_attention_scores=True,
    )
    allowed = (value_mask & key_mask)[:, None, :]
    np.testing.assert_allclose(
        ops.convert_to_numpy(weights), np_dot_weights(query, key, allowed), atol=1e-6
    )


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"mode": "hard"}, {"mode": "hard", "hard_estimator": "gumbel"}, {"window": 1}],
)
@pytest.mark.parametrize("training", [False, True])
def test_fully_masked_row_gives_zeros(kwargs, training):
    query, value = normal(2, 3, 4), normal(2, 5, 4)
    value_mask = np.array([[0, 0, 0, 0, 0], [1, 1, 1, 0, 0]], bool)
    query_mask = np.array([[1, 1, 1], [1, 0, 1]], bool)
    layer = Attention(score="dot", seed=3, **kwargs)
    outputs = layer(
        query,
        value,
        query_mask=query_mask,
        value_mask=value_mask,
        return_attention_scores=True,
        return_distribution=True,
        training=training,
    )
    context, weights, distribution = map(ops.convert_to_numpy, outputs)
    for array in (context, weights, distribution):
        assert np.all(np.isfinite(array))
    empty = np.array([[1, 1, 1], [0, 1, 0]], bool)  # rows with nothing to see
    assert np.all(context[empty] == 0) and np.all(weights[empty] == 0)
    assert np.all(distribution[empty] == 0)
    np.testing.assert_allclose(weights[~empty].sum(-1), 1.0, atol=1e-6)


def test_fully_masked_row_log_prob_is_zero():
    query, value = normal(2, 3, 4), normal(2, 5, 4)
    value_mask = np.array([[0, 0, 0, 0, 0], [1, 1, 1, 0, 0]], bool)
    _, log_prob = Attention(score="dot", mode="hard", seed=1)(
        query, value, value_mask=value_mask, return_log_prob=True, training=True
    )
    log_prob = ops.convert_to_numpy(log_prob)
    assert np.all(log_prob[0] == 0)
    assert np.all(log_prob[1] < 0) and np.all(np.isfinite(log_prob))


@pytest.mark.parametrize("kwargs", [{}, {"mode": "hard"}, {"window": 2}])
def test_causal_mask_does_not_leak_the_future(kwargs):
    x = normal(2, 5, 4)
    layer = Attention(score="scaled_dot", **kwargs)
    before = ops.convert_to_numpy(layer(x, x, use_causal_mask=True))
    for t in range(4):
        perturbed = x.copy()
        perturbed[:, t + 1 :] += normal(2, 4 - t, 4, scale=3.0)
        after = ops.convert_to_numpy(layer(perturbed, perturbed, use_causal_mask=True))
        np.testing.assert_allclose(after[:, : t + 1], before[:, : t + 1], atol=1e-6)
        assert not np.allclose(after[:, t + 1], before[:, t + 1])


@pytest.mark.parametrize("score", ["scaled_dot", "additive", "cosine"])
def test_self_attention_is_permutation_equivariant(score):
    x = normal(2, 5, 4)
    permutation = np.array([3, 0, 4, 2, 1])
    layer = Attention(score=score)
    out = ops.convert_to_numpy(layer(x, x))
    out_permuted = ops.convert_to_numpy(layer(x[:, permutation], x[:, permutation]))
    np.testing.assert_allclose(out_permuted, out[:, permutation], atol=1e-5)


@pytest.mark.parametrize("name", sorted(scores.ALIASES))
def test_every_score_name_works_through_the_layer(name):
    query, value = normal(2, 3, 4), normal(2, 5, 4)
    value_mask = np.array([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]], bool)
    layer = Attention(score=name)
    context, weights = layer(
        query, value, value_mask=value_mask, return_attention_scores=True
    )
    assert isinstance(layer.score_layer, scores.ALIASES[name])
    raw = ops.convert_to_numpy(layer.score_layer(query, value))
    reference = np_softmax(raw, value_mask[:, None, :])
    np.testing.assert_allclose(ops.convert_to_numpy(weights), reference, atol=1e-5)
    np.testing.assert_allclose(
        ops.convert_to_numpy(context), reference @ value, atol=1e-5
    )


def test_dropout_only_while_training():
    query, value = normal(2, 3, 4), normal(2, 5, 4)
    layer = Attention(score="dot", dropout=0.5, seed=0)
    _, inference = layer(query, value, return_attention_scores=True)
    _, dropped = layer(query, value, return_attention_scores=True, training=True)
    inference, dropped = ops.convert_to_numpy(inference), ops.convert_to_numpy(dropped)
    np.testing.assert_allclose(inference, np_dot_weights(query, value), atol=1e-6)
    kept = dropped != 0
    assert 0 < kept.mean() < 1
    np.testing.assert_allclose(dropped[kept], 2 * inference[kept], rtol=1e-5)


SCORE_CLASSES = {cls.__name__: name for name, cls in sorted(scores.ALIASES.items())}


@pytest.mark.parametrize("name", sorted(SCORE_CLASSES.values()))
def test_stacked_layers_fed_empty_rows_train_without_nan(name):
    # Padded queries and a sample whose memory is all padding give zero
    # rows, which the second layer scores (a zero vector for the cosine).
    tokens = keras.Input((5,), dtype="int32")
    memory_tokens = keras.Input((4,), dtype="int32")
    embedding = keras.layers.Embedding(10, 4, mask_zero=True)
    hidden = Attention(score=name)(embedding(tokens), embedding(memory_tokens))
    hidden = Attention(score=name)(hidden, hidden)
    outputs = keras.layers.GlobalAveragePooling1D()(hidden)
    model = keras.Model([tokens, memory_tokens], outputs)
    model.compile(optimizer="sgd", loss="mse")
    token_ids = np.array([[1, 2, 0, 0, 0], [3, 4, 5, 6, 7], [8, 0, 0, 0, 0]] * 2)
    memory_ids = np.array([[1, 2, 3, 0], [0, 0, 0, 0], [4, 5, 6, 7]] * 2)
    history = model.fit(
        [token_ids, memory_ids], normal(6, 4), epochs=2, batch_size=3, verbose=0
    )
    assert np.all(np.isfinite(history.history["loss"]))
    for weight in model.get_weights():
        assert np.all(np.isfinite(weight))


# --- Hard (stochastic) attention -----------------------------------------


@pytest.mark.parametrize("estimator", ["reinforce", "gumbel"])
def test_hard_training_selects_one_value_per_query(estimator):
    query, value = normal(2, 3, 4), normal(2, 5, 6)
    key = normal(2, 5, 4)
    context, weights = Attention(
        score="dot", mode="hard", hard_estimator=estimator, seed=7
    )(query, value, key, return_attention_scores=True, training=True)
    weights = ops.convert_to_numpy(weights)
    assert set(np.unique(weights)) <= {0.0, 1.0}
    np.testing.assert_array_equal(weights.sum(-1), 1.0)
    chosen = weights.argmax(-1)
    expected = np.take_along_axis(value, chosen[..., None], axis=1)
    np.testing.assert_allclose(ops.convert_to_numpy(context), expected, atol=1e-6)


def test_hard_inference_is_argmax_of_soft_weights():
    query, value = normal(2, 3, 4, scale=2.0), normal(2, 5, 4)
    value_mask = np.ones((2, 5), bool)
    value_mask[1, 3:] = False
    context, weights = Attention(score="dot", mode="hard")(
        query, value, value_mask=value_mask, return_attention_scores=True
    )
    soft = np_dot_weights(query, value, value_mask[:, None, :])
    expected = np.eye(5)[soft.argmax(-1)]
    np.testing.assert_array_equal(ops.convert_to_numpy(weights), expected)
    np.testing.assert_allclose(
        ops.convert_to_numpy(context), expected @ value, atol=1e-6
    )


@pytest.mark.parametrize("estimator", ["reinforce", "gumbel"])
@pytest.mark.parametrize("training", [False, True])
def test_hard_log_prob_is_log_of_chosen_soft_weight(estimator, training):
    query, value = normal(2, 3, 4), normal(2, 5, 4)
    value_mask = np.ones((2, 5), bool)
    value_mask[0, 3:] = False
    layer = Attention(score="dot", mode="hard", hard_estimator=estimator, seed=5)
    _, weights, log_prob, distribution = layer(
        query,
        value,
        value_mask=value_mask,
        return_attention_scores=True,
        return_log_prob=True,
        return_distribution=True,
        training=training,
    )
    soft = np_dot_weights(query, value, value_mask[:, None, :])
    np.testing.assert_allclose(ops.convert_to_numpy(distribution), soft, atol=1e-6)
    chosen = ops.convert_to_numpy(weights).argmax(-1)
    assert value_mask[0, chosen[0]].all()  # never a masked position
    expected = np.log(np.take_along_axis(soft, chosen[..., None], -1)[..., 0])
    np.testing.assert_allclose(ops.convert_to_numpy(log_prob), expected, atol=1e-5)


@pytest.mark.parametrize("estimator", ["reinforce", "gumbel"])
def test_hard_sampling_frequencies_follow_soft_weights(estimator):
    draws = 4000
    query, value = normal(1, 2, 3), normal(1, 5, 3)
    value_mask = np.array([[1, 1, 1, 1, 0]], bool)
    layer = Attention(score="dot", mode="hard", hard_estimator=estimator, seed=11)
    _, weights = layer(
        np.repeat(query, draws, 0),
        np.repeat(value, draws, 0),
        value_mask=np.repeat(value_mask, draws, 0),
        return_attention_scores=True,
        training=True,
    )
    frequencies = ops.convert_to_numpy(weights).mean(0)
    soft = np_dot_weights(query, value, value_mask[:, None, :])[0]
    assert np.all(frequencies[:, 4] == 0)
    np.testing.assert_allclose(frequencies, soft, atol=0.035)


@pytest.mark.tensorflow_only
def test_hard_gradients_flow_into_log_prob_not_through_sample():
    import tensorflow as tf

    query, value = tf.Variable(normal(2, 3, 4)), normal(2, 5, 4)
    directions = normal(2, 3, 4)
    layer = Attention(score="general", mode="hard", seed=2)
    with tf.GradientTape(persistent=True) as tape:
        context, log_prob = layer(query, value, return_log_prob=True, training=True)
        objective = tf.reduce_sum(context * directions)
        total_log_prob = tf.reduce_sum(log_prob)
    grad_log_prob = tape.gradient(total_log_prob, [query, *layer.trainable_weights])
    for grad in grad_log_prob:
        assert np.all(np.isfinite(grad)) and np.any(grad.numpy() != 0)
    grad_context = tape.gradient(objective, query)
    assert grad_context is None or np.all(grad_context.numpy() == 0)

    gumbel = Attention(score="dot", mode="hard", hard_estimator="gumbel", seed=2)
    with tf.GradientTape() as tape:
        context = gumbel(query, value, training=True)
        objective = tf.reduce_sum(context * directions)
    grad = tape.gradient(objective, query).numpy()
    assert np.all(np.isfinite(grad)) and np.any(grad != 0)


def test_hard_modes_train_in_a_compiled_model():
    tokens = keras.Input((5,), dtype="int32")
    embedded = keras.layers.Embedding(10, 4)(tokens)
    for estimator in ("reinforce", "gumbel"):
        context = Attention(mode="hard", hard_estimator=estimator, seed=1)(
            embedded, embedded
        )
        model = keras.Model(tokens, keras.layers.GlobalAveragePooling1D()(context))
        model.compile(optimizer="sgd", loss="mse")
        history = model.fit(
            RNG.integers(0, 10, (8, 5)), normal(8, 4), epochs=1, verbose=0
        )
        assert np.isfinite(history.history["loss"][0])


# --- Local attention -------------------------------------------------------


@pytest.mark.parametrize("tq", [3, 5, 7])
def test_local_monotonic_masks_outside_the_window(tq):
    window, tv = 1, 5
    query, value = normal(2, tq, 4), normal(2, tv, 4)
    value_mask = np.ones((2, tv), bool)
    value_mask[1, tv - 1 :] = False
    layer = Attention(score="dot", window=window)
    _, weights = layer(
        query, value, value_mask=value_mask, return_attention_scores=True
    )
    weights = ops.convert_to_numpy(weights)
    length = value_mask.sum(-1)  # S per sequence
    centre = np.minimum(np.arange(tq)[None, :], length[:, None] - 1)
    inside = np.abs(np.arange(tv)[None, None, :] - centre[..., None]) <= window
    allowed = inside & value_mask[:, None, :]
    assert np.all(weights[~allowed] == 0)
    np.testing.assert_allclose(
        weights, np_dot_weights(query, value, allowed), atol=1e-6
    )


def test_local_monotonic_query_positions_centre_the_window():
    query, value = normal(2, 1, 4), normal(2, 5, 4)
    _, weights = Attention(score="dot", window=1)(
        query,
        value,
        query_positions=np.array([[3], [0]]),
        return_attention_scores=True,
    )
    allowed = np.zeros((2, 1, 5), bool)
    allowed[0, 0, 2:5] = True
    allowed[1, 0, 0:2] = True
    np.testing.assert_allclose(
        ops.convert_to_numpy(weights), np_dot_weights(query, value, allowed), atol=1e-6
    )


@pytest.mark.parametrize("use_value_mask", [False, True])
def test_local_predictive_gaussian_matches_numpy(use_value_mask):
    window = 1
    query, value = normal(2, 3, 4, scale=2.0), normal(2, 5, 4)
    value_mask = np.ones((2, 5), bool)
    if use_value_mask:
        value_mask[0, 3:] = False
    layer = Attention(score="dot", window=window, local="predictive", local_units=6)
    outputs = layer(
        query,
        value,
        value_mask=value_mask if use_value_mask else None,
        return_attention_scores=True,
        return_distribution=True,
    )
    context, weights, distribution = map(ops.convert_to_numpy, outputs)
    w_p = ops.convert_to_numpy(layer.position_kernel)
    v_p = ops.convert_to_numpy(layer.position_scale)
    assert w_p.shape == (4, 6) and v_p.shape == (6,)

    length = value_mask.sum(-1)[:, None]
    centre = (length - 1) / (1 + np.exp(-np.tanh(query @ w_p) @ v_p))
    distance = np.arange(5)[None, None, :] - centre[..., None]
    allowed = (np.abs(distance) <= window) & value_mask[:, None, :]
    gaussian = np.exp(-(distance**2) / (2 * (window / 2) ** 2))
    expected = np_dot_weights(query, value, allowed) * gaussian
    np.testing.assert_allclose(weights, expected, atol=1e-5)
    np.testing.assert_allclose(context, expected @ value, atol=1e-5)
    renormalised = expected / expected.sum(-1, keepdims=True)
    np.testing.assert_allclose(distribution, renormalised, atol=1e-5)
    assert np.all(weights.sum(-1) < 1.0 + 1e-6)


def test_local_predictive_hard_samples_inside_the_window():
    query, value = normal(2, 3, 4), normal(2, 5, 4)
    layer = Attention(score="dot", mode="hard", window=1, local="predictive", seed=4)
    _, weights, distribution = layer(
        query,
        value,
        return_attention_scores=True,
        return_distribution=True,
        training=True,
    )
    weights, distribution = map(ops.convert_to_numpy, (weights, distribution))
    np.testing.assert_array_equal(weights.sum(-1), 1.0)
    assert np.all(distribution[weights == 1] > 0)


# --- Mixed precision -------------------------------------------------------


@pytest.mark.parametrize("name", ["mixed_float16", "mixed_bfloat16"])
@pytest.mark.parametrize(
    "kwargs",
    [
        {"score": "additive"},
        {"score": "dot", "mode": "hard"},
        {"score": "general", "window": 1, "local": "predictive"},
    ],
)
def test_mixed_precision_with_masks(policy, name, kwargs):
    policy(name)
    query, value = normal(2, 3, 4), normal(2, 5, 4)
    value_mask = np.array([[1, 1, 1, 0, 0], [0, 0, 0, 0, 0]], bool)
    query_mask = np.array([[1, 0, 1], [1, 1, 1]], bool)
    layer = Attention(**kwargs)
    context, weights = layer(
        query,
        value,
        query_mask=query_mask,
        value_mask=value_mask,
        return_attention_scores=True,
        training=True,
    )
    assert keras.backend.standardize_dtype(weights.dtype) == "float32"
    assert keras.backend.standardize_dtype(context.dtype) == name.split("_")[1]
    context = ops.convert_to_numpy(ops.cast(context, "float32"))
    weights = ops.convert_to_numpy(weights)
    assert np.all(np.isfinite(context)) and np.all(np.isfinite(weights))
    assert np.all(weights[1] == 0) and np.all(context[1] == 0)
    assert np.all(weights[0, 1] == 0) and np.all(weights[0, :, 3:] == 0)


# --- Functional models, masks and serialization ----------------------------


def test_functional_model_uses_implicit_masks_and_propagates_query_mask():
    query_tokens = keras.Input((None,), dtype="int32")
    value_tokens = keras.Input((None,), dtype="int32")
    embedding = keras.layers.Embedding(10, 4, mask_zero=True)
    layer = Attention(score="dot")
    context, weights = layer(
        embedding(query_tokens), embedding(value_tokens), return_attention_scores=True
    )
    pooled = keras.layers.GlobalAveragePooling1D()(context)
    model = keras.Model([query_tokens, value_tokens], [context, weights, pooled])

    q_ids = np.array([[1, 2, 0], [3, 0, 0]])
    v_ids = np.array([[4, 5, 6, 0], [7, 8, 0, 0]])
    context, weights, pooled = model.predict([q_ids, v_ids], verbose=0)
    table = ops.convert_to_numpy(embedding.embeddings)
    query, value = table[q_ids], table[v_ids]
    expected = np_dot_weights(
        query, value, (q_ids != 0)[..., None] & (v_ids != 0)[:, None]
    )
    np.testing.assert_allclose(weights, expected, atol=1e-6)
    np.testing.assert_allclose(context, expected @ value, atol=1e-6)
    # The pooling sees the query mask: it averages the valid rows only.
    valid = (q_ids != 0)[..., None]
    np.testing.assert_allclose(
        pooled, (context * valid).sum(1) / valid.sum(1), atol=1e-6
    )
    assert ops.convert_to_numpy(layer.compute_mask(query, q_ids != 0)).tolist() == (
        (q_ids != 0).tolist()
    )


CONFIGS = [
    {"score": "scaled_dot"},
    {"score": "bahdanau", "dropout": 0.1, "seed": 3},
    {"score": scores.Additive(units=3), "window": 2, "local": "predictive"},
    {"score": {"class_name": "general", "config": {}}, "mode": "hard", "window": 1},
    {"score": "dot", "mode": "hard", "hard_estimator": "gumbel", "temperature": 0.5},
]


@pytest.mark.parametrize("kwargs", CONFIGS)
def test_get_config_from_config_round_trip(kwargs):
    query, value = normal(2, 3, 4), normal(2, 5, 4)
    layer = Attention(**kwargs)
    expected = ops.convert_to_numpy(layer(query, value))
    config = layer.get_config()
    clone = Attention.from_config(config)
    assert clone.get_config() == config
    clone(query, value)
    clone.set_weights(layer.get_weights())
    np.testing.assert_allclose(ops.convert_to_numpy(clone(query, value)), expected)


def test_model_save_and_load_without_custom_objects(tmp_path):
    query, value = keras.Input((3, 4)), keras.Input((5, 4))
    value_mask = keras.Input((5,), dtype="bool")
    soft, soft_weights = Attention(
        score=scores.General(), window=1, local="predictive", name="soft"
    )(query, value, value_mask=value_mask, return_attention_scores=True)
    hard, log_prob = Attention(score="additive", mode="hard", name="hard")(
        query, value, return_log_prob=True
    )
    model = keras.Model(
        [query, value, value_mask], [soft, soft_weights, hard, log_prob]
    )
    inputs = [normal(2, 3, 4), normal(2, 5, 4), RNG.random((2, 5)) > 0.3]
    inputs[2][:, 0] = True
    expected = model.predict(inputs, verbose=0)

    path = tmp_path / "attention.keras"
    model.save(path)
    restored = keras.saving.load_model(path)
    assert isinstance(restored.get_layer("soft"), Attention)
    for got, want in zip(restored.predict(inputs, verbose=0), expected, strict=True):
        np.testing.assert_allclose(got, want, atol=1e-6)


# --- Errors ---------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, message, error",
    [
        ({"mode": "sparse"}, "mode='sparse'", ValueError),
        ({"local": "gaussian"}, "local='gaussian'", ValueError),
        ({"hard_estimator": "straight"}, "hard_estimator='straight'", ValueError),
        ({"window": 0}, "window=0", ValueError),
        ({"window": 1.5}, "window=1.5", TypeError),
        ({"dropout": 1.0}, "dropout=1.0", ValueError),
        ({"dropout": -0.1}, "dropout=-0.1", ValueError),
        ({"temperature": 0}, "temperature=0", ValueError),
        ({"local_units": 0}, "local_units=0", ValueError),
        ({"score": "nonsense"}, "score='nonsense'", ValueError),
        ({"score": 3}, "score=3", ValueError),
    ],
)
def test_bad_constructor_arguments(kwargs, message, error):
    with pytest.raises(error, match=message.replace(".", r"\.")):
        Attention(**kwargs)


def test_unknown_score_lists_valid_names():
    with pytest.raises(ValueError, match="bahdanau, concat"):
        Attention(score="nonsense")


@pytest.mark.parametrize(
    "shapes, message",
    [
        (((2, 3, 4), (3, 5, 4), None), "same batch size"),
        (((2, 3, 4), (2, 5, 4), (2, 6, 4)), "same length"),
        (((2, 3), (2, 5, 4), None), "rank 3"),
    ],
)
def test_bad_input_shapes(shapes, message):
    query_shape, value_shape, key_shape = shapes
    key = None if key_shape is None else normal(*key_shape)
    with pytest.raises(ValueError, match=message) as info:
        Attention(score="general")(normal(*query_shape), normal(*value_shape), key)
    assert "query.shape=" in str(info.value)


def test_bad_call_arguments():
    query, value = normal(1, 2, 3), normal(1, 4, 3)
    with pytest.raises(ValueError, match="return_log_prob"):
        Attention()(query, value, return_log_prob=True)
    with pytest.raises(ValueError, match="query_positions"):
        Attention()(query, value, query_positions=np.arange(2))
