"""A tiny preset to tamper with, shared by the preset attack tests.

`save` writes a preset of a `Dense(2)` model and (optionally) a `Words`
preprocessor whose vocabulary is an asset file; `sign` records a file's new
sha256 in `metadata.json`, as an attacker who edits a preset can.

Load it by path (pytest imports tests with `--import-mode=importlib`):

    spec = importlib.util.spec_from_file_location("tampered_presets", path)
"""

import hashlib
import json
import os

import keras

from keras_attention import presets


@keras.saving.register_keras_serializable(package="tests_presets_attacks")
class Words(keras.layers.Layer):
    """A preprocessor whose vocabulary is an asset file."""

    def __init__(self, tokens=None, **kwargs):
        super().__init__(**kwargs)
        self.tokens = tokens

    def save_assets(self, dir_path):
        with open(os.path.join(dir_path, "tokens.txt"), "w", encoding="utf-8") as f:
            f.write("\n".join(self.tokens) + "\n")

    def load_assets(self, dir_path):
        with open(os.path.join(dir_path, "tokens.txt"), encoding="utf-8") as f:
            self.tokens = f.read().split()

    def get_config(self):
        return {**super().get_config(), "tokens": None}


def model():
    """`Dense(2, name="out")` on 4 features, seeded."""
    keras.utils.set_random_seed(0)
    inputs = keras.Input((4,))
    return keras.Model(inputs, keras.layers.Dense(2, name="out")(inputs))


def save(directory, preprocessor=True):
    """Saves `model()` (with a `Words` preprocessor) to `directory`."""
    words = Words(["[PAD]", "a"], name="words") if preprocessor else None
    presets.save_preset(model(), str(directory), preprocessor=words)
    return directory


def sign(directory, name):
    """Records the current sha256 of `name` (the attacker re-signs an edit)."""
    meta_path = directory / presets.METADATA_FILE
    meta = json.loads(meta_path.read_text())
    meta["files"][name] = hashlib.sha256((directory / name).read_bytes()).hexdigest()
    meta_path.write_text(json.dumps(meta))
