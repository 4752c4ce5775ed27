"""The zoo's Transformer backbones with grouped-query heads (`num_key_value_heads`)."""

import numpy as np
import pytest
from keras import ops

from keras_attention.layers import GroupedQueryAttention, MultiHeadAttention
from zoo.base.constructor_arguments import ArgumentsOf
from zoo.transformer import Transformer, TransformerBackbone
from zoo.transformer_captioner.backbone import TransformerCaptionerBackbone

SIZES = {"hidden_dim": 8, "intermediate_dim": 16, "num_heads": 4}


def attention_layers(backbone):
    blocks = list(getattr(backbone, "encoder_blocks", [])) + list(
        backbone.decoder_blocks
    )
    return [block._self_attention_layer for block in blocks]


@pytest.mark.parametrize(
    "cls, arguments",
    [
        (TransformerBackbone, {"vocabulary_size": 20, "num_layers": 1}),
        (TransformerCaptionerBackbone, {"vocabulary_size": 10}),
    ],
    ids=["transformer", "captioner"],
)
def test_backbones_take_fewer_key_value_heads(cls, arguments):
    default = cls(**arguments, **SIZES)
    assert default.get_config()["num_key_value_heads"] is None
    assert all(type(a) is MultiHeadAttention for a in attention_layers(default))
    grouped = cls(**arguments, **SIZES, num_key_value_heads=2)
    config = grouped.get_config()
    assert config["num_key_value_heads"] == 2
    layers = attention_layers(grouped)
    assert all(isinstance(a, GroupedQueryAttention) for a in layers)
    assert all(a.num_key_value_heads == 2 for a in layers)
    assert grouped.count_params() < default.count_params()
    counted = cls.parameter_count(**ArgumentsOf(cls).values(config))
    assert counted == grouped.count_params()
    rebuilt = cls.from_config(config)
    assert rebuilt.get_config() == config


def test_transformer_task_with_grouped_heads_saves_its_config():
    model = Transformer(
        vocabulary_size=20, num_layers=1, **SIZES, num_key_value_heads=1
    )
    assert model.get_config()["num_key_value_heads"] == 1
    rebuilt = Transformer.from_config(model.get_config())
    assert rebuilt.backbone.num_key_value_heads == 1
    rebuilt.set_weights(model.get_weights())
    tokens = {
        "encoder_token_ids": np.array([[5, 6, 3]]),
        "decoder_token_ids": np.array([[2, 7]]),
    }
    np.testing.assert_allclose(
        ops.convert_to_numpy(rebuilt.backbone(tokens)["decoder_sequence_output"]),
        ops.convert_to_numpy(model.backbone(tokens)["decoder_sequence_output"]),
        atol=1e-6,
    )
    default = Transformer(vocabulary_size=20, num_layers=1, **SIZES)
    assert default.get_config()["num_key_value_heads"] is None


def test_indivisible_key_value_heads_raise():
    with pytest.raises(ValueError, match="num_key_value_heads=3"):
        TransformerBackbone(20, num_layers=1, **SIZES, num_key_value_heads=3)
