"""`kv_cache.write_cache`: the cache write of a decoding step.

Under JAX one position is written with a `where` (XLA copied the whole
cache for each `slice_update` in a compiled decoding loop); it must give
exactly what `ops.slice_update` gives, clipped indices included, on every
backend and under `jax.jit`.
"""

import keras
import numpy as np
import pytest
from keras import ops

from keras_attention.layers import kv_cache


def _expected(cache, new, index, axis):
    length = cache.shape[axis]
    start = min(index, length - new.shape[axis])
    out = cache.copy()
    where = [slice(None)] * cache.ndim
    where[axis] = slice(start, start + new.shape[axis])
    out[tuple(where)] = new
    return out


@pytest.mark.parametrize("axis", [1, 2])
@pytest.mark.parametrize("steps", [1, 3])
@pytest.mark.parametrize("index", [0, 4, 7])
def test_write_equals_slice_update(axis, steps, index):
    rng = np.random.default_rng(index)
    cache = rng.normal(size=(2, 8, 3, 4)).astype("float32")
    cache = np.moveaxis(cache, 1, axis)
    shape = list(cache.shape)
    shape[axis] = steps
    new = rng.normal(size=shape).astype("float32")
    if index + steps > 8:
        index = 8 - steps
    got = kv_cache.write_cache(
        ops.convert_to_tensor(cache), ops.convert_to_tensor(new), index, axis
    )
    np.testing.assert_array_equal(
        ops.convert_to_numpy(got), _expected(cache, new, index, axis)
    )


def test_jitted_write_with_any_index_equals_dynamic_update_slice():
    if keras.config.backend() != "jax":
        pytest.skip("the `where` write is JAX's")
    import jax

    rng = np.random.default_rng(0)
    cache = rng.normal(size=(2, 3, 8, 4)).astype("float32")
    new = rng.normal(size=(2, 3, 1, 4)).astype("float32")
    write = jax.jit(lambda c, n, i: kv_cache.write_cache(c, n, i, 2))
    for index in (-9, -3, 0, 5, 7, 9):
        reference = jax.lax.dynamic_update_slice(cache, new, (0, 0, index, 0))
        for given in (index, np.int32(index)):
            np.testing.assert_array_equal(
                np.asarray(write(cache, new, given)), reference
            )


def test_one_position_under_jax_is_written_without_a_slice_update():
    """The point of the `where`: no `dynamic_update_slice` for XLA to turn
    into copies of the whole cache in a compiled decoding loop."""
    if keras.config.backend() != "jax":
        pytest.skip("the `where` write is JAX's")
    import jax

    cache = np.zeros((2, 3, 8, 4), "float32")
    one, two = np.ones((2, 3, 1, 4), "float32"), np.ones((2, 3, 2, 4), "float32")

    def program(new):
        return str(
            jax.make_jaxpr(lambda c, n, i: kv_cache.write_cache(c, n, i, 2))(
                cache, new, np.int32(3)
            )
        )

    assert "dynamic_update_slice" not in program(one)
    assert "dynamic_update_slice" in program(two)  # more positions: as before
