"""The shipped Seq2Seq preset loads, verifies and translates."""

import pytest

import zoo
from keras_attention import presets

NAME = "seq2seq_bahdanau_bible_en_es"


@pytest.mark.tensorflow_only
def test_shipped_preset_is_listed_verified_and_translates():
    directory = zoo.list_presets()[NAME]
    meta = presets.verify_preset(directory)
    assert meta["class_name"] == "Seq2Seq"
    assert "python -m zoo.seq2seq.train" in meta["command"]
    test = meta["metrics"]["test"]
    assert test["greedy"]["sentences"] == test["beam4"]["sentences"] > 700
    model = zoo.from_preset(NAME)
    assert isinstance(model, zoo.Seq2Seq)
    out = model.translate("Jesus wept.", beam_width=1)
    assert isinstance(out, str) and "llor" in out.lower()


@pytest.mark.tensorflow_only
def test_presets_hold_no_optimizer_state(tmp_path):
    import h5py
    import keras
    import numpy as np

    from zoo.task import Task

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
