"""RecurrentAttentionModel (the task): inputs, hybrid loss, learning, verbs, saving."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from zoo.data import fashion_mnist
from zoo.ram import RecurrentAttentionModel

pytestmark = pytest.mark.tensorflow_only

RNG = np.random.default_rng(0)
CE = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def tiny(**kwargs):
    options = dict(
        num_classes=4,
        num_glimpses=3,
        patch_size=4,
        num_scales=2,
        glimpse_units=8,
        location_units=8,
        glimpse_output_units=16,
        units=16,
        seed=0,
    )
    options.update(kwargs)
    model = RecurrentAttentionModel(**options)
    model.compile(keras.optimizers.Adam(1e-2), CE, metrics=["accuracy"])
    return model


def np_log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def test_predict_takes_uint8_float_rgb_and_any_size():
    model = tiny()
    pixels = RNG.integers(0, 256, (3, 28, 28), dtype="uint8")
    from_uint8 = model.predict(pixels, verbose=0)
    from_float = model.predict((pixels / 255.0).astype("float32")[..., None], verbose=0)
    assert from_uint8.shape == (3, 4)
    np.testing.assert_allclose(from_uint8, from_float, rtol=1e-5, atol=1e-6)
    grey_rgb = np.repeat(pixels[..., None], 3, axis=-1)
    np.testing.assert_allclose(
        model.predict(grey_rgb, verbose=0), from_uint8, rtol=1e-4, atol=1e-4
    )
    for size in [(17, 40), (100, 100)]:
        images = RNG.integers(0, 256, (2, *size), dtype="uint8")
        assert model.predict(images, verbose=0).shape == (2, 4)
        locations = model.glimpses(images)
        assert locations.shape == (2, 3, 2)
        np.testing.assert_array_equal(locations[:, 0], 0.0)  # starts at the centre
        assert np.all(np.abs(locations) <= 1.0)


def test_inference_is_deterministic_and_training_samples():
    model = tiny()
    images = RNG.uniform(size=(4, 20, 20, 1)).astype("float32")
    first = model(images, training=False)["locations"].numpy()
    np.testing.assert_array_equal(first, model(images, training=False)["locations"])
    a = model(images, training=True)["locations"].numpy()
    b = model(images, training=True)["locations"].numpy()
    assert not np.allclose(a[:, 1:], b[:, 1:])
    assert not np.allclose(a[:, 1:], first[:, 1:])


def test_monte_carlo_samples_average_probabilities():
    model = tiny(test_samples=5)
    images = RNG.uniform(size=(3, 20, 20, 1)).astype("float32")
    out = model(images, training=False)
    assert out["logits"].shape == (3, 4)
    assert out["locations"].shape == (3, 3, 2)
    # Log of a probability average: exp sums to one, and differs from the
    # mean path (samples are drawn).
    np.testing.assert_allclose(np.exp(out["logits"].numpy()).sum(-1), 1.0, rtol=1e-5)
    mean_path = tiny(test_samples=1)
    mean_path.set_weights(model.get_weights())
    assert not np.allclose(
        mean_path(images)["locations"][:, 1:], out["locations"][:, 1:]
    )


# --- Hybrid loss --------------------------------------------------------------------


def test_hybrid_loss_matches_numpy():
    model = tiny(discount=0.9, reinforce_weight=0.5)
    images = RNG.uniform(size=(8, 20, 20, 1)).astype("float32")
    labels = RNG.integers(0, 4, 8).astype("int32")
    y_pred = model(images, training=True)
    loss = model.compute_loss(images, labels, y_pred, training=True).numpy()
    logits, log_probs, baselines = (
        y_pred[k].numpy() for k in ("logits", "log_probs", "baselines")
    )
    ce = -np_log_softmax(logits)[np.arange(8), labels].mean()
    reward = (logits.argmax(-1) == labels).astype("float32")
    returns = reward[:, None] * np.array([0.9, 1.0])[None, :]  # T - 1 = 2 steps
    reinforce = -(log_probs * (returns - baselines)).sum(1).mean()
    baseline_loss = ((returns - baselines) ** 2).sum(1).mean()
    np.testing.assert_allclose(
        loss, ce + 0.5 * reinforce + baseline_loss, rtol=1e-5, atol=1e-6
    )


def _gradients(model, images, labels):
    with tf.GradientTape() as tape:
        y_pred = model(images, training=True)
        loss = model.compute_loss(images, labels, y_pred, training=True)
    variables = model.trainable_variables
    grads = tape.gradient(loss, variables)
    return {
        v.path: (None if g is None else g.numpy()) for v, g in zip(variables, grads)
    }


def _by_part(grads, part):
    return {k: v for k, v in grads.items() if f"/{part}/" in k}


def test_reinforce_reaches_the_policy_only_through_log_pi():
    images = RNG.uniform(size=(16, 20, 20, 1)).astype("float32")
    labels = RNG.integers(0, 4, 16).astype("int32")
    with_reinforce = tiny(reinforce_weight=1.0)
    without = tiny(reinforce_weight=0.0)
    without.set_weights(with_reinforce.get_weights())
    # Same seed, same sampled paths: the models differ only in the weight.
    g1 = _gradients(with_reinforce, images, labels)
    g0 = _gradients(without, images, labels)
    policy1, policy0 = _by_part(g1, "location_policy"), _by_part(g0, "location_policy")
    assert policy1
    # The classification loss does not reach the policy through the sampled
    # locations (stop_gradient), so without REINFORCE it gets no gradient...
    for grad in policy0.values():
        assert grad is None or not np.any(grad)
    # ... and with REINFORCE it does.
    assert any(np.any(g) for g in policy1.values() if g is not None)
    # REINFORCE does not move the core, the glimpse network, the classifier
    # or the baseline (the advantage is stop-gradient'ed).
    for part in ("core", "glimpse_network", "classifier", "baseline"):
        for name, grad in _by_part(g1, part).items():
            np.testing.assert_allclose(grad, g0[name], rtol=1e-5, atol=1e-7)
    # The baseline learns from its squared error.
    assert any(np.any(g) for g in _by_part(g1, "baseline").values())


def test_reinforce_core_lets_the_policy_gradient_train_the_core():
    images = RNG.uniform(size=(16, 20, 20, 1)).astype("float32")
    labels = RNG.integers(0, 4, 16).astype("int32")
    with_reinforce = tiny(reinforce_weight=1.0, reinforce_core=True)
    without = tiny(reinforce_weight=0.0, reinforce_core=True)
    without.set_weights(with_reinforce.get_weights())
    g1 = _gradients(with_reinforce, images, labels)
    g0 = _gradients(without, images, labels)
    core = _by_part(g1, "core")
    assert core
    assert any(not np.allclose(g, g0[k], rtol=1e-4, atol=1e-6) for k, g in core.items())
    # Still never through the sampled locations: no REINFORCE, no policy
    # gradient; and the classifier and baseline are unaffected.
    for grad in _by_part(g0, "location_policy").values():
        assert grad is None or not np.any(grad)
    for part in ("classifier", "baseline"):
        for name, grad in _by_part(g1, part).items():
            np.testing.assert_allclose(grad, g0[name], rtol=1e-5, atol=1e-7)


def test_one_glimpse_has_no_policy_loss():
    model = tiny(num_glimpses=1)
    images = RNG.uniform(size=(4, 20, 20, 1)).astype("float32")
    labels = np.zeros(4, "int32")
    y_pred = model(images, training=True)
    assert y_pred["log_probs"].shape == (4, 0)
    loss = model.compute_loss(images, labels, y_pred).numpy()
    ce = -np_log_softmax(y_pred["logits"].numpy())[:, 0].mean()
    np.testing.assert_allclose(loss, ce, rtol=1e-5)


def test_fit_and_evaluate_report_reward_and_losses():
    model = tiny()
    images = RNG.integers(0, 256, (64, 24, 24), dtype="uint8")
    labels = RNG.integers(0, 4, 64)
    history = model.fit(images, labels, batch_size=16, epochs=1, verbose=0)
    for key in ("loss", "accuracy", "reward", "reinforce_loss", "baseline_loss"):
        assert key in history.history
    scores = model.evaluate(images, labels, batch_size=16, verbose=0, return_dict=True)
    # At inference the path is the mean, so the reward is the accuracy.
    np.testing.assert_allclose(scores["reward"], scores["accuracy"], rtol=1e-6)


# --- Learning: the answer is only visible in one corner --------------------------


def corner_task(n, seed):
    """48x48 blank images; the class lights one 4x4 quadrant of the
    bottom-right 8x8 block (rows and columns 40-47), which the first glimpse,
    at the centre, cannot see: its coarsest 32x32 patch covers pixels 8-39."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 4, n)
    images = np.zeros((n, 48, 48), "float32")
    for i, c in enumerate(labels):
        r, q = divmod(int(c), 2)
        images[i, 40 + 4 * r : 44 + 4 * r, 40 + 4 * q : 44 + 4 * q] = 1.0
    return images, labels.astype("int32")


def test_learns_to_look_in_the_corner():
    # Asserts that the agent learns within a budget, not after how many
    # epochs exactly: the trajectory differs between CPUs (one machine is
    # there after 6 epochs, another after 7).
    keras.utils.set_random_seed(0)
    model = RecurrentAttentionModel(
        num_classes=4,
        num_glimpses=2,
        patch_size=8,
        num_scales=3,
        glimpse_units=32,
        location_units=16,
        glimpse_output_units=32,
        units=32,
        location_std=0.25,
        seed=0,
    )
    model.compile(keras.optimizers.Adam(1e-2), CE, metrics=["accuracy"])
    x, y = corner_task(2048, seed=0)
    x_test, y_test = corner_task(512, seed=1)
    accuracies = []
    for _ in range(20):
        model.fit(x, y, batch_size=64, epochs=1, verbose=0)
        scores = model.evaluate(x_test, y_test, verbose=0, return_dict=True)
        accuracies.append(round(scores["accuracy"], 3))
        if accuracies[-1] > 0.95:
            break
    # Chance: 0.25; the first glimpse sees nothing.
    assert accuracies[-1] > 0.95, accuracies
    # The second glimpse moved towards (1, 1): from y, x > 0.3 its coarsest
    # patch covers the block.
    second = model.glimpses(x_test[:64])[:, 1]
    assert np.all(second > 0.3), second.min(axis=0)


# --- Serialization --------------------------------------------------------------------


@pytest.mark.parametrize("glimpse_filters", [None, (3, 5)])
def test_preset_round_trip(tmp_path, glimpse_filters):
    model = tiny(
        cell="lstm", test_samples=1, discount=0.95, glimpse_filters=glimpse_filters
    )
    images = RNG.integers(0, 256, (5, 30, 30), dtype="uint8")
    model.fit(images, RNG.integers(0, 4, 5), epochs=1, verbose=0)
    expected = model.predict(images, verbose=0)
    model.save_to_preset(str(tmp_path / "ram"), metadata={"note": "test"})
    loaded = RecurrentAttentionModel.from_preset(str(tmp_path / "ram"))
    # (The trained preprocessor's serialization also holds a build config.)
    drop = {"preprocessor"}
    assert {k: v for k, v in loaded.get_config().items() if k not in drop} == {
        k: v for k, v in model.get_config().items() if k not in drop
    }
    assert loaded.preprocessor.get_config() == model.preprocessor.get_config()
    assert loaded.preset_metadata["note"] == "test"
    np.testing.assert_allclose(loaded.predict(images, verbose=0), expected, rtol=1e-5)
    np.testing.assert_allclose(loaded.glimpses(images), model.glimpses(images))
    path = str(tmp_path / "ram.keras")
    model.save(path)
    again = keras.saving.load_model(path)
    np.testing.assert_allclose(again.predict(images, verbose=0), expected, rtol=1e-5)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"num_glimpses": 0}, "num_glimpses"),
        ({"cell": "gru"}, "cell"),
        ({"channels": 2}, "channels"),
        ({"discount": 0.0}, "discount"),
        ({"location_std": -1.0}, "std"),
        ({"test_samples": 0}, "test_samples"),
        ({"glimpse_filters": (8, 0)}, "glimpse_filters"),
    ],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        RecurrentAttentionModel(**kwargs)


# --- classify and class names ---------------------------------------------------


def test_classify_returns_the_top_k_names_in_order_with_softmax_probabilities():
    names = ["w", "x", "y", "z"]
    model = tiny(class_names=names)
    images = RNG.integers(0, 256, (3, 20, 20), dtype="uint8")
    logits = model.predict(images, verbose=0)
    expected = np.exp(logits - logits.max(-1, keepdims=True))
    expected /= expected.sum(-1, keepdims=True)
    found, probabilities = model.classify(images, top_k=4)
    assert found.shape == probabilities.shape == (3, 4)
    for row in range(3):
        order = np.argsort(-expected[row], kind="stable")
        assert found[row].tolist() == [names[i] for i in order]
        np.testing.assert_allclose(probabilities[row], expected[row][order], rtol=1e-5)
    top, top_probability = model.classify(images)
    assert top.shape == (3, 1) and top[:, 0].tolist() == found[:, 0].tolist()
    np.testing.assert_allclose(top_probability[:, 0], probabilities[:, 0])


@pytest.mark.parametrize(
    "top_k, error",
    [(0, ValueError), (5, ValueError), (1.5, TypeError), (True, TypeError)],
)
def test_classify_refuses_a_bad_top_k(top_k, error):
    model = tiny(class_names=list("abcd"))
    with pytest.raises(error, match=r"top_k"):
        model.classify(np.zeros((1, 8, 8), "uint8"), top_k=top_k)


@pytest.mark.parametrize(
    "images, error",
    [
        (np.zeros((8, 8), "uint8"), ValueError),  # not a batch
        (np.zeros((1, 8, 8, 2), "uint8"), ValueError),  # 2 channels
        (np.array([["a"]]), TypeError),
        (object(), TypeError),
    ],
)
def test_classify_refuses_bad_images_naming_the_argument(images, error):
    model = tiny(class_names=list("abcd"))
    with pytest.raises(error, match=r"images"):
        model.classify(images)


def test_classify_without_class_names_says_how_to_give_them():
    model = tiny()
    assert model.class_names is None
    with pytest.raises(ValueError, match="class_names"):
        model.classify(np.zeros((1, 8, 8), "uint8"))
    model.class_names = list("abcd")
    assert model.classify(np.zeros((1, 8, 8), "uint8"))[0].shape == (1, 1)


@pytest.mark.parametrize(
    "class_names, error",
    [
        (["a", "b"], ValueError),  # 2 names, 4 classes
        ("abcd", TypeError),
        ([1, 2, 3, 4], TypeError),
        (4, TypeError),
    ],
)
def test_bad_class_names(class_names, error):
    with pytest.raises(error, match="class_names"):
        tiny(class_names=class_names)


def test_class_names_fall_back_to_fashion_mnist_only_for_its_presets():
    model = RecurrentAttentionModel(num_classes=10, num_glimpses=1)
    model.preset_metadata = {"task": "Fashion-MNIST classification, translated 60x60"}
    assert model.class_names == tuple(fashion_mnist.CLASS_NAMES)
    assert model.get_config()["class_names"] == list(fashion_mnist.CLASS_NAMES)
    model.preset_metadata = {"task": "digits"}
    assert model.class_names is None


# --- Keras surface -----------------------------------------------------------------


def test_config_round_trip_keeps_mixed_bfloat16_and_class_names():
    model = tiny(dtype="mixed_bfloat16", class_names=list("abcd"))
    config = model.get_config()
    clone = RecurrentAttentionModel.from_config(config)
    assert clone.dtype_policy.name == "mixed_bfloat16"
    assert clone.backbone.dtype_policy.name == "mixed_bfloat16"
    assert clone.class_names == ("a", "b", "c", "d")
    assert clone.get_config() == config
    json_config = keras.saving.serialize_keras_object(model)
    again = keras.saving.deserialize_keras_object(json_config)
    assert again.dtype_policy.name == "mixed_bfloat16"
    logits = again.predict(np.zeros((2, 12, 12), "uint8"), verbose=0)
    assert logits.shape == (2, 4) and np.isfinite(logits).all()


def test_the_task_graph_calls_the_backbone():
    model = tiny()
    assert [layer.name for layer in model.layers] == ["images", "backbone"]
    assert model.backbone.get_config()["num_glimpses"] == model.num_glimpses
    images = RNG.integers(0, 256, (2, 16, 16), dtype="uint8")
    direct = model.backbone(images[..., None])["logits"]
    logits = model.predict(images, verbose=0)
    np.testing.assert_allclose(logits, direct, rtol=1e-5, atol=1e-5)


def test_look_matches_predict_in_any_batching_and_takes_first_locations():
    model = tiny()
    images = RNG.integers(0, 256, (5, 30, 30), dtype="uint8")
    locations, logits = model.look(images, batch_size=2)
    whole_locations, whole_logits = model.look(images, batch_size=5)
    np.testing.assert_allclose(locations, whole_locations, atol=1e-6)
    np.testing.assert_allclose(logits, whole_logits, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(logits, model.predict(images, verbose=0), atol=1e-5)
    # glimpses() batches by 256, look() above by 2: float32 results of different
    # batch shapes may differ in the last bits (issue 38).
    np.testing.assert_allclose(model.glimpses(images), locations, atol=1e-6)
    first = RNG.uniform(-1, 1, (5, 2)).astype("float32")
    moved, _ = model.look(images, first_locations=first, batch_size=2)
    np.testing.assert_allclose(moved[:, 0], first, atol=1e-6)
    with pytest.raises(ValueError, match=r"first_locations.*\(5, 2\).*\(4, 2\)"):
        model.look(images, first_locations=first[:4])
    with pytest.raises(ValueError, match="batch_size.*0"):
        model.look(images, batch_size=0)
