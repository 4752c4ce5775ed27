"""`load_model` of a `.keras` file with our layers: no `custom_objects`, but
`import keras_attention` first, as the README and the package docstring say.

Each load runs in a fresh process, where nothing was registered before.
"""

import os
import subprocess
import sys

import keras
import numpy as np
import pytest

import keras_attention as ka

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _load_in_fresh_process(path, imports):
    code = (
        f"import keras{imports}\n"
        f"model = keras.saving.load_model({path!r})\n"
        "print(type(model.layers[-1]).__module__)\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": ROOT, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )


@pytest.mark.slow
def test_load_model_needs_only_the_import(tmp_path):
    query = keras.Input((3, 4))
    memory = keras.Input((5, 4))
    context = ka.layers.Attention(score="bahdanau")(query, memory)
    model = keras.Model([query, memory], context)
    model([np.zeros((1, 3, 4)), np.zeros((1, 5, 4))])
    path = str(tmp_path / "attention.keras")
    model.save(path)

    without = _load_in_fresh_process(path, "")
    assert without.returncode != 0
    assert "Attention" in without.stderr

    loaded = _load_in_fresh_process(path, "\nimport keras_attention")
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    assert loaded.stdout.strip().startswith("keras_attention.layers")


def test_the_readme_says_to_import_first():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        text = " ".join(f.read().split())
    promise = text.index("without `custom_objects`")
    assert "`import keras_attention` first" in text[promise : promise + 120]
