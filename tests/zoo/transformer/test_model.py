"""`Transformer`: shapes, masks, causality, presets and configs."""

import keras
import numpy as np
import pytest

from zoo.task import Task
from zoo.transformer import Transformer, configs

pytestmark = pytest.mark.tensorflow_only


# === Shapes, masks, causality ===


def test_shapes_and_tied_output_projection(h):
    model = h.tiny()
    x, y, _ = h.prepared(model)
    out = h.logits(model, x)
    assert out.shape == (*x["decoder_token_ids"].shape, model.vocabulary_size)
    assert y.shape == x["decoder_token_ids"].shape
    # One embedding table serves source, target and the pre-softmax layer.
    assert model.source_embedding is model.target_embedding
    assert [w.path for w in model.weights].count("token_embedding/embeddings") == 1
    memory, mask = model._encode(x["encoder_token_ids"])
    hidden = model._decode(x["decoder_token_ids"], memory, mask)
    table = np.array(model.target_embedding.embeddings)
    np.testing.assert_allclose(out, np.array(hidden) @ table.T, atol=1e-5)


def test_embeddings_are_scaled_by_sqrt_d_model(h):
    model = h.tiny()
    ids = np.array([[5, 6, 7]], "int32")
    table = np.array(model.source_embedding.embeddings)
    expected = table[ids] * np.sqrt(16) + np.array(model.position_encoding(table[ids]))
    np.testing.assert_allclose(
        np.array(model._embed(ids, model.source_embedding)), expected, atol=1e-6
    )


def test_source_padding_is_masked(h):
    model = h.tiny()
    h.randomize(model)
    x, _, _ = h.prepared(model)
    padded = dict(x)
    padded["encoder_token_ids"] = np.pad(x["encoder_token_ids"], ((0, 0), (0, 5)))
    np.testing.assert_allclose(h.logits(model, padded), h.logits(model, x), atol=1e-5)
    # Real source tokens do change the output (the mask hides only padding).
    changed = dict(x)
    changed["encoder_token_ids"] = x["encoder_token_ids"].copy()
    changed["encoder_token_ids"][:, 0] = 7
    assert np.abs(h.logits(model, changed) - h.logits(model, x)).max() > 1e-3


@pytest.mark.parametrize("normalize_first", [False, True])
def test_causal_masking(normalize_first, h):
    model = h.tiny(normalize_first=normalize_first)
    h.randomize(model)
    x, _, _ = h.prepared(model)
    reference = h.logits(model, x)
    rng = np.random.default_rng(0)
    for t in range(1, x["decoder_token_ids"].shape[1]):
        changed = dict(x)
        changed["decoder_token_ids"] = x["decoder_token_ids"].copy()
        changed["decoder_token_ids"][:, t:] = rng.integers(
            4, model.vocabulary_size, changed["decoder_token_ids"][:, t:].shape
        )
        out = h.logits(model, changed)
        np.testing.assert_allclose(out[:, :t], reference[:, :t], atol=1e-5)
        assert np.abs(out[:, t:] - reference[:, t:]).max() > 1e-4


# === Presets and configs ===


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"normalize_first": True, "score": "general"}, {"tie_embeddings": False}],
)
def test_preset_round_trip_is_exact(tmp_path, kwargs, h):
    model = h.tiny(**kwargs)
    h.randomize(model)
    x, _, _ = h.prepared(model)
    reference = h.logits(model, x)
    greedy = model.translate(h.SOURCES, beam_width=1, max_length=6)
    meta = model.save_to_preset(str(tmp_path), metadata={"metrics": {"bleu": 1.5}})
    assert meta["parameters"] == model.count_params()
    for loader in (Transformer, Task):
        keras.utils.set_random_seed(99)  # Fresh weights differ from saved ones.
        loaded = loader.from_preset(str(tmp_path))
        assert type(loaded) is Transformer
        assert loaded.preset_metadata["metrics"] == {"bleu": 1.5}
        np.testing.assert_array_equal(h.logits(loaded, x), reference)
    assert loaded.translate(h.SOURCES, beam_width=1, max_length=6) == greedy


def test_separate_target_vocabulary(h):
    model = Transformer(30, target_vocabulary_size=20, **configs.get("tiny"))
    ids = np.array([[5, 6, 3, 0]])
    out = model({"encoder_token_ids": ids, "decoder_token_ids": ids})
    assert tuple(out.shape) == (1, 4, 20)
    assert model.source_embedding is not model.target_embedding


def test_named_configs_and_config_round_trip(h):
    model = Transformer.from_name("tiny", vocabulary_size=50, num_layers=1)
    assert (model.num_layers, model.hidden_dim, model.num_heads) == (1, 64, 4)
    rebuilt = Transformer.from_config(model.get_config())
    assert rebuilt.get_config() == model.get_config()
    assert rebuilt.count_params() == model.count_params()
    base = configs.get("base")
    assert (base["num_layers"], base["hidden_dim"]) == (6, 512)
    assert (base["intermediate_dim"], base["num_heads"]) == (2048, 8)
    big = configs.get("big")
    assert (big["hidden_dim"], big["intermediate_dim"], big["num_heads"]) == (
        1024,
        4096,
        16,
    )
    with pytest.raises(ValueError, match="Unknown Transformer size"):
        configs.get("huge")


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"vocabulary_size": 0}, "vocabulary_size"),
        ({"num_layers": 1.5}, "num_layers"),
        ({"hidden_dim": 10, "num_heads": 4}, "divisible"),
        ({"dropout": 1.0}, "dropout"),
    ],
)
def test_bad_arguments(kwargs, name, h):
    args = dict(vocabulary_size=10, num_layers=1, hidden_dim=8, num_heads=2)
    args.update(kwargs)
    with pytest.raises(ValueError, match=name):
        Transformer(**args)


def test_translate_needs_a_preprocessor(h):
    model = Transformer.from_name("tiny", vocabulary_size=10)
    with pytest.raises(ValueError, match="preprocessor"):
        model.translate("hello")
