"""The shipped Transformer-captioner preset: verified, captions, looks, recorded.

`transformer_captioner_fashion_scenes_outputs.npz` holds what the preset gave
when it was written (session 25) on 8 held-out scenes of the shipped sample
(`scenes.load("test", num_scenes=8, sample=True, seed=11)`): the greedy and
beam-4 token ids of `generate`, the greedy tokens' attention
(`token_attention`) and the beam-4 captions.
"""

import os

import numpy as np
import pytest

from keras_attention import presets
from zoo.base.task import list_presets
from zoo.captioning.evaluation import attention_correctness, bleu_scores
from zoo.data import scenes
from zoo.transformer_captioner import TransformerCaptioner

NAME = "transformer_captioner_fashion_scenes"
RECORDED = os.path.join(os.path.dirname(__file__), f"{NAME}_outputs.npz")

pytestmark = pytest.mark.tensorflow_only


@pytest.fixture(scope="module")
def model():
    return TransformerCaptioner.from_preset(NAME)


def test_shipped_preset_is_verified_and_captions_held_out_scenes(model):
    meta = presets.verify_preset(list_presets()[NAME])  # sha256 of every file
    assert meta["class_name"] == "TransformerCaptioner"
    assert "python -m zoo.transformer_captioner.train" in meta["command"]
    test_metrics = meta["metrics"]["test"]
    assert test_metrics["beam4"]["sentences"] == 2000
    assert "history" not in meta["metrics"]
    # Scenes from the shipped test sample: test images only, unseen in training.
    test = scenes.load("test", num_scenes=40, sample=True, seed=11)
    captions, maps = model.caption(test["images"], beam_width=4, return_attention=True)
    assert bleu_scores(captions, test["captions"])["bleu4"] > 60
    correct = attention_correctness(maps, test["labels"], test["boxes"], (84, 84))
    assert correct["nouns"] > 40 and correct["peak"] > 80
    for m in maps:
        np.testing.assert_allclose(m["weights"].sum(axis=(1, 2)), 1.0, rtol=1e-5)


def test_preset_gives_its_recorded_tokens_captions_and_attention(model):
    recorded = dict(np.load(RECORDED))
    test = scenes.load("test", num_scenes=8, sample=True, seed=11)
    images = model.preprocessor.images(test["images"])
    greedy = model.generate(images)
    np.testing.assert_array_equal(greedy, recorded["greedy_tokens"])
    np.testing.assert_array_equal(
        model.generate(images, beam_width=4), recorded["beam4_tokens"]
    )
    assert model.caption(test["images"], beam_width=4) == list(
        recorded["beam4_captions"]
    )
    np.testing.assert_allclose(
        model.token_attention(images, greedy),
        recorded["greedy_attention"],
        rtol=1e-4,
        atol=1e-5,
    )
