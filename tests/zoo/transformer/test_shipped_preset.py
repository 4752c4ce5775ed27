"""The shipped Transformer preset loads, verifies and translates."""

import numpy as np
import pytest

import zoo
from keras_attention import presets
from zoo.data import bible, parallel_text
from zoo.translation import corpus_scores

NAME = "transformer_bible_en_es"


@pytest.mark.tensorflow_only
def test_shipped_preset_is_listed_verified_and_recorded():
    meta = presets.verify_preset(zoo.list_presets()[NAME])
    assert meta["class_name"] == "Transformer"
    assert meta["command"].startswith("python -m zoo.transformer.train")
    test = meta["metrics"]["test"]
    assert test["greedy"]["sentences"] == test["beam4"]["sentences"] == 763


@pytest.mark.slow
@pytest.mark.tensorflow_only
def test_shipped_preset_translates_held_out_verses():
    model = zoo.Transformer.from_preset(NAME)
    assert "llor" in model.translate("Jesus wept.", beam_width=1).lower()
    # Verses of the test books (never trained on): the whole test set
    # scores 21.73 greedy; 16 verses must still be far above chance.
    pairs = parallel_text.read_tsv(bible.sample_path("test"))[:16]
    out = model.translate([p[0] for p in pairs], beam_width=1)
    assert corpus_scores(out, [p[1] for p in pairs])["bleu"] > 10.0

    text, alignment = model.translate(pairs[0][0], beam_width=2, return_attention=True)
    heads = alignment["head_weights"]
    assert heads.shape[0] == model.num_heads
    assert heads.shape[1:] == alignment["weights"].shape
    np.testing.assert_allclose(alignment["weights"].sum(-1), 1.0, atol=1e-4)
    assert len(alignment["target_tokens"]) == heads.shape[1]
