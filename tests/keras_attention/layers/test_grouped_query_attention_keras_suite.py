"""Keras's own `grouped_query_attention_test.py`, run against our class.

The test file of the installed Keras is loaded as it is, and the `layers`
module it reads `GroupedQueryAttention` from is replaced by a copy in which
that one name is `keras_attention.layers.GroupedQueryAttention`: nothing
else in Keras's tests changes. `make test` runs it on TensorFlow, JAX and
PyTorch.
"""

import importlib.util
import pathlib
import types

import keras.src.layers

from keras_attention.layers import GroupedQueryAttention

_PATH = (
    pathlib.Path(keras.src.layers.__file__).parent
    / "attention"
    / "grouped_query_attention_test.py"
)
_spec = importlib.util.spec_from_file_location("keras_gqa_test", _PATH)
keras_tests = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(keras_tests)

_swapped = types.ModuleType("layers")
_swapped.__dict__.update(vars(keras.src.layers))
_swapped.GroupedQueryAttention = GroupedQueryAttention
keras_tests.layers = _swapped


class TestKerasGroupedQueryAttentionSuite(keras_tests.GroupedQueryAttentionTest):
    """Every test of Keras's `GroupedQueryAttentionTest`, on our class."""
