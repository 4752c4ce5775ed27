"""The shipped Show-Attend-Tell preset loads, verifies, captions and looks."""

import numpy as np
import pytest

from keras_attention import presets
from zoo.base.task import list_presets
from zoo.captioning.evaluation import attention_correctness, bleu_scores
from zoo.data import scenes
from zoo.show_attend_tell import ShowAttendTell

NAME = "show_attend_tell_fashion_scenes"

pytestmark = pytest.mark.tensorflow_only


def test_shipped_preset_is_verified_and_captions_held_out_scenes():
    directory = list_presets()[NAME]
    meta = presets.verify_preset(directory)
    assert meta["class_name"] == "ShowAttendTell"
    assert "python -m zoo.show_attend_tell.train" in meta["command"]
    assert meta["metrics"]["test"]["beam3"]["sentences"] >= 1000
    model = ShowAttendTell.from_preset(NAME)
    assert model.attention == "soft"
    # Scenes from the shipped test sample: test images only, unseen in training.
    test = scenes.load("test", num_scenes=40, sample=True, seed=11)
    captions, maps = model.caption(test["images"], beam_width=3, return_attention=True)
    assert bleu_scores(captions, test["captions"])["bleu4"] > 40
    correct = attention_correctness(maps, test["labels"], test["boxes"], (84, 84))
    assert correct["nouns"] > 40 and correct["peak"] > 60
    np.testing.assert_allclose(
        [m["weights"].sum(axis=(1, 2)) for m in maps[:1]][0], 1.0, rtol=1e-5
    )
