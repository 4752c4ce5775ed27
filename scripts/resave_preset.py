"""Loads a preset and saves it again with the current preset writer.

Keeps the metadata (command, data, metrics) and records the re-save. Used
once on `seq2seq_bahdanau_bible_en_es`, trained before `save_preset` dropped
the optimizer state from `model.weights.h5` (51.7 MB -> 17.3 MB; the model
weights, and so every output, are unchanged: checked below).

Run: python scripts/resave_preset.py PRESET_DIR OUT_DIR
"""

import sys

import numpy as np
import tensorflow as tf

from keras_attention import presets
from zoo import from_preset

GENERATED = {
    "files",
    "created",
    "versions",
    "parameters",
    "class_name",
    "registered_name",
    "format_version",
}


def main(source, target):
    model = from_preset(source)
    meta = presets.read_metadata(source)
    probe = model.preprocessor(
        tf.constant(["Jesus wept.", "In the beginning, God created the heavens."]),
        tf.constant(["Y lloró Jesús.", "En el principio crió Dios los cielos."]),
    )[0]
    before = model.predict(probe, verbose=0)
    kept = {k: v for k, v in meta.items() if k not in GENERATED}
    kept["resaved"] = (
        f"weights re-saved from a {meta.get('created')} preset by "
        "scripts/resave_preset.py (optimizer state dropped; outputs checked equal)"
    )
    model.save_to_preset(target, metadata=kept)
    np.testing.assert_array_equal(before, from_preset(target).predict(probe, verbose=0))
    print(f"re-saved {source} -> {target}; outputs identical")


if __name__ == "__main__":
    main(*sys.argv[1:3])
