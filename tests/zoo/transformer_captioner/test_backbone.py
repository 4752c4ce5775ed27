"""The cases the cross-family tests run on `TransformerCaptionerBackbone`.

`JAX_CASES` (`tests/zoo/backends/test_backbones_on_jax.py`: the forward pass under
JAX equals TensorFlow's) and `TASK_CASES` (`tests/zoo/test_task_backbone.py`:
the task built from its arguments or from a backbone), and the parameter
count the loader's budget asks (`zoo.base.parameter_budget`).
"""

import numpy as np
import pytest

from zoo.base.constructor_arguments import ArgumentsOf
from zoo.transformer_captioner import (
    TransformerCaptioner,
    TransformerCaptionerBackbone,
)

CONFIG = dict(
    vocabulary_size=10,
    image_shape=(32, 32, 1),
    encoder_layers=1,
    decoder_layers=1,
    hidden_dim=8,
    intermediate_dim=16,
    num_heads=2,
)


def inputs(batch):
    rng = np.random.default_rng(0)
    return {
        "images": rng.uniform(size=(batch, 32, 32, 1)).astype("float32"),
        "decoder_token_ids": np.array([[2, 5, 6, 3], [2, 7, 3, 0]][:batch], "int32"),
    }


def _jax_case():
    backbone = TransformerCaptionerBackbone(**CONFIG, dropout=0.0)
    rng = np.random.default_rng(3)
    for variable in backbone.trainable_weights:  # weights no fresh model has
        variable.assign(rng.normal(0, 0.3, variable.shape).astype("float32"))
    return backbone, inputs(2), None, {"rtol": 1e-4, "atol": 1e-5}


JAX_CASES = {"transformer_captioner": _jax_case}

TASK_CASES = {
    "transformer_captioner": (
        TransformerCaptioner,
        dict(CONFIG, dropout=0.0),
        TransformerCaptionerBackbone,
        dict(CONFIG, dropout=0.0),
        inputs(2),
        {},
    ),
}


@pytest.mark.parametrize(
    "config",
    [
        CONFIG,
        dict(CONFIG, image_shape=(40, 24, 3), encoder_layers=2, decoder_layers=3),
        dict(CONFIG, hidden_dim=12, num_heads=3, intermediate_dim=5),
    ],
)
def test_parameter_count_is_exact(config):
    count = TransformerCaptionerBackbone.parameter_count(
        **ArgumentsOf(TransformerCaptionerBackbone).values(config)
    )
    assert count == TransformerCaptionerBackbone(**config).count_params()


def test_parameter_count_checks_sizes_first():
    with pytest.raises(ValueError, match="hidden_dim"):
        TransformerCaptionerBackbone.parameter_count(
            **ArgumentsOf(TransformerCaptionerBackbone).values(
                dict(CONFIG, hidden_dim=0)
            )
        )
