"""`TransformerBackbone`: outputs, embeddings, masks, causality, config.

(Its forward on JAX: `tests/zoo/backends/test_backbones_on_jax.py`.)
"""

import json

import keras
import numpy as np
import pytest

from zoo.transformer import Transformer, TransformerBackbone

pytestmark = pytest.mark.tensorflow_only

ENCODER = np.array([[5, 6, 7, 3, 0, 0], [8, 9, 3, 0, 0, 0]], "int32")
DECODER = np.array([[2, 10, 11, 12], [2, 13, 0, 0]], "int32")


def tiny(seed=0, **kwargs):
    keras.utils.set_random_seed(seed)
    args = dict(num_layers=2, hidden_dim=16, intermediate_dim=32, num_heads=2)
    args.update(dropout=0.0, **kwargs)
    backbone = TransformerBackbone(30, **args)
    rng = np.random.default_rng(seed + 1)
    for variable in backbone.weights:  # Weights no fresh model has.
        variable.assign(rng.normal(0, 0.3, variable.shape).astype("float32"))
    return backbone


def run(backbone, encoder=ENCODER, decoder=DECODER):
    out = backbone({"encoder_token_ids": encoder, "decoder_token_ids": decoder})
    return {k: np.asarray(v) for k, v in out.items()}


def test_named_inputs_and_outputs():
    backbone = tiny()
    assert sorted(backbone.input) == ["decoder_token_ids", "encoder_token_ids"]
    out = run(backbone)
    assert out["encoder_sequence_output"].shape == (2, 6, 16)
    assert out["decoder_sequence_output"].shape == (2, 4, 16)
    # One table for source and target when the vocabulary is shared.
    assert backbone.source_embedding is backbone.target_embedding
    separate = TransformerBackbone(30, 2, 16, 32, 2, target_vocabulary_size=20)
    assert separate.source_embedding is not separate.target_embedding
    assert separate.target_embedding.input_dim == 20


def test_embeddings_are_scaled_and_positioned():
    backbone = tiny()
    ids = np.array([[5, 6, 7]], "int32")
    table = np.asarray(backbone.source_embedding.embeddings)
    # The sinusoidal encoding of Vaswani et al. (2017), section 3.5.
    positions = np.arange(3)[:, None]
    rates = 1.0 / 10000 ** (np.arange(0, 16, 2) / 16)
    expected_pe = np.zeros((3, 16))
    expected_pe[:, 0::2] = np.sin(positions * rates)
    expected_pe[:, 1::2] = np.cos(positions * rates)
    expected = table[ids] * 4.0 + expected_pe
    x = backbone.embed(ids, backbone.source_embedding)
    np.testing.assert_allclose(np.asarray(x), expected, atol=1e-5)


@pytest.mark.parametrize("normalize_first", [False, True])
def test_source_padding_is_masked_and_real_tokens_count(normalize_first):
    backbone = tiny(normalize_first=normalize_first)
    reference = run(backbone)["decoder_sequence_output"]
    padded = run(backbone, encoder=np.pad(ENCODER, ((0, 0), (0, 4))))
    np.testing.assert_allclose(padded["decoder_sequence_output"], reference, atol=1e-5)
    changed = ENCODER.copy()
    changed[:, 0] = 20
    out = run(backbone, encoder=changed)["decoder_sequence_output"]
    assert np.abs(out - reference).max() > 1e-3


@pytest.mark.parametrize("normalize_first", [False, True])
def test_decoder_is_causal(normalize_first):
    backbone = tiny(normalize_first=normalize_first)
    decoder = np.array([[2, 10, 11, 12, 13]], "int32")
    reference = run(backbone, ENCODER[:1], decoder)["decoder_sequence_output"]
    for t in range(1, 5):
        changed = decoder.copy()
        changed[:, t:] = 25
        out = run(backbone, ENCODER[:1], changed)["decoder_sequence_output"]
        np.testing.assert_allclose(out[:, :t], reference[:, :t], atol=1e-5)
        assert np.abs(out[:, t:] - reference[:, t:]).max() > 1e-4


def test_last_layer_cross_attention_is_a_distribution_over_real_tokens():
    backbone = tiny()
    memory, mask = backbone.call_encoder(ENCODER)
    _, weights = backbone.call_decoder(
        DECODER, memory, mask, return_attention_scores=True
    )
    weights = np.asarray(weights)
    assert weights.shape == (2, 2, 4, 6)
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)
    assert np.all(weights[0, ..., 4:] == 0) and np.all(weights[1, ..., 3:] == 0)


@pytest.mark.parametrize("dtype", [None, "mixed_bfloat16"])
def test_config_round_trip_keeps_dtype(dtype):
    backbone = TransformerBackbone(
        30, 1, 16, 32, 2, score="general", normalize_first=True, dtype=dtype
    )
    config = backbone.get_config()
    json.dumps(config)  # Serializable as is.
    rebuilt = TransformerBackbone.from_config(config)
    assert rebuilt.get_config() == config
    assert rebuilt.dtype_policy.name == (dtype or "float32")
    assert rebuilt.count_params() == backbone.count_params()
    restored = keras.saving.deserialize_keras_object(
        keras.saving.serialize_keras_object(backbone)
    )
    assert type(restored) is TransformerBackbone
    assert restored.dtype_policy.name == (dtype or "float32")


@pytest.mark.parametrize(
    "kwargs, name, error",
    [
        ({"vocabulary_size": 0}, "vocabulary_size", ValueError),
        ({"num_layers": 1.5}, "num_layers", TypeError),
        ({"hidden_dim": 10, "num_heads": 4}, "divisible", ValueError),
        ({"dropout": 1.0}, "dropout", ValueError),
        ({"target_vocabulary_size": -1}, "target_vocabulary_size", ValueError),
    ],
)
def test_bad_arguments(kwargs, name, error):
    args = dict(vocabulary_size=10, num_layers=1, hidden_dim=8, num_heads=2)
    args.update(kwargs)
    with pytest.raises(error, match=name):
        TransformerBackbone(**args)


# The forward pass on JAX (`tests/zoo/backends/test_backbones_on_jax.py`, one JAX
# process for every zoo backbone): name -> () -> (backbone with weights no
# fresh one has, inputs, output to sample with `training=True` or None,
# tolerance of `assert_allclose`).


def _jax_case():
    x = {"encoder_token_ids": ENCODER, "decoder_token_ids": DECODER}
    return tiny(normalize_first=True), x, None, {"atol": 1e-4}


JAX_CASES = {"transformer": _jax_case}


# `test_task_backbone.py`: the task built from its arguments or a backbone.
TASK_IDS = np.array([[4, 5, 3, 0], [6, 3, 0, 0]], "int32")
TASK_CASES = {
    "transformer": (
        Transformer,
        dict(vocabulary_size=20, num_layers=1, hidden_dim=8, num_heads=2),
        TransformerBackbone,
        dict(vocabulary_size=20, num_layers=1, hidden_dim=8, num_heads=2),
        {"encoder_token_ids": TASK_IDS, "decoder_token_ids": TASK_IDS},
        {},
    ),
}
