"""The shipped Seq2Seq preset: byte-identical, and read by the new classes
with the outputs of the code that wrote it (the pre-backbone `Seq2Seq`).

The expected numbers were computed with the old code (`zoo/seq2seq/model.py`
before the backbone split, git fe41a0d) on the shipped weights.
"""

import shutil

import h5py
import keras
import numpy as np
import pytest
import tensorflow as tf

import zoo
from keras_attention import presets
from zoo.seq2seq import Seq2Seq, Seq2SeqBackbone, legacy
from zoo.translation import TranslationPreprocessor

pytestmark = pytest.mark.tensorflow_only

NAME = "seq2seq_bahdanau_bible_en_es"
SOURCES = [
    "Jesus wept.",
    "In the beginning God created the heavens and the earth.",
    "The name of the man was Elimelech, and the name of his wife Naomi.",
]
# Old code: `model._generate(make_search(1), ids, 24)`; beam 4 (length
# penalty 0.6) gave the same three rows.
OLD_TOKENS = [
    [2, 35, 185, 2053, 9, 3] + [0] * 19,
    [2, 239, 83, 752, 2224, 97, 84, 314, 60, 82, 106, 9, 3] + [0] * 12,
    [2, 156, 172, 89, 297, 127, 1753, 246, 7, 60, 83, 172, 80, 86, 197, 26, 1498]
    + [475, 9, 3, 0, 0, 0, 0, 0],
]
# Old code: logits[0, :, :4] of ("Jesus wept.", "Y Jesús lloró."), teacher-forced.
OLD_LOGITS = [
    [-4.7201, -4.3606, -4.73, 5.2026],
    [-9.0265, -9.0086, -8.8687, 2.0302],
    [-10.0781, -9.9968, -9.9561, 1.8946],
    [-10.2859, -10.4903, -10.3104, 5.9965],
    [-6.3927, -6.4133, -6.8047, 20.4734],
]
OLD_ARGMAX = [35, 185, 2053, 9, 3]


@pytest.fixture(scope="module")
def old_preset(tmp_path_factory):
    """A copy of today's shipped preset (old weight layout, old config)."""
    copy = tmp_path_factory.mktemp("preset") / NAME
    shutil.copytree(zoo.list_presets()[NAME], copy)
    return copy


@pytest.fixture(scope="module")
def model(old_preset):
    return Seq2Seq.from_preset(str(old_preset))


def test_shipped_preset_is_listed_verified_and_in_the_old_layout():
    directory = zoo.list_presets()[NAME]
    meta = presets.verify_preset(directory)  # sha256 of every file: unchanged
    assert meta["class_name"] == "Seq2Seq"
    assert "python -m zoo.seq2seq.train" in meta["command"]
    test = meta["metrics"]["test"]
    assert test["greedy"]["sentences"] == test["beam4"]["sentences"] > 700
    assert legacy.is_legacy_weights(f"{directory}/{presets.WEIGHTS_FILE}")
    assert NAME in zoo.seq2seq.PRESETS


def test_old_preset_loads_into_the_new_classes(model):
    assert type(model) is Seq2Seq and isinstance(model.backbone, Seq2SeqBackbone)
    assert isinstance(model.preprocessor, TranslationPreprocessor)
    assert model.count_params() == 4_304_290  # the model card's count


def test_old_preset_gives_the_old_tokens_and_logits(model):
    ids = model.preprocessor(tf.constant(SOURCES))["encoder_token_ids"]
    for beam_width in (1, 4):
        tokens = model.generate(
            ids, beam_width=beam_width, max_length=24, length_penalty=0.6
        )
        assert tokens.tolist() == OLD_TOKENS, beam_width
    x, _, _ = model.preprocessor(
        tf.constant(SOURCES[:1]), tf.constant(["Y Jesús lloró."])
    )
    logits = np.asarray(model(x, training=False))
    np.testing.assert_allclose(logits[0, :, :4], OLD_LOGITS, atol=2e-3)
    assert logits[0].argmax(-1).tolist() == OLD_ARGMAX
    assert model.translate(SOURCES[0]) == "Y Jesús lloró."


def test_new_layout_round_trip(model, tmp_path):
    model.save_to_preset(str(tmp_path / "new"))
    weights = tmp_path / "new" / presets.WEIGHTS_FILE
    assert not legacy.is_legacy_weights(str(weights))
    with h5py.File(weights) as f:
        assert "layers/seq2_seq_backbone" in f  # the backbone is one group
    keras.utils.set_random_seed(7)
    loaded = Seq2Seq.from_preset(str(tmp_path / "new"))
    for a, b in zip(model.weights, loaded.weights):
        assert a.path == b.path
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    ids = model.preprocessor(tf.constant(SOURCES[:2]))["encoder_token_ids"]
    assert loaded.generate(ids, max_length=24).tolist() == OLD_TOKENS[:2]


def test_presets_hold_no_optimizer_state(tmp_path):
    from zoo.base.task import Task

    @keras.saving.register_keras_serializable(package="zoo_tests")
    class Tiny(Task):
        def __init__(self, **kwargs):
            x = keras.Input((3,))
            super().__init__(x, keras.layers.Dense(2)(x), **kwargs)
            self.preprocessor = None

        def get_config(self):
            return {"name": self.name}

    model = Tiny()
    model.compile("adam", "mse")
    model.fit(np.ones((4, 3)), np.ones((4, 2)), verbose=0)
    model.save_to_preset(tmp_path / "p")
    with h5py.File(tmp_path / "p" / presets.WEIGHTS_FILE) as f:
        assert "optimizer" not in f
    loaded = Tiny.from_preset(str(tmp_path / "p"))
    np.testing.assert_array_equal(
        loaded.predict(np.ones((1, 3)), verbose=0),
        model.predict(np.ones((1, 3)), verbose=0),
    )
