"""Test-wide fixtures (the backend skips live in the root `conftest.py`)."""

import keras
import pytest


@pytest.fixture(autouse=True)
def _restore_dtype_policy():
    """Tests that switch to mixed precision never leak it into others."""
    policy = keras.config.dtype_policy()
    yield
    keras.config.set_dtype_policy(policy)
