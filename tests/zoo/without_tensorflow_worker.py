"""Every zoo family's verbs on arrays, in a process where TensorFlow is missing.

Run by `tests/zoo/test_without_tensorflow.py` as `python THIS_FILE OUT`
with `KERAS_BACKEND` set to JAX or PyTorch: `tensorflow`,
`tensorflow_text` and `tf_keras` are made unimportable before anything
else (`sys.modules[name] = None`, as when they are not installed). Each
family's tiny model (`tiny_models.CASES`, with a preprocessor built from a
fixed vocabulary: learning one needs TensorFlow) is built, fitted 2 steps
on arrays of token ids or images, decoded greedily and with a beam of 2 on
ids (a classifier: `predict`), saved as a preset and loaded back, and must
give the same outputs. Writes a JSON report to OUT.
"""

import json
import os
import sys
import tempfile

HIDDEN = ("tensorflow", "tensorflow_text", "tf_keras")
# Only as the test's subprocess: `make test`'s `--doctest-modules tests`
# imports this file too, and hiding TensorFlow there failed every later
# test of that process.
if __name__ == "__main__":
    for _name in HIDDEN:
        sys.modules[_name] = None

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tiny_models  # noqa: E402

import zoo  # noqa: E402

IMAGE_SHAPE = (16, 16, 1)
VOCABULARY = ["[PAD]", "[UNK]", "[START]", "[END]"] + [f"w{i}" for i in range(28)]


def translation_arrays(rng, rows=4, length=6):
    """Prepared translation inputs: ids, the shifted labels and weights."""
    source = rng.integers(4, len(VOCABULARY), (rows, length)).astype("int32")
    source[:, -1] = 3
    target = rng.integers(4, len(VOCABULARY), (rows, length + 1)).astype("int32")
    target[:, 0], target[:, -1] = 2, 3
    x = {"encoder_token_ids": source, "decoder_token_ids": target[:, :-1]}
    return x, target[:, 1:], np.ones((rows, length), "float32")


def caption_arrays(rng, rows=4, length=6):
    """Prepared captioning inputs: images, decoder ids, labels and weights."""
    images = rng.random((rows, *IMAGE_SHAPE)).astype("float32")
    target = rng.integers(4, len(VOCABULARY), (rows, length + 1)).astype("int32")
    target[:, 0], target[:, -1] = 2, 3
    x = {"images": images, "decoder_token_ids": target[:, :-1]}
    return x, target[:, 1:], np.ones((rows, length), "float32")


def build(name):
    """The family's tiny model, its preprocessor made from `VOCABULARY`."""
    factory = tiny_models.CASES[name][0]
    if name == "ram":
        return factory(0)
    if name in ("seq2seq", "transformer"):
        return factory(0, vocabulary=VOCABULARY)
    return factory(0, vocabulary=VOCABULARY, image_shape=IMAGE_SHAPE)


def run(name, folder):
    rng = np.random.default_rng(0)
    model = build(name)
    if name == "ram":
        images = rng.integers(0, 255, (4, 40, 40, 1)).astype("uint8")
        labels = rng.integers(0, 10, (4,)).astype("int32")
        model.compile(optimizer="adam", loss=tiny_models.sparse_categorical_loss())
        history = model.fit(images, labels, batch_size=2, epochs=1, verbose=0)
        outputs = {"predict": model.predict(images, verbose=0)}
        inputs = images
    else:
        arrays = (
            translation_arrays if name in ("seq2seq", "transformer") else caption_arrays
        )
        x, y, w = arrays(rng)
        model.compile(optimizer="adam", loss=tiny_models.sparse_categorical_loss())
        history = model.fit(x, y, sample_weight=w, batch_size=2, epochs=1, verbose=0)
        inputs = x.get("encoder_token_ids", x.get("images"))
        outputs = {
            "greedy": model.generate(inputs, max_length=5),
            "beam": model.generate(inputs, beam_width=2, max_length=5),
        }
    preset = os.path.join(folder, name)
    model.save_to_preset(preset)
    loaded = zoo.from_preset(preset)
    if name == "ram":
        again = {"predict": loaded.predict(inputs, verbose=0)}
    else:
        again = {
            "greedy": loaded.generate(inputs, max_length=5),
            "beam": loaded.generate(inputs, beam_width=2, max_length=5),
        }
    return {
        "steps": int(model.optimizer.iterations),
        "loss": [float(v) for v in history.history["loss"]],
        "same_after_loading": all(
            np.allclose(outputs[k], again[k], atol=1e-5) for k in outputs
        ),
        "shapes": {k: list(np.shape(v)) for k, v in outputs.items()},
        "class": type(loaded).__name__,
    }


def text_error():
    """What fitting a translator on raw sentences says without TensorFlow."""
    model = build("seq2seq")
    model.compile(optimizer="adam", loss=tiny_models.sparse_categorical_loss())
    try:
        model.fit([("w1 w2", "w3")], verbose=0)
    except ImportError as e:
        return f"ImportError: {e}"
    return None


def main(out):
    report = {"backend": keras.backend.backend(), "families": {}}
    with tempfile.TemporaryDirectory() as folder:
        for name in sys.argv[2:] or tiny_models.CASES:
            report["families"][name] = run(name, folder)
        report["text_error"] = text_error()
    report["tensorflow_imported"] = sorted(
        m for m in sys.modules if m.split(".")[0] in HIDDEN and sys.modules[m]
    )
    with open(out, "w") as f:
        json.dump(report, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
