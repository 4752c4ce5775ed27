"""`load_model` of a `.keras` file with our layers: no `custom_objects`, but
`import keras_attention` first, as the README and the package docstring say.

The loads run in a fresh process, where nothing was registered before: the
first, before `import keras_attention`, must fail naming the layer; the
same process then imports it and loads the file.
"""

import os
import subprocess
import sys

import keras
import numpy as np
import pytest

import keras_attention as ka

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


LOAD_BEFORE_AND_AFTER_THE_IMPORT = """
import keras
try:
    keras.saving.load_model({path!r})
except Exception as e:
    print("before the import:", type(e).__name__, " ".join(str(e).split()))
else:
    print("before the import: loaded")
import keras_attention
model = keras.saving.load_model({path!r})
print("after the import:", type(model.layers[-1]).__module__)
"""


@pytest.mark.slow
def test_load_model_needs_only_the_import(tmp_path):
    query = keras.Input((3, 4))
    memory = keras.Input((5, 4))
    context = ka.layers.Attention(score="bahdanau")(query, memory)
    model = keras.Model([query, memory], context)
    model([np.zeros((1, 3, 4)), np.zeros((1, 5, 4))])
    path = str(tmp_path / "attention.keras")
    model.save(path)

    done = subprocess.run(
        [sys.executable, "-c", LOAD_BEFORE_AND_AFTER_THE_IMPORT.format(path=path)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": ROOT, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    before, after = [
        line
        for line in done.stdout.splitlines()
        if line.startswith(("before the import:", "after the import:"))
    ]
    assert before != "before the import: loaded" and "Attention" in before, before
    assert after.startswith("after the import: keras_attention.layers"), after


def test_the_readme_says_to_import_first():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        text = " ".join(f.read().split())
    promise = text.index("without `custom_objects`")
    assert "`import keras_attention` first" in text[promise : promise + 120]
