"""zoo.translation.arrays: training from token-id arrays equals the tf.data path."""

import json
import os
import subprocess
import sys

import keras
import numpy as np

from zoo.translation import fixed_batches
from zoo.translation.arrays import ArrayBatches, read_arrays, write_arrays

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import tiny_models  # noqa: E402

ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
)


class StepLosses(keras.callbacks.Callback):
    """The logged (running mean) loss after each training step."""

    def __init__(self):
        super().__init__()
        self.losses = []

    def on_train_batch_end(self, batch, logs=None):
        self.losses.append(float(logs["loss"]))


def _trained(data, epochs=2):
    model = tiny_models.transformer(0)
    model.compile(
        optimizer=keras.optimizers.SGD(0.5), loss=tiny_models.transformer_loss()
    )
    losses = StepLosses()
    model.fit(data, epochs=epochs, shuffle=False, callbacks=[losses], verbose=0)
    return losses.losses, model


def test_training_from_arrays_follows_the_loss_curve_of_the_tf_data_path(tmp_path):
    pairs = list(tiny_models.bible_pairs())
    from_text, model = _trained(fixed_batches(pairs, 4, seed=0, shuffle=False))
    path = tmp_path / "pairs.npz"
    write_arrays(path, model.preprocessor, {"train": pairs})
    arrays = read_arrays(path)
    batches = ArrayBatches(arrays, 4, shuffle=False, pad_to_multiple=1)
    from_arrays, _ = _trained(batches)
    assert len(from_arrays) == len(from_text) == 8
    np.testing.assert_allclose(from_arrays, from_text, rtol=1e-4)
    assert from_text[-1] < from_text[0]  # it learns: the curve is no constant


def test_arrays_hold_the_preprocessor_ids_and_batches_cover_every_pair(tmp_path):
    pairs = list(tiny_models.bible_pairs())
    model = tiny_models.transformer(0)
    path = tmp_path / "pairs.npz"
    write_arrays(path, model.preprocessor, {"train": pairs, "test": pairs[:3]})
    arrays = read_arrays(path)
    x, y, w = model.preprocessor([p[0] for p in pairs[:3]], [p[1] for p in pairs[:3]])
    width = np.shape(x["encoder_token_ids"])[1]
    np.testing.assert_array_equal(
        arrays["test_encoder_token_ids"][:, :width], x["encoder_token_ids"]
    )
    assert (
        list(arrays["vocabulary"])
        == model.preprocessor.target_tokenizer.get_vocabulary()
    )
    batches = ArrayBatches(arrays, 5, seed=3)
    seen = np.concatenate([batches[i][0]["encoder_token_ids"][:, 0] for i in range(3)])
    assert len(batches) == 3 and len(seen) == 15
    first_order = batches.order.copy()
    batches.on_epoch_end()
    assert sorted(first_order) == sorted(batches.order) == list(range(16))
    assert list(first_order) != list(batches.order)  # reshuffled


#: `train transformer --data FILE.npz` in a process where TensorFlow cannot
#: be imported (as on the lent GPU machine); prints what it imported of it.
TRAIN_WITHOUT_TENSORFLOW = """
import atexit, sys
for name in ("tensorflow", "tensorflow_text", "tf_keras"):
    sys.modules[name] = None
atexit.register(lambda: print("imported:", sorted(
    m for m in sys.modules if m.split(".")[0] == "tensorflow" and sys.modules[m])))
from zoo.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_train_transformer_from_arrays_without_tensorflow(tmp_path):
    pairs = list(tiny_models.bible_pairs())
    path = tmp_path / "pairs.npz"
    preprocessor = tiny_models.transformer(0).preprocessor
    write_arrays(path, preprocessor, {"train": pairs, "validation": pairs[:4]})
    out = tmp_path / "preset"
    argv = ["train", "transformer", "--data", str(path), "--config", "tiny"]
    argv += ["--max-steps", "2", "--batch-tokens", "256", "--out", str(out)]
    env = {**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": ROOT}
    done = subprocess.run(
        [sys.executable, "-c", TRAIN_WITHOUT_TENSORFLOW, *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "imported: []" in done.stdout, done.stdout[-2000:]
    assert "data: 16 train, 4 validation, 0 test pairs" in done.stdout
    with open(out / "metadata.json") as f:
        meta = json.load(f)
    assert meta["data"]["train_pairs"] == 16
    assert meta["metrics"]["steps"] == 2, meta["metrics"]
    assert "tensorflow" not in meta["versions"]
    vocabulary = preprocessor.target_tokenizer.get_vocabulary()
    assert len(read_arrays(path)["vocabulary"]) == len(vocabulary)
