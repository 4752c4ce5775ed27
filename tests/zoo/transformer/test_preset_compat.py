"""The shipped preset loads into `Transformer` and gives today's outputs.

`preset_outputs.npz` was computed from the shipped preset with the code
before the backbone/task split (commit fe41a0d, `zoo/transformer/model.py`):
the logits of five test verses (the first 128 vocabulary columns, the arg
max and the log-sum-exp of every row), the greedy and beam-4 (length
penalty 0.6) token ids with 64 decoding steps, the translations, and the
beam-4 alignment of the first verse.
"""

import os
import shutil

import numpy as np
import pytest

from zoo.base.task import list_presets
from zoo.transformer import Transformer

pytestmark = pytest.mark.tensorflow_only

NAME = "transformer_bible_en_es"
OLD = np.load(os.path.join(os.path.dirname(__file__), "preset_outputs.npz"))


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    # A copy: the shipped directory is only ever read.
    copy = tmp_path_factory.mktemp("preset") / NAME
    shutil.copytree(list_presets()[NAME], copy)
    return Transformer.from_preset(str(copy))


def test_logits_are_todays(model):
    x = {
        "encoder_token_ids": OLD["encoder_token_ids"],
        "decoder_token_ids": OLD["decoder_token_ids"],
    }
    logits = np.asarray(model(x, training=False))
    np.testing.assert_allclose(logits[..., :128], OLD["logits_first_128"], atol=1e-4)
    np.testing.assert_array_equal(logits.argmax(-1), OLD["logits_argmax"])
    top = logits.max(-1, keepdims=True)
    logsumexp = top[..., 0] + np.log(np.exp(logits - top).sum(-1))
    np.testing.assert_allclose(logsumexp, OLD["logits_logsumexp"], atol=1e-4)


@pytest.mark.parametrize("width, name", [(1, "greedy"), (4, "beam4")])
def test_generated_tokens_and_translations_are_todays(model, width, name):
    tokens = model.generate(
        OLD["encoder_token_ids"], beam_width=width, max_length=64, length_penalty=0.6
    )
    np.testing.assert_array_equal(tokens, OLD[f"{name}_tokens"])
    texts = model.translate(list(OLD["sources"]), beam_width=width)
    assert texts == list(OLD[f"{name}_texts"])


def test_alignment_is_todays(model):
    _, alignment = model.translate(
        str(OLD["sources"][0]), beam_width=4, return_attention=True
    )
    np.testing.assert_allclose(
        alignment["weights"], OLD["beam4_attention_0"], atol=1e-5
    )
    np.testing.assert_allclose(
        alignment["head_weights"], OLD["beam4_head_attention_0"], atol=1e-5
    )
