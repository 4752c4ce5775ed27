"""pytest set-up shared by the tests and the docstring examples.

`make test` runs `tests/` and `--doctest-modules keras_attention zoo` in one
pytest run on TensorFlow, then `tests/keras_attention` and the
`keras_attention` examples in one run on JAX, each on two processes
(pytest-xdist, a module's tests on one process). On a backend other than TensorFlow, tests marked
`tensorflow_only` are skipped; so are the examples of the modules in
`TENSORFLOW_ONLY_EXAMPLES`, whose subject is a TensorFlow object.
"""

import keras
import pytest

# `python -m zoo` runs the command line when it is imported.
collect_ignore = ["zoo/__main__.py"]

# Modules whose docstring examples need the TensorFlow backend.
TENSORFLOW_ONLY_EXAMPLES = ("keras_attention/training/strategy.py",)


@pytest.fixture(autouse=True)
def _fresh_keras_session_for_examples(request):
    """A docstring example starts from a fresh Keras session, as in a new
    interpreter (layer names from `dense`, default settings), whatever tests
    ran before it in the same process."""
    if not isinstance(request.node, pytest.Function):
        keras.utils.clear_session(free_memory=False)


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
