"""`Transformer`: the task graph, configs, dtype, presets of both layouts."""

import json

import h5py
import keras
import numpy as np
import pytest

from zoo.base.task import Task
from zoo.transformer import Transformer, TransformerBackbone, configs

pytestmark = pytest.mark.tensorflow_only


def test_logits_are_the_backbone_output_times_the_tied_table(h):
    model = h.tiny()
    h.randomize(model)
    x, y, _ = h.prepared(model)
    out = h.logits(model, x)
    assert out.shape == (*x["decoder_token_ids"].shape, model.vocabulary_size)
    assert y.shape == x["decoder_token_ids"].shape
    assert [w.path for w in model.weights].count("token_embedding/embeddings") == 1
    hidden = np.asarray(model.backbone(x)["decoder_sequence_output"])
    table = np.asarray(model.backbone.target_embedding.embeddings)
    np.testing.assert_allclose(out, hidden @ table.T, atol=1e-5)


def test_separate_target_vocabulary():
    model = Transformer(30, target_vocabulary_size=20, **configs.get("tiny"))
    ids = np.array([[5, 6, 3, 0]])
    out = model({"encoder_token_ids": ids, "decoder_token_ids": ids})
    assert tuple(out.shape) == (1, 4, 20)


def test_a_given_backbone_is_used_and_described_by_the_config():
    backbone = TransformerBackbone(40, 1, 16, 32, 2)
    model = Transformer(backbone=backbone)
    assert model.backbone is backbone
    config = model.get_config()
    assert (config["vocabulary_size"], config["num_layers"]) == (40, 1)
    rebuilt = Transformer.from_config(config)
    assert rebuilt.backbone.get_config() == backbone.get_config() | {
        "name": rebuilt.backbone.name
    }
    with pytest.raises(ValueError, match="vocabulary_size=41"):
        Transformer(41, backbone=backbone)
    with pytest.raises(TypeError, match="backbone"):
        Transformer(backbone=keras.layers.Dense(2))
    with pytest.raises(TypeError, match="vocabulary_size=None"):  # as Keras: a type
        Transformer()


def test_named_configs_and_config_round_trip():
    model = Transformer.from_name("tiny", vocabulary_size=50, num_layers=1)
    assert (model.num_layers, model.hidden_dim, model.num_heads) == (1, 64, 4)
    config = model.get_config()
    json.dumps(config)
    rebuilt = Transformer.from_config(config)
    assert rebuilt.get_config() == config
    assert rebuilt.count_params() == model.count_params()
    assert (configs.get("base")["hidden_dim"], configs.get("big")["num_heads"]) == (
        512,
        16,
    )
    with pytest.raises(ValueError, match="Unknown Transformer size"):
        configs.get("huge")


def test_mixed_bfloat16_comes_back_from_config():
    model = Transformer.from_name("tiny", vocabulary_size=20, dtype="mixed_bfloat16")
    rebuilt = Transformer.from_config(model.get_config())
    assert rebuilt.dtype_policy.name == "mixed_bfloat16"
    assert rebuilt.backbone.dtype_policy.name == "mixed_bfloat16"
    assert rebuilt.backbone.decoder_blocks[0].compute_dtype == "bfloat16"
    # The variables stay float32; the hidden states are computed in bfloat16.
    assert {v.dtype for v in rebuilt.weights} == {"float32"}
    ids = np.array([[5, 6, 3]])
    out = rebuilt.backbone({"encoder_token_ids": ids, "decoder_token_ids": ids})
    assert out["decoder_sequence_output"].dtype == "bfloat16"


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
    with h5py.File(tmp_path / "model.weights.h5") as f:
        assert "transformer_backbone" in f["layers"]  # The new layout.
    for loader in (Transformer, Task):
        keras.utils.set_random_seed(99)  # Fresh weights differ from saved ones.
        loaded = loader.from_preset(str(tmp_path))
        assert type(loaded) is Transformer
        assert loaded.preset_metadata["metrics"] == {"bleu": 1.5}
        np.testing.assert_array_equal(h.logits(loaded, x), reference)
    assert loaded.translate(h.SOURCES, beam_width=1, max_length=6) == greedy


def test_weights_of_the_old_one_class_layout_load(tmp_path, h):
    """Files written before the split hold the backbone's layers at the top."""
    model = h.tiny(normalize_first=True)
    h.randomize(model)
    x, _, _ = h.prepared(model)
    # The old layout is the backbone's own: layers/<layer>/... at the top.
    path = str(tmp_path / "old.weights.h5")
    model.backbone.save_weights(path)
    with h5py.File(path) as f:
        assert "reversible_embedding" in f["layers"]
    keras.utils.set_random_seed(5)
    fresh = h.tiny(normalize_first=True, seed=5)
    assert np.abs(h.logits(fresh, x) - h.logits(model, x)).max() > 1e-3
    fresh.load_weights(path)
    np.testing.assert_array_equal(h.logits(fresh, x), h.logits(model, x))


def test_translate_needs_a_preprocessor():
    model = Transformer.from_name("tiny", vocabulary_size=10)
    with pytest.raises(ValueError, match="preprocessor"):
        model.translate("hello")
