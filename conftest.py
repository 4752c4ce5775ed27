"""pytest set-up shared by the tests and the docstring examples.

`make test` runs `tests/` and `--doctest-modules keras_attention zoo` on
TensorFlow, then `tests/keras_attention` and the `keras_attention` examples
again on JAX. On a backend other than TensorFlow, tests marked
`tensorflow_only` are skipped; so are the examples of the modules in
`TENSORFLOW_ONLY_EXAMPLES`, whose subject is a TensorFlow object.
"""

import keras
import pytest

# `python -m zoo` runs the command line when it is imported.
collect_ignore = ["zoo/__main__.py"]

# Modules whose docstring examples need the TensorFlow backend.
TENSORFLOW_ONLY_EXAMPLES = ("keras_attention/training/strategy.py",)


def pytest_collection_modifyitems(config, items):
    tensorflow_only = {config.rootpath / path for path in TENSORFLOW_ONLY_EXAMPLES}
    for item in items:
        if item.path in tensorflow_only:
            item.add_marker(pytest.mark.tensorflow_only)
    if keras.backend.backend() == "tensorflow":
        return
    skip = pytest.mark.skip(reason="needs the TensorFlow backend")
    for item in items:
        if "tensorflow_only" in item.keywords:
            item.add_marker(skip)
