"""Test-wide set-up: skip TensorFlow-only tests on other Keras backends."""

import keras
import pytest


def pytest_collection_modifyitems(config, items):
    if keras.backend.backend() == "tensorflow":
        return
    skip = pytest.mark.skip(reason="needs the TensorFlow backend")
    for item in items:
        if "tensorflow_only" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _restore_dtype_policy():
    """Tests that switch to mixed precision never leak it into others."""
    policy = keras.config.dtype_policy()
    yield
    keras.config.set_dtype_policy(policy)
