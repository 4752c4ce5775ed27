"""`TransformerCaptioner`: build, fit, decode (cached = uncached), presets, config."""

import functools

import keras
import numpy as np
import pytest
from keras import ops

from keras_attention.decoding import BeamSearch, GreedySearch
from zoo.base.task import Task
from zoo.captioning import CaptionPreprocessor
from zoo.data import scenes, vocabulary
from zoo.transformer_captioner import (
    TransformerCaptioner,
    TransformerCaptionerBackbone,
)

pytestmark = pytest.mark.tensorflow_only

SIZES = dict(hidden_dim=16, intermediate_dim=32, num_heads=2, dropout=0.0)


@functools.lru_cache(maxsize=1)
def data():
    return scenes.load("train", num_scenes=32, sample=True)


@functools.lru_cache(maxsize=1)
def vocab():
    return vocabulary.train_wordpiece(data()["captions"], 100)


def tiny(seed=0, sequence_length=16, **kwargs):
    keras.utils.set_random_seed(seed)
    preprocessor = CaptionPreprocessor(vocab(), sequence_length)
    return TransformerCaptioner(
        len(vocab()), preprocessor=preprocessor, **{**SIZES, **kwargs}
    )


def randomize(model, seed=1, scale=0.3):
    """Weights no fresh model has, so a reload must really read them."""
    rng = np.random.default_rng(seed)
    for variable in model.trainable_weights:  # batch norm's variances stay
        variable.assign(rng.normal(0, scale, variable.shape).astype("float32"))


@pytest.fixture(scope="module")
def random_model():
    model = tiny(seed=3)
    randomize(model, seed=3)
    return model


def prepared(model, count=3):
    return model.preprocessor.images(data()["images"][:count])


def decode(model, images, search, max_length=8):
    pre = model.preprocessor
    prompt = np.full((len(images), max_length + 1), pre.pad_id, "int32")
    prompt[:, 0] = pre.start_id
    tokens, scores = model.run_search(
        search,
        images,
        ops.convert_to_tensor(prompt),
        stop_token_ids=[pre.end_id],
        pad_token_id=pre.pad_id,
        return_scores=True,
    )
    return ops.convert_to_numpy(tokens), ops.convert_to_numpy(scores)


def test_forward_pass_shapes_and_backbone_outputs():
    model = tiny()
    ids = np.array([[2, 5, 6, 0], [2, 7, 0, 0]], "int32")
    x = {"images": np.zeros((2, 84, 84, 1), "float32"), "decoder_token_ids": ids}
    assert tuple(model(x).shape) == (2, 4, len(vocab()))
    outputs = model.backbone(x)
    assert tuple(outputs["encoder_sequence_output"].shape) == (2, 49, 16)
    assert model.grid_shape == (7, 7) and model.hidden_dim == 16


@pytest.mark.parametrize(
    "argument, value",
    [
        ("hidden_dim", 0),
        ("num_heads", 3),  # does not divide hidden_dim=16
        ("decoder_layers", 0),
        ("dropout", 1.0),
        ("image_shape", (84, 84)),
    ],
)
def test_bad_arguments_are_refused_by_name(argument, value):
    with pytest.raises(ValueError, match=argument):
        TransformerCaptioner(10, **{**SIZES, argument: value})


def test_fit_on_raw_pairs_lowers_the_loss_and_changes_every_weight():
    model = tiny(seed=1, image_shape=(28, 28, 1))  # 3x3 grid: a cheap step
    model.compile(
        optimizer=keras.optimizers.Adam(3e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    images, captions = data()["images"][:8, ..., None], data()["captions"][:8]
    before = [np.array(w) for w in model.trainable_weights]
    history = model.fit(images, captions, batch_size=8, epochs=3, verbose=0)
    after = [np.array(w) for w in model.trainable_weights]
    assert not any(np.allclose(a, b) for a, b in zip(before, after))
    assert history.history["loss"][-1] < history.history["loss"][0]


def test_cached_steps_equal_the_teacher_forced_forward_pass(random_model):
    model = random_model
    images = prepared(model)
    tokens = np.array([[2, 5, 6, 7, 3], [2, 8, 9, 3, 0], [2, 4, 4, 4, 4]], "int32")
    full = ops.convert_to_numpy(
        model(
            {
                "images": images,
                "decoder_token_ids": ops.convert_to_tensor(tokens[:, :-1]),
            }
        )
    )
    cache = model.encode(images, max_length=4)
    prompt = ops.convert_to_tensor(tokens)
    for index in range(1, 5):
        logits, _, cache = model.next(prompt, cache, index)
        np.testing.assert_allclose(
            ops.convert_to_numpy(logits), full[:, index - 1], rtol=1e-4, atol=1e-4
        )
    # The cached attention (`token_attention`) is the uncached one's mean
    # over the heads.
    cached = model.token_attention(images, tokens)
    heads = model.head_attention(images, tokens)
    np.testing.assert_allclose(cached, heads.mean(axis=1), rtol=1e-4, atol=1e-5)


def test_beam_search_scores_at_least_greedy_and_width_one_is_greedy(random_model):
    images = prepared(random_model)
    greedy, greedy_scores = decode(random_model, images, GreedySearch())
    beam, beam_scores = decode(random_model, images, BeamSearch(beam_width=4))
    assert np.all(beam_scores >= greedy_scores - 1e-4)
    one, _ = decode(random_model, images, BeamSearch(beam_width=1))
    np.testing.assert_array_equal(one, greedy)


def test_caption_greedy_and_beam_with_attention_maps(random_model):
    images = data()["images"][:3]
    texts, maps = random_model.caption(
        images, beam_width=3, max_length=6, return_attention=True
    )
    assert len(texts) == len(maps) == 3 and all(isinstance(t, str) for t in texts)
    for m in maps:
        assert 1 <= len(m["tokens"]) <= 6
        assert m["weights"].shape == (len(m["tokens"]), 7, 7)
        np.testing.assert_allclose(m["weights"].sum(axis=(1, 2)), 1.0, rtol=1e-5)
    # One image in, one string out; `attention_maps` of the greedy caption's
    # own tokens gives the maps `caption` returned with it.
    text, single = random_model.caption(
        images[0], beam_width=1, max_length=6, return_attention=True
    )
    assert isinstance(text, str) and single["weights"].shape[1:] == (7, 7)
    tokens, _ = decode(random_model, prepared(random_model, 1), GreedySearch(), 6)
    assert random_model.preprocessor.detokenize(tokens[:, 1:]) == [text]
    again = random_model.attention_maps(images[0], tokens)[0]
    assert again["tokens"] == single["tokens"]
    np.testing.assert_allclose(again["weights"], single["weights"], atol=1e-5)


def test_get_config_round_trip_rebuilds_the_same_model(random_model):
    config = random_model.get_config()
    assert config["hidden_dim"] == 16 and config["image_shape"] == [84, 84, 1]
    rebuilt = TransformerCaptioner.from_config(config)
    rebuilt.set_weights(random_model.get_weights())
    assert_same_logits(rebuilt, random_model)
    backbone = random_model.backbone
    again = TransformerCaptionerBackbone.from_config(backbone.get_config())
    assert again.get_config() == backbone.get_config()


def test_save_and_load_preset_round_trip(tmp_path, random_model):
    random_model.save_to_preset(tmp_path / "preset", metadata={"note": "tiny"})
    loaded = Task.from_preset(str(tmp_path / "preset"))
    assert type(loaded) is TransformerCaptioner
    assert loaded.preset_metadata["note"] == "tiny"
    assert list(loaded.preprocessor.tokenizer.get_vocabulary()) == list(vocab())
    for a, b in zip(loaded.get_weights(), random_model.get_weights()):
        np.testing.assert_array_equal(a, b)
    assert_same_logits(loaded, random_model)


def assert_same_logits(model, reference):
    x = {
        "images": prepared(reference, 2),
        "decoder_token_ids": ops.convert_to_tensor([[2, 5, 6], [2, 7, 0]], "int32"),
    }
    np.testing.assert_allclose(
        ops.convert_to_numpy(model(x)),
        ops.convert_to_numpy(reference(x)),
        rtol=1e-5,
        atol=1e-5,
    )
