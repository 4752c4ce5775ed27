"""Score hooks (`score_mod=`) on every path of the attention layers.

Each hook, and a list of them (`ScoreMods`), gives the same outputs and
gradients on the explicit, chunked and windowed paths and in cached
decoding (within float tolerance); the explicit path equals a NumPy
reference written from the papers' formulas; each hook saves and loads
without `custom_objects`; the Transformer blocks pass `segment_ids` on.
"""

import importlib.util
import math
import pathlib

import keras
import numpy as np
import pytest
from keras import ops

from keras_attention.layers import (
    ALiBi,
    Attention,
    GroupedQueryAttention,
    MultiHeadAttention,
    RelativePositionBias,
    SegmentMask,
    SoftCap,
    TransformerDecoderBlock,
    TransformerEncoderBlock,
    chunked_remat,
)
from keras_attention.layers import multi_head_paths as mha_paths
from keras_attention.layers.score_mods import alibi_slopes, relative_position_bucket

_spec = importlib.util.spec_from_file_location(
    "gradients", pathlib.Path(__file__).parents[1] / "gradients.py"
)
gradients = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gradients)

BATCH, LENGTH, DIM, HEADS, HEAD_DIM = 2, 10, 8, 4, 4
SEGMENTS = np.array([[0] * 4 + [1] * 6, [0] * 2 + [1] * 5 + [2] * 3])
HOOKS = {
    "alibi": lambda: ALiBi(),
    "relative": lambda: RelativePositionBias(
        num_buckets=8, max_distance=16, embeddings_initializer="random_normal"
    ),
    "soft_cap": lambda: SoftCap(0.5),
    "segments": lambda: SegmentMask(),
}
#: Several hooks on one layer: ALiBi, a cap of the biased scores, segments.
ALL_HOOKS = {**HOOKS, "composed": lambda: [ALiBi(), SoftCap(0.5), SegmentMask()]}
PATHS = {
    "chunked": {"chunk_threshold": 0, "chunk_size": 4},
    "windowed": {"window": LENGTH},
}


def rand(*shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype("float32")


def np_(x):
    return np.asarray(ops.convert_to_numpy(x), dtype="float32")


def call_kwargs(hook, causal):
    kwargs = {"use_causal_mask": causal}
    if hook in ("segments", "composed"):
        kwargs["segment_ids"] = SEGMENTS
    return kwargs


def make(layer, hook, **kwargs):
    """A layer (`"mha"`, or `"gqa"` with 2 key/value heads) with `hook`, built."""
    keras.utils.set_random_seed(3)
    if layer == "mha":
        made = MultiHeadAttention(
            num_heads=HEADS, key_dim=HEAD_DIM, score_mod=ALL_HOOKS[hook](), **kwargs
        )
    else:
        made = GroupedQueryAttention(
            head_dim=HEAD_DIM,
            num_query_heads=HEADS,
            num_key_value_heads=2,
            score_mod=ALL_HOOKS[hook](),
            **kwargs,
        )
    shape = (BATCH, LENGTH, DIM)
    made.build(shape, shape)
    return made


def twin(layer, **kwargs):
    """A copy of `layer` with other arguments, the same weights."""
    other = type(layer).from_config({**layer.get_config(), **kwargs})
    shape = (BATCH, LENGTH, DIM)
    other.build(shape, shape)
    other.set_weights(layer.get_weights())
    return other


def spied(monkeypatch, name, module=mha_paths):
    """Counts the calls of `module.<name>` (the path was taken)."""
    calls = {"n": 0}
    original = getattr(module, name)

    def counted(*args, **kwargs):
        calls["n"] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("path", sorted(PATHS))
@pytest.mark.parametrize("hook", sorted(HOOKS))
@pytest.mark.parametrize("layer", ["mha", "gqa"])
def test_blockwise_paths_equal_the_explicit_path(
    layer, hook, path, causal, monkeypatch
):
    explicit = make(layer, hook, chunk_threshold=None)
    blockwise = twin(explicit, **PATHS[path])
    query = rand(BATCH, LENGTH, DIM)
    kwargs = call_kwargs(hook, causal)
    expected = explicit(query, query, **kwargs)
    calls = spied(monkeypatch, f"{path}_attention")
    got = blockwise(query, query, **kwargs)
    assert calls["n"] >= 1
    np.testing.assert_allclose(np_(got), np_(expected), atol=2e-5)


@pytest.mark.parametrize("split", [False, True], ids=["stacked", "heads_first"])
@pytest.mark.parametrize("hook", sorted(HOOKS))
@pytest.mark.parametrize("layer", ["mha", "gqa"])
def test_cached_decoding_equals_causal_attention(layer, hook, split):
    """Step by step through a cache: query positions offset by the index."""
    made = make(layer, hook, chunk_threshold=None)
    query = rand(BATCH, LENGTH, DIM, seed=1)
    kwargs = call_kwargs(hook, True)
    expected = made(query, query, **kwargs)
    got = decoded(made, query, kwargs, split)
    np.testing.assert_allclose(got, np_(expected), atol=2e-5)


def decoded(made, query, kwargs, split=False):
    """`made`'s outputs for `query`, one step at a time through a cache."""
    kv_heads = made._key_value_heads()
    if split:
        cache = (np.zeros((BATCH, kv_heads, LENGTH, HEAD_DIM), "float32"),) * 2
    else:
        cache = np.zeros((BATCH, 2, LENGTH, kv_heads, HEAD_DIM), "float32")
    steps = []
    for index in range(LENGTH):
        step = query[:, index : index + 1]
        output, cache = made(
            step, step, cache=cache, cache_update_index=index, **kwargs
        )
        steps.append(np_(output))
    return np.concatenate(steps, 1)


@pytest.mark.parametrize("path", ["chunked", "windowed", "cached"])
def test_composed_hooks_equal_the_explicit_path(path, monkeypatch):
    """A list of hooks (`ScoreMods`) on each path, causal, grouped heads."""
    explicit = make("gqa", "composed", chunk_threshold=None)
    query = rand(BATCH, LENGTH, DIM, seed=8)
    kwargs = call_kwargs("composed", True)
    expected = np_(explicit(query, query, **kwargs))
    if path == "cached":
        got = decoded(explicit, query, kwargs)
    else:
        calls = spied(monkeypatch, f"{path}_attention")
        got = np_(twin(explicit, **PATHS[path])(query, query, **kwargs))
        assert calls["n"] >= 1
    np.testing.assert_allclose(got, expected, atol=2e-5)


def reference_bias(hook, layer_hook, length):
    """`(heads, T, T)` additive bias and `(B, 1, T, T)` mask, from the papers."""
    q = np.arange(length)[:, None]
    k = np.arange(length)[None, :]
    bias = np.zeros((HEADS, length, length), "float32")
    mask = np.ones((1, 1, length, length), bool)
    if hook in ("alibi", "composed"):
        slopes = np.array([2.0 ** (-8.0 * (h + 1) / HEADS) for h in range(HEADS)])
        bias = -slopes[:, None, None] * np.abs(q - k)
    elif hook == "relative":
        table = np_(layer_hook.embeddings)
        buckets = np.vectorize(t5_bucket)(k - q, 8, 16)
        bias = np.transpose(table[buckets], (2, 0, 1))
    if hook in ("segments", "composed"):
        mask = (SEGMENTS[:, :, None] == SEGMENTS[:, None, :])[:, None]
    return bias, mask


def t5_bucket(relative_position, num_buckets, max_distance):
    """T5's `_relative_position_bucket` (bidirectional), one int at a time."""
    num_buckets //= 2
    bucket = num_buckets if relative_position > 0 else 0
    distance = abs(relative_position)
    max_exact = num_buckets // 2
    if distance < max_exact:
        return bucket + distance
    large = max_exact + int(
        math.log(distance / max_exact)
        / math.log(max_distance / max_exact)
        * (num_buckets - max_exact)
    )
    return bucket + min(large, num_buckets - 1)


@pytest.mark.parametrize("hook", sorted(ALL_HOOKS))
def test_explicit_path_equals_a_numpy_reference(hook):
    layer = make("mha", hook, chunk_threshold=None, use_bias=False)
    x = rand(BATCH, LENGTH, DIM, seed=2)
    wq, wk, wv, wo = (np_(w) for w in layer.get_weights()[:4])
    q = np.einsum("btd,dhk->bhtk", x, wq) / math.sqrt(HEAD_DIM)
    k = np.einsum("btd,dhk->bhtk", x, wk)
    v = np.einsum("btd,dhk->bhtk", x, wv)
    scores = np.einsum("bhqd,bhkd->bhqk", q, k)
    bias, mask = reference_bias(hook, layer._score_mod, LENGTH)
    scores = scores + bias
    if hook in ("soft_cap", "composed"):  # the cap of the biased scores
        scores = 0.5 * np.tanh(scores / 0.5)
    scores = np.where(mask, scores, -np.inf)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    expected = np.einsum("bhqk,bhkd,hdo->bqo", weights, v, wo)
    got = layer(x, x, **call_kwargs(hook, False))
    np.testing.assert_allclose(np_(got), expected, atol=2e-5)


def test_alibi_slopes_are_the_papers():
    np.testing.assert_allclose(alibi_slopes(8), [2.0**-i for i in range(1, 9)])
    # Six heads: the 4-head slopes, then every other 8-head slope.
    expected = [2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8, 2.0**-1, 2.0**-3]
    np.testing.assert_allclose(alibi_slopes(6), expected)


def test_relative_buckets_are_t5s():
    distances = np.arange(-40, 41)
    got = np_(relative_position_bucket(distances, 32, 128, True)).astype(int)
    expected = [t5_bucket(int(d), 32, 128) for d in distances]
    assert got.tolist() == expected


@pytest.mark.parametrize("path", ["explicit", "chunked", "windowed"])
@pytest.mark.parametrize("hook", ["relative", "soft_cap", "alibi", "composed"])
def test_gradients_equal_the_explicit_path(hook, path):
    """Input and weight gradients (the relative bias table's included)."""
    query = rand(BATCH, LENGTH, DIM, seed=4)
    loss = gradients.weighted_sum(rand(BATCH, LENGTH, DIM, seed=5))
    reference = make("gqa", hook, chunk_threshold=None)
    layer = reference if path == "explicit" else twin(reference, **PATHS[path])
    kwargs = call_kwargs(hook, True)
    expected_out, expected = gradients.value_and_gradients(
        reference,
        (query, query),
        lambda out: loss(out[0]),
        {**kwargs, "return_attention_scores": True},
    )
    got_out, got = gradients.value_and_gradients(layer, (query, query), loss, kwargs)
    np.testing.assert_allclose(got_out, expected_out[0], atol=2e-5)
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e, atol=1e-4)
    if hook == "relative":
        assert np.abs(got[-1]).max() > 0  # the table learns


@pytest.mark.parametrize("hook", ["relative", "composed"])
def test_compiled_chunked_gradients_equal_the_explicit_path(hook, monkeypatch):
    """Compiled (`tf.function(jit_compile=True)`, `jax.jit`), the chunked
    path with a hook loops (`ops.map`) instead of unrolling its blocks; its
    output and gradients, the learned table's included, are the explicit
    path's."""
    query = rand(BATCH, LENGTH, DIM, seed=4)
    loss = gradients.weighted_sum(rand(BATCH, LENGTH, DIM, seed=5))
    reference = make("gqa", hook, chunk_threshold=None)
    layer = twin(reference, **PATHS["chunked"])
    kwargs = call_kwargs(hook, True)
    expected_out, expected = gradients.value_and_gradients(
        reference, (query, query), loss, kwargs
    )
    calls = spied(monkeypatch, "_mapped", chunked_remat)
    got_out, got = gradients.value_and_gradients(
        layer, (query, query), loss, kwargs, jit=True
    )
    # PyTorch runs op by op: its Python loops hold one block at a time.
    assert calls["n"] >= (keras.backend.backend() != "torch")
    np.testing.assert_allclose(got_out, expected_out, atol=2e-5)
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e, atol=1e-4)


@pytest.mark.parametrize("hook", sorted(HOOKS))
def test_attention_layer_chunked_equals_explicit(hook):
    keras.utils.set_random_seed(5)
    explicit = Attention(score_mod=HOOKS[hook](), chunk_threshold=None)
    x = rand(BATCH, LENGTH, DIM, seed=6)
    kwargs = call_kwargs(hook, True)
    expected = explicit(x, x, **kwargs)
    chunked = Attention.from_config(
        {**explicit.get_config(), "chunk_threshold": 0, "chunk_size": 4}
    )
    chunked.build(x.shape, x.shape)
    chunked.set_weights(explicit.get_weights())
    np.testing.assert_allclose(np_(chunked(x, x, **kwargs)), np_(expected), atol=2e-5)


@pytest.mark.parametrize("hook", sorted(ALL_HOOKS))
def test_save_and_load_without_custom_objects(hook, tmp_path):
    layer = make("gqa", hook, chunk_threshold=0, chunk_size=4)
    inputs = keras.Input((LENGTH, DIM))
    kwargs = call_kwargs(hook, True)
    if "segment_ids" in kwargs:
        ids = keras.Input((LENGTH,), dtype="int32")
        model = keras.Model(
            [inputs, ids],
            layer(inputs, inputs, use_causal_mask=True, segment_ids=ids),
        )
        x = [rand(BATCH, LENGTH, DIM, seed=7), SEGMENTS.astype("int32")]
    else:
        model = keras.Model(inputs, layer(inputs, inputs, **kwargs))
        x = rand(BATCH, LENGTH, DIM, seed=7)
    path = str(tmp_path / "hooked.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    reloaded = loaded.layers[-1]
    assert type(reloaded._score_mod) is type(layer._score_mod)
    assert reloaded.get_config() == layer.get_config()
    np.testing.assert_allclose(np_(loaded(x)), np_(model(x)), atol=1e-6)


@pytest.mark.parametrize("block", ["encoder", "decoder"])
def test_blocks_run_a_packed_batch_as_its_documents_apart(block):
    """`segment_ids` reach the self-attention's hooks: two documents packed
    in one row give the outputs of each run on its own (ALiBi's bias is
    relative, so a document's offset in the row does not change it)."""
    keras.utils.set_random_seed(9)
    cls = TransformerEncoderBlock if block == "encoder" else TransformerDecoderBlock
    layer = cls(
        intermediate_dim=16, num_heads=HEADS, score_mod=[ALiBi(), SegmentMask()]
    )
    first, second = rand(1, 4, DIM, seed=10), rand(1, 6, DIM, seed=11)
    packed = layer(
        np.concatenate([first, second], 1), segment_ids=np.array([[0] * 4 + [1] * 6])
    )
    apart = [
        layer(x, segment_ids=np.zeros((1, x.shape[1]), "int32"))
        for x in (first, second)
    ]
    np.testing.assert_allclose(
        np_(packed), np.concatenate([np_(x) for x in apart], 1), atol=2e-5
    )


def test_config_without_a_hook_is_unchanged():
    assert "score_mod" not in MultiHeadAttention(num_heads=2, key_dim=4).get_config()
    assert "score_mod" not in Attention().get_config()


def test_segment_ids_need_a_hook_and_the_hook_needs_them():
    x = rand(1, 4, DIM)
    with pytest.raises(ValueError, match="segment_ids"):
        MultiHeadAttention(num_heads=2, key_dim=4)(x, x, segment_ids=np.zeros((1, 4)))
    with pytest.raises(ValueError, match="segment_ids"):
        MultiHeadAttention(num_heads=2, key_dim=4, score_mod=SegmentMask())(x, x)


def test_soft_cap_refuses_a_non_positive_cap():
    with pytest.raises(ValueError, match="cap=0"):
        SoftCap(0)
