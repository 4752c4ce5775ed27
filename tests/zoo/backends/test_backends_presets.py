"""`save_to_preset` then `from_preset` on JAX and PyTorch: the same model back (#43).

Run by `make test` under `KERAS_BACKEND=jax` and `KERAS_BACKEND=torch`
(TensorFlow's round trips are each family's `tests/zoo/<family>/test_task.py`).
Each family's tiny model (`tiny_models.py`), given random weights, is saved
as a preset and loaded again in the same process: the loaded model is of
the saved class, with its metadata and exactly its weights, and its verb
(`translate`, `caption` or `classify`, whichever the task names) gives the
saved model's output. That the shipped presets, saved under TensorFlow,
load and give TensorFlow's answers here is `test_backends.py`'s.
"""

import os
import sys

import keras
import numpy as np
import pytest

from zoo.base.task import Task

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import tiny_models  # noqa: E402

pytestmark = pytest.mark.skipif(
    keras.backend.backend() == "tensorflow",
    reason="TensorFlow's round trips are the families' own tests",
)

TOLERANCE = 1e-5
SAMPLES = 4  # one batch


def _verb(model, verb, x):
    """The verb's output on two samples, as comparable values; decoders
    stop after 6 tokens (random weights rarely end a sentence)."""
    if verb == "classify":
        names, probabilities = model.classify(x[:2], top_k=2)
        return np.asarray(names).tolist(), np.asarray(probabilities)
    return getattr(model, verb)(x[:2], beam_width=2, max_length=6), None


@pytest.mark.parametrize("name", list(tiny_models.CASES))
def test_a_saved_preset_loads_as_the_model_saved(name, tmp_path):
    model, x, y = tiny_models.case_with_samples(name)
    x, y = x[:SAMPLES], y[:SAMPLES]
    model.compile(loss=tiny_models.CASES[name][2]())
    model.evaluate(x, y, batch_size=SAMPLES, verbose=0)  # builds every layer
    tiny_models.randomized(model, 0.3)
    (verb,) = model.verbs
    if verb == "classify":
        model.class_names = [f"class {i}" for i in range(model.num_classes)]
    expected = _verb(model, verb, x)

    model.save_to_preset(str(tmp_path / "preset"), metadata={"note": "tiny"})
    loaded = Task.from_preset(str(tmp_path / "preset"))

    assert type(loaded) is type(model)
    assert loaded.preset_metadata["note"] == "tiny"
    saved = model.get_weights()
    assert len(loaded.get_weights()) == len(saved)
    for mine, theirs in zip(loaded.get_weights(), saved):
        np.testing.assert_array_equal(mine, theirs)
    output, scores = _verb(loaded, verb, x)
    assert output == expected[0]
    if scores is not None:
        np.testing.assert_allclose(scores, expected[1], rtol=TOLERANCE, atol=TOLERANCE)
