"""keras-team/keras#23038: the causal mask holds where the fused kernel is off.

Keras's `MultiHeadAttention` dropped `use_causal_mask` whenever its fused path
was off: dropout > 0, attention scores returned, inputs of another rank. Here
each of those cases, on each of our paths and for both of our multi-head
layers, changes only the last position of the input and asserts that no
earlier output moves (a fresh layer with the same seed per call, so dropout
draws the same masks), and that returned scores put no weight on a future key.
"""

import keras
import numpy as np
import pytest
from keras import ops

from keras_attention.layers import GroupedQueryAttention, MultiHeadAttention

LENGTH, DIM = 6, 8
LAYERS = {
    "mha": lambda **kw: MultiHeadAttention(4, 4, seed=7, **kw),
    "gqa": lambda **kw: GroupedQueryAttention(4, 4, 2, seed=7, **kw),
}
PATHS = {
    "hook": {},
    "chunked": {"chunk_threshold": 0, "chunk_size": 4},
    "windowed": {"window": LENGTH},
    "cached": {},
}
CASES = {
    "dropout_training": {"dropout": 0.5, "training": True},
    "dropout_inference": {"dropout": 0.5, "training": False},
    "scores": {"dropout": 0.0, "return_attention_scores": True},
}


def rand(*shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype("float32")


def np_(x):
    return np.asarray(ops.convert_to_numpy(x), dtype="float32")


def causal_call(make, path, case, x):
    """`(output, scores or None)` of a fresh, seeded layer on `x`, causally."""
    keras.utils.set_random_seed(3)
    layer = make(dropout=case["dropout"], **PATHS[path])
    kwargs = {
        "use_causal_mask": True,
        "training": case.get("training"),
        "return_attention_scores": case.get("return_attention_scores", False),
    }
    if path == "cached":
        heads = layer._key_value_heads()
        cache = np.zeros((x.shape[0], 2, LENGTH, heads, 4), "float32")
        kwargs.update(cache=cache, cache_update_index=0)
    results = layer(x, x, **kwargs)
    if not isinstance(results, tuple):
        return np_(results), None
    scores = np_(results[1]) if kwargs["return_attention_scores"] else None
    return np_(results[0]), scores


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("path", sorted(PATHS))
@pytest.mark.parametrize("kind", sorted(LAYERS))
def test_causal_mask_holds_where_the_fused_kernel_is_off(kind, path, case):
    x = rand(2, LENGTH, DIM)
    changed = x.copy()
    changed[:, -1] = rand(2, DIM, seed=9) * 10.0
    out, scores = causal_call(LAYERS[kind], path, CASES[case], x)
    out_changed, _ = causal_call(LAYERS[kind], path, CASES[case], changed)
    np.testing.assert_allclose(out_changed[:, :-1], out[:, :-1], atol=1e-5)
    assert not np.allclose(out_changed[:, -1], out[:, -1], atol=1e-3)
    if scores is not None:
        future = np.triu(np.ones((LENGTH, LENGTH), bool), k=1)
        assert np.abs(scores[..., future]).max() == 0.0


@pytest.mark.parametrize("case", sorted(CASES))
def test_causal_mask_holds_on_5d_projected_inputs(case):
    """Keras's own path: `(B, T, 3, dim)` inputs, `attention_axes=1`.

    The projected query `(B, T, 3, heads, key_dim)` is 5-D, Keras's third
    case. (A 5-D input makes 6-D scores, which TensorFlow's softmax refuses
    on Keras's layer too.)
    """
    x = rand(1, LENGTH, 3, DIM)
    changed = x.copy()
    changed[:, -1] = rand(1, 3, DIM, seed=9) * 10.0
    make = lambda **kw: MultiHeadAttention(2, 4, attention_axes=1, seed=7, **kw)  # noqa: E731
    out, scores = causal_call(make, "hook", CASES[case], x)
    out_changed, _ = causal_call(make, "hook", CASES[case], changed)
    np.testing.assert_allclose(out_changed[:, :-1], out[:, :-1], atol=1e-5)
    if scores is not None:
        future = np.triu(np.ones((LENGTH, LENGTH), bool), k=1)
        assert np.abs(scores[..., future]).max() < 1e-6
