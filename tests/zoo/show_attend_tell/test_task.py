"""`ShowAttendTell`: overfitting real scenes, presets, decoding, any image, dtype."""

import functools

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_attention.decoding import BeamSearch, GreedySearch
from zoo.base.task import Task
from zoo.data import scenes, vocabulary
from zoo.show_attend_tell import CaptionPreprocessor, ShowAttendTell

pytestmark = pytest.mark.tensorflow_only


@functools.lru_cache(maxsize=1)
def data():
    return scenes.load("train", num_scenes=48, sample=True)


@functools.lru_cache(maxsize=1)
def vocab():
    return vocabulary.train_wordpiece(data()["captions"], 100)


def tiny(seed=0, **kwargs):
    keras.utils.set_random_seed(seed)
    config = dict(annotation_dim=16, embedding_dim=16, units=32, dropout=0.0, seed=seed)
    config.update(kwargs)
    preprocessor = CaptionPreprocessor(vocab(), 32)
    return ShowAttendTell(len(vocab()), preprocessor=preprocessor, **config)


def compiled(model, learning_rate=3e-3):
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        weighted_metrics=["accuracy"],
    )
    return model


def randomize(model, seed=1, scale=0.3):
    """Weights no fresh model has, so a reload must really read them."""
    rng = np.random.default_rng(seed)
    # Trainable only: batch norm's moving variance must stay positive.
    for variable in model.trainable_weights:
        variable.assign(rng.normal(0, scale, variable.shape).astype("float32"))


@pytest.fixture(scope="module")
def random_model():
    """A tiny model with weights no fresh model has, shared by the tests that
    only read it: each new model traces its own decoding functions."""
    model = tiny(seed=3)
    randomize(model, seed=3, scale=0.2)
    return model


def decode(model, images, search):
    """`search`'s tokens and scores `(batch,)` for `caption`'s longest output."""
    pre = model.preprocessor
    max_length = pre.sequence_length
    cache = model.encode(pre.images(images), max_length)
    prompt = np.zeros((len(images), 1 + max_length), "int32")
    prompt[:, 0] = pre.start_id
    tokens, scores = search(
        model.next,
        prompt,
        cache=cache,
        index=1,
        stop_token_ids=[pre.end_id],
        pad_token_id=pre.pad_id,
        return_scores=True,
    )
    return np.asarray(tokens), np.asarray(scores)


def test_tiny_model_overfits_a_handful_of_scenes():
    images, captions = scenes.pairs(data())
    images, captions = images[:4], captions[:4]
    model = compiled(tiny(attention_regularization=0.0), 1e-2)
    # 30 copies per epoch: 30 steps of batch 4 per epoch, 180 in all.
    history = model.fit(
        np.tile(images, (30, 1, 1, 1)), captions * 30, batch_size=4, epochs=6, verbose=0
    )
    # The last epoch's loss moves with the CPU's float kernels (0.028 to
    # 0.042 measured over seeds 0-2 and 1 or 2 threads): assert a drop by
    # 10x from about 2.5, not where it lands.
    assert history.history["loss"][-1] < 0.25 < 1.0 < history.history["loss"][0]
    # Inference reads the encoder's batch-norm moving averages, which 180
    # steps leave short of the batch statistics the training loss saw: the
    # greedy captions were all four right on an AMD EPYC and one of four on
    # an Intel Xeon (teacher-forced accuracy 0.91, training-mode 1.0). What
    # holds on any CPU: the inference-mode loss falls too, and most words of
    # the memorized captions come out right.
    measured = model.evaluate(
        images, captions, batch_size=4, verbose=0, return_dict=True
    )
    assert measured["loss"] < 0.5 and measured["accuracy"] > 0.8, measured
    # Beam search may find a caption the model likes better than the memorized
    # one; under the same model (log-probability, `caption`'s length penalty
    # 0) it never scores worse than greedy decoding.
    _, greedy_scores = decode(model, images, GreedySearch())
    _, beam_scores = decode(model, images, BeamSearch(3, length_penalty=0.0))
    assert np.all(beam_scores >= greedy_scores - 1e-4), (beam_scores, greedy_scores)


def test_beam_width_one_equals_greedy_search(random_model):
    model = random_model
    images = scenes.pairs(data())[0][:6]
    pre = model.preprocessor
    cache = model.encode(pre.images(images), 11)
    prompt = np.zeros((6, 12), "int32")
    prompt[:, 0] = pre.start_id
    kwargs = dict(
        cache=cache, index=1, stop_token_ids=[pre.end_id], pad_token_id=pre.pad_id
    )
    greedy = GreedySearch()(model.next, prompt, **kwargs)
    beam = BeamSearch(beam_width=1, length_penalty=0.0)(model.next, prompt, **kwargs)
    np.testing.assert_array_equal(np.asarray(greedy), np.asarray(beam))
    assert model.caption(images, beam_width=1, max_length=11) == pre.detokenize(
        np.asarray(greedy)[:, 1:]
    )


def test_teacher_forced_logits_equal_step_by_step_decoding(random_model):
    model = random_model
    images, captions = scenes.pairs(data())
    x, _, _ = model.preprocessor(images[:5], tf.constant(captions[:5]))
    logits = np.asarray(model(x, training=False)["logits"])
    np.testing.assert_allclose(
        logits, model.predict(x, verbose=0), rtol=1e-4, atol=1e-5
    )
    cache = model.encode(x)
    ids = np.asarray(x["decoder_token_ids"])
    for t in range(ids.shape[1]):
        step, _, cache = model.next(ids, cache, t + 1)
        real = ids[:, t] != 0
        np.testing.assert_allclose(
            np.asarray(step)[real], logits[real, t], rtol=1e-4, atol=1e-4
        )


def test_save_and_load_preset_round_trip(tmp_path, random_model):
    model = random_model
    images = scenes.pairs(data())[0][:3]
    before = model.caption(images, beam_width=2)
    model.save_to_preset(str(tmp_path / "preset"), metadata={"note": "test"})
    loaded = Task.from_preset(str(tmp_path / "preset"))
    assert isinstance(loaded, ShowAttendTell)
    assert loaded.preset_metadata["note"] == "test"
    assert loaded.get_config() == model.get_config()
    for a, b in zip(model.weights, loaded.weights):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert loaded.caption(images, beam_width=2) == before
    keras.utils.set_random_seed(99)  # Fresh weights whatever ran before.
    fresh = ShowAttendTell.from_preset(str(tmp_path / "preset"), load_weights=False)
    assert fresh.caption(images, beam_width=2) != before


def test_fit_on_tf_data_of_raw_pairs_and_a_distribution_strategy():
    images, captions = scenes.pairs(data())
    ds = tf.data.Dataset.from_tensor_slices((images[:16], tf.constant(captions[:16])))
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    with strategy.scope():
        model = compiled(tiny(seed=6))
    history = model.fit(ds, batch_size=8, epochs=1, verbose=0)
    assert model.optimizer.iterations.numpy() == 2
    assert np.isfinite(history.history["loss"][0])


def test_caption_returns_attention_maps_per_word(random_model):
    model = random_model
    image = scenes.pairs(data())[0][0]
    text, maps = model.caption(image, beam_width=1, return_attention=True)
    assert isinstance(text, str)
    assert maps["weights"].shape == (len(maps["tokens"]), 7, 7)
    np.testing.assert_allclose(maps["weights"].sum(axis=(1, 2)), 1.0, rtol=1e-5)
    pre = model.preprocessor
    ids = [pre.tokenizer.token_to_id(t) for t in maps["tokens"]]
    assert pre.detokenize([ids]) == [text]


def test_keras_applications_backbone_offline_and_from_a_local_file(tmp_path):
    backbone = keras.applications.MobileNetV2(
        include_top=False, weights=None, input_shape=(64, 64, 3)
    )
    randomize(backbone, seed=8, scale=0.05)
    path = str(tmp_path / "mobilenet.weights.h5")
    backbone.save_weights(path)
    model = tiny(
        image_shape=(64, 64, 1),
        backbone="MobileNetV2",
        backbone_weights=path,
        freeze_backbone=True,
    )
    loaded = model.get_layer(backbone.name)
    for a, b in zip(backbone.weights, loaded.weights):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert not loaded.trainable and model.grid_shape == (2, 2)
    assert model.get_config()["backbone_weights"] is None
    offline = tiny(image_shape=(64, 64, 3), backbone="MobileNetV2")
    out = offline(
        {"images": np.zeros((2, 64, 64, 3)), "decoder_token_ids": np.ones((2, 4))}
    )
    assert tuple(out["logits"].shape) == (2, 4, len(vocab()))
    assert tuple(out["coverage"].shape) == (2, 4)


def test_invalid_arguments_raise():
    with pytest.raises(ValueError, match="units"):
        ShowAttendTell(10, units=0)
    with pytest.raises(ValueError, match="image_shape"):
        ShowAttendTell(10, image_shape=(84, 84))
    with pytest.raises(ValueError, match="backbone"):
        ShowAttendTell(10, backbone="NoSuchNet")
    with pytest.raises(ValueError, match="attention"):
        ShowAttendTell(10, attention="medium")
    for dropout in (1.0, -0.1, False, "0.2"):  # a bool is not a rate
        with pytest.raises(ValueError, match=f"dropout={dropout!r}"):
            ShowAttendTell(10, dropout=dropout)


def test_caption_takes_any_size_and_channel_count(random_model):
    model = random_model
    gray = scenes.pairs(data())[0][:2, ..., 0]  # (2, 84, 84) uint8
    expected = model.caption(gray, beam_width=1)
    # An RGB copy: luminance of equal channels is the gray image.
    rgb = np.repeat(gray[..., None], 3, axis=-1)
    assert model.caption(rgb, beam_width=1) == expected
    assert model.caption(rgb[0], beam_width=1) == expected[0]  # one (H, W, 3) image
    rgba = np.concatenate([rgb, np.full_like(rgb[..., :1], 255)], axis=-1)
    assert model.caption(rgba, beam_width=1) == expected
    # Any size: a 2x nearest upscale resized back (bilinear) to 84x84.
    big = np.kron(gray, np.ones((1, 2, 2), "uint8"))
    x = model.preprocessor.images(big)
    assert tuple(x.shape) == (2, 84, 84, 1)
    assert isinstance(model.caption(big, beam_width=1)[0], str)
    assert isinstance(model.caption(np.full((30, 50, 3), 0.5), beam_width=1), str)


def test_attention_maps_equal_the_captions_maps(random_model):
    model = random_model
    images = scenes.pairs(data())[0][:3]
    texts, maps = model.caption(images, beam_width=2, return_attention=True)
    tokens = model.generate(model.preprocessor.images(images), beam_width=2)
    again = model.attention_maps(images, tokens)
    for a, b in zip(maps, again):
        assert a["tokens"] == b["tokens"]
        np.testing.assert_allclose(a["weights"], b["weights"], rtol=1e-5, atol=1e-6)


def test_coverage_penalty_runs_and_keeps_beam_one_greedy(random_model):
    model = random_model
    images = scenes.pairs(data())[0][:3]
    penalised = model.caption(images, beam_width=3, coverage_penalty=0.5)
    assert len(penalised) == 3 and all(isinstance(t, str) for t in penalised)
    assert model.caption(images, beam_width=1, coverage_penalty=0.5) == model.caption(
        images, beam_width=1
    )


def test_mixed_bfloat16_round_trip():
    model = tiny(seed=12, dtype="mixed_bfloat16")
    config = model.get_config()
    assert config["dtype"]["config"]["name"] == "mixed_bfloat16"
    restored = ShowAttendTell.from_config(config)
    assert restored.dtype_policy.name == "mixed_bfloat16"
    assert restored.backbone.dtype_policy.name == "mixed_bfloat16"
    assert restored.get_layer("logits").compute_dtype == "bfloat16"
    assert restored.get_config() == config


def test_a_given_backbone_is_used_and_checked():
    from zoo.show_attend_tell import ShowAttendTellBackbone

    backbone = ShowAttendTellBackbone(
        len(vocab()), annotation_dim=16, embedding_dim=16, units=32, seed=0
    )
    model = ShowAttendTell(backbone=backbone, dropout=0.0)
    assert model.backbone is backbone and model.units == 32
    assert model.get_config()["backbone"] == "small"
    rebuilt = ShowAttendTell.from_config(model.get_config())
    assert rebuilt.count_params() == model.count_params()
    with pytest.raises(ValueError, match="units"):
        ShowAttendTell(backbone=backbone, units=64)
