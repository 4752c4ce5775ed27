"""Transformer blocks against keras-hub, NumPy and brute-force decoding."""

import keras
import keras_hub
import numpy as np
import pytest
from keras import ops

from keras_attention.layers import (
    MultiHeadAttention,
    PositionEmbedding,
    SinusoidalPositionEncoding,
    TransformerDecoderBlock,
    TransformerEncoderBlock,
)

B, T, S, DIM, HEADS, FF = 2, 5, 6, 8, 2, 16
DEC_MASK = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], bool)
ENC_MASK = np.array([[1, 1, 1, 1, 0, 0], [1, 1, 0, 0, 0, 0]], bool)


def rand(*shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype("float32")


def np_(x):
    return np.asarray(ops.convert_to_numpy(x), dtype="float32")


def randomize(layer, seed=0):
    """Non-trivial values for every weight (layer-norm gains included)."""
    rng = np.random.default_rng(seed)
    layer.set_weights(
        [rng.normal(scale=0.5, size=w.shape).astype("float32") for w in layer.weights]
    )


# Parity with keras-hub ------------------------------------------------------


@pytest.mark.parametrize("normalize_first", [False, True])
@pytest.mark.parametrize("masks", ["none", "padding", "padding+attention"])
def test_encoder_matches_keras_hub(normalize_first, masks):
    x = rand(B, T, DIM)
    kwargs = {}
    if masks != "none":
        kwargs["padding_mask"] = DEC_MASK
    if masks == "padding+attention":
        kwargs["attention_mask"] = rand(B, T, T, seed=3) > -0.5
    hub = keras_hub.layers.TransformerEncoder(
        FF, HEADS, normalize_first=normalize_first, activation="gelu"
    )
    ours = TransformerEncoderBlock(
        FF, HEADS, normalize_first=normalize_first, activation="gelu"
    )
    hub.build(x.shape)
    ours.build(x.shape)
    randomize(hub)
    # Same sublayer creation order as keras-hub: the weight lists line up.
    assert [w.path.split("/", 1)[1] for w in ours.weights] == [
        w.path.split("/", 1)[1] for w in hub.weights
    ]
    assert not np.allclose(np_(ours(x, **kwargs)), np_(hub(x, **kwargs)), atol=1e-3)
    ours.set_weights(hub.get_weights())
    np.testing.assert_allclose(
        np_(ours(x, **kwargs)), np_(hub(x, **kwargs)), atol=1e-5, rtol=1e-5
    )


@pytest.mark.parametrize("normalize_first", [False, True])
@pytest.mark.parametrize("cross", [False, True])
def test_decoder_matches_keras_hub(normalize_first, cross):
    x, src = rand(B, T, DIM), rand(B, S, DIM, seed=1)
    inputs = (x, src) if cross else (x,)
    kwargs = {"decoder_padding_mask": DEC_MASK}
    if cross:
        kwargs["encoder_padding_mask"] = ENC_MASK
    hub = keras_hub.layers.TransformerDecoder(
        FF, HEADS, normalize_first=normalize_first
    )
    ours = TransformerDecoderBlock(FF, HEADS, normalize_first=normalize_first)
    hub(*inputs)
    ours(*inputs)
    randomize(hub, seed=2)
    assert [w.path.split("/", 1)[1] for w in ours.weights] == [
        w.path.split("/", 1)[1] for w in hub.weights
    ]
    ours.set_weights(hub.get_weights())
    for use_causal_mask in (True, False):
        np.testing.assert_allclose(
            np_(ours(*inputs, use_causal_mask=use_causal_mask, **kwargs)),
            np_(hub(*inputs, use_causal_mask=use_causal_mask, **kwargs)),
            atol=1e-5,
            rtol=1e-5,
        )


def test_implicit_masks_match_keras_hub_on_real_tokens():
    ids = np.array([[3, 1, 4, 0, 0], [5, 9, 2, 6, 5]])
    embedding = keras.layers.Embedding(10, DIM, mask_zero=True)
    hub = keras_hub.layers.TransformerEncoder(FF, HEADS)
    ours = TransformerEncoderBlock(FF, HEADS)
    hub.build((B, T, DIM))
    ours.build((B, T, DIM))
    randomize(hub)
    ours.set_weights(hub.get_weights())
    ours_out = np_(ours(embedding(ids)))
    hub_out = np_(hub(embedding(ids)))
    # keras-hub also hides padded *query* rows through Keras MHA when the mask
    # is implicit; only real tokens are comparable.
    np.testing.assert_allclose(ours_out[DEC_MASK], hub_out[DEC_MASK], atol=1e-5)


# Independent NumPy reference ------------------------------------------------


def np_layer_norm(x, gamma, beta, eps=1e-5):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def test_encoder_matches_numpy_post_norm_with_dot_score():
    x = rand(B, T, DIM, seed=4)
    block = TransformerEncoderBlock(FF, HEADS, score="dot")
    block.build(x.shape)
    randomize(block, seed=5)
    w = {v.path.split("/", 1)[1]: np_(v) for v in block.weights}
    a = "self_attention_layer/"
    q = np.einsum("btd,dhk->bthk", x, w[a + "query/kernel"]) + w[a + "query/bias"]
    k = np.einsum("btd,dhk->bthk", x, w[a + "key/kernel"]) + w[a + "key/bias"]
    v = np.einsum("btd,dhk->bthk", x, w[a + "value/kernel"]) + w[a + "value/bias"]
    logits = np.einsum("bqhk,bshk->bhqs", q, k)  # "dot": no 1/sqrt(d) scale
    logits = np.where(DEC_MASK[:, None, None, :], logits, -np.inf)
    weights = np.exp(logits - logits.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    heads = np.einsum("bhqs,bshk->bqhk", weights, v)
    attended = (
        np.einsum("bqhk,hkd->bqd", heads, w[a + "attention_output/kernel"])
        + w[a + "attention_output/bias"]
    )
    h = np_layer_norm(
        x + attended,
        w["self_attention_layer_norm/gamma"],
        w["self_attention_layer_norm/beta"],
    )
    hidden = np.maximum(
        0,
        h @ w["feedforward_intermediate_dense/kernel"]
        + w["feedforward_intermediate_dense/bias"],
    )
    ffn = (
        hidden @ w["feedforward_output_dense/kernel"]
        + w["feedforward_output_dense/bias"]
    )
    expected = np_layer_norm(
        h + ffn, w["feedforward_layer_norm/gamma"], w["feedforward_layer_norm/beta"]
    )
    out, scores = block(x, padding_mask=DEC_MASK, return_attention_scores=True)
    np.testing.assert_allclose(np_(scores), weights, atol=1e-5)
    np.testing.assert_allclose(np_(out), expected, atol=1e-4, rtol=1e-4)


# Decoding -------------------------------------------------------------------


@pytest.mark.parametrize("normalize_first", [False, True])
def test_cached_decoding_equals_full_causal_pass(normalize_first):
    x, src = rand(B, T, DIM, seed=6), rand(B, S, DIM, seed=7)
    block = TransformerDecoderBlock(FF, HEADS, normalize_first=normalize_first)
    block(x, src)
    randomize(block, seed=8)
    full, full_weights = block(
        x, src, encoder_padding_mask=ENC_MASK, return_attention_scores=True
    )
    cross = block.compute_cross_attention_cache(src)
    assert tuple(cross.shape) == (B, 2, S, HEADS, DIM // HEADS)
    cache = ops.zeros((B, 2, T, HEADS, DIM // HEADS))
    steps, step_weights = [], []
    for i in range(T):
        out, cache, cross_out, weights = block(
            x[:, i : i + 1],
            src,
            encoder_padding_mask=ENC_MASK,
            self_attention_cache=cache,
            self_attention_cache_update_index=i,
            cross_attention_cache=cross,
            return_attention_scores=True,
        )
        np.testing.assert_array_equal(np_(cross_out), np_(cross))
        steps.append(np_(out))
        step_weights.append(np_(weights))
    np.testing.assert_allclose(np.concatenate(steps, 1), np_(full), atol=1e-5)
    np.testing.assert_allclose(
        np.concatenate(step_weights, 2), np_(full_weights), atol=1e-5
    )


def test_decoder_only_cached_decoding_equals_full_pass():
    x = rand(B, T, DIM, seed=9)
    block = TransformerDecoderBlock(FF, HEADS, normalize_first=True)
    block(x)
    randomize(block, seed=10)
    full = np_(block(x))
    cache = ops.zeros((B, 2, T, HEADS, DIM // HEADS))
    steps = []
    for i in range(T):
        out, cache = block(
            x[:, i : i + 1],
            self_attention_cache=cache,
            self_attention_cache_update_index=i,
        )
        steps.append(np_(out))
    np.testing.assert_allclose(np.concatenate(steps, 1), full, atol=1e-5)


def test_decoding_loop_with_tensor_index_and_positions():
    """Steps inside `ops.fori_loop` (traced under JAX), positions included."""
    x, src = rand(B, T, DIM, seed=18), rand(B, S, DIM, seed=19)
    learned = PositionEmbedding(sequence_length=T)
    fixed = SinusoidalPositionEncoding()
    block = TransformerDecoderBlock(FF, HEADS)

    def embed(tokens, start_index=0):
        tokens = ops.convert_to_tensor(tokens)  # NumPy + a torch tensor fails
        return (
            tokens
            + learned(tokens, start_index=start_index)
            + fixed(tokens, start_index=start_index)
        )

    full = np_(block(embed(x), src))
    cross = block.compute_cross_attention_cache(src)

    def step(i, state):
        cache, outputs = state
        token = ops.slice(ops.convert_to_tensor(x), (0, i, 0), (B, 1, DIM))
        out, cache, _ = block(
            embed(token, start_index=i),
            src,
            self_attention_cache=cache,
            self_attention_cache_update_index=i,
            cross_attention_cache=cross,
        )
        return cache, ops.slice_update(outputs, (0, i, 0), out)

    state = (ops.zeros((B, 2, T, HEADS, DIM // HEADS)), ops.zeros((B, T, DIM)))
    _, outputs = ops.fori_loop(0, T, step, state)
    np.testing.assert_allclose(np_(outputs), full, atol=1e-5)


@pytest.mark.parametrize("cross", [False, True])
def test_causal_mask_does_not_leak_future_positions(cross):
    x, src = rand(B, T, DIM, seed=11), rand(B, S, DIM, seed=12)
    block = TransformerDecoderBlock(FF, HEADS)
    extra = (src,) if cross else ()
    block(x, *extra)
    randomize(block, seed=13)
    changed = x.copy()
    changed[:, 3:] += 5.0
    before, after = np_(block(x, *extra)), np_(block(changed, *extra))
    np.testing.assert_allclose(before[:, :3], after[:, :3], atol=1e-6)
    assert np.abs(before[:, 3:] - after[:, 3:]).max(-1).min() > 1e-3
    # Without the causal mask the future does reach the past.
    open_before = np_(block(x, *extra, use_causal_mask=False))
    open_after = np_(block(changed, *extra, use_causal_mask=False))
    assert np.abs(open_before[:, :3] - open_after[:, :3]).max() > 1e-3


def test_decoder_attention_weights_and_tuple_order():
    x, src = rand(B, T, DIM), rand(B, S, DIM, seed=1)
    block = TransformerDecoderBlock(FF, HEADS)
    out, weights = block(
        x, src, encoder_padding_mask=ENC_MASK, return_attention_scores=True
    )
    assert tuple(out.shape) == (B, T, DIM)
    weights = np_(weights)  # cross-attention weights
    assert weights.shape == (B, HEADS, T, S)
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)
    assert np.all(
        weights[~np.broadcast_to(ENC_MASK[:, None, None], weights.shape)] == 0
    )
    decoder_only = TransformerDecoderBlock(FF, HEADS)
    _, self_weights = decoder_only(x, return_attention_scores=True)
    self_weights = np_(self_weights)
    assert self_weights.shape == (B, HEADS, T, T)
    np.testing.assert_array_equal(
        np.triu(np.ones((T, T)), 1)[None, None] * self_weights, 0.0
    )


def test_decoder_call_errors():
    x, src = rand(B, T, DIM), rand(B, S, DIM, seed=1)
    decoder_only = TransformerDecoderBlock(FF, HEADS)
    decoder_only(x)
    with pytest.raises(ValueError, match="without cross-attention"):
        decoder_only(x, src)
    with pytest.raises(ValueError, match="cross-attention"):
        decoder_only.compute_cross_attention_cache(src)
    seq2seq = TransformerDecoderBlock(FF, HEADS)
    seq2seq(x, src)
    with pytest.raises(ValueError, match="encoder_sequence"):
        seq2seq(x)
    cache = ops.zeros((B, 2, T, HEADS, DIM // HEADS))
    with pytest.raises(ValueError, match="both"):
        seq2seq(x, src, self_attention_cache=cache, self_attention_cache_update_index=0)
    with pytest.raises(ValueError, match="cross_attention_cache_update_index=0"):
        decoder_only(x, cross_attention_cache_update_index=0)
    with pytest.raises(ValueError, match="cross_attention_cache_update_index=0"):
        seq2seq(x, src, cross_attention_cache_update_index=0)


# Masks ----------------------------------------------------------------------


def test_implicit_masks_equal_explicit_and_survive_a_stack():
    ids = np.array([[3, 1, 4, 0, 0], [5, 9, 2, 6, 5]])
    src_ids = np.array([[1, 2, 3, 4, 0, 0], [7, 8, 0, 0, 0, 0]])
    embed = keras.layers.Embedding(10, DIM, mask_zero=True)
    encoder = TransformerEncoderBlock(FF, HEADS)
    first, second = (
        TransformerDecoderBlock(FF, HEADS),
        TransformerDecoderBlock(FF, HEADS),
    )

    def stack(src, tgt, **masks):
        memory = encoder(src, padding_mask=masks.get("encoder_padding_mask"))
        y = first(tgt, memory, **masks)
        return second(y, memory, **masks)

    src, tgt = embed(src_ids), embed(ids)
    implicit = np_(stack(src, tgt))
    explicit = np_(
        stack(
            np_(src),
            np_(tgt),
            decoder_padding_mask=DEC_MASK,
            encoder_padding_mask=ENC_MASK,
        )
    )
    unmasked = np_(stack(np_(src), np_(tgt)))
    np.testing.assert_allclose(implicit, explicit, atol=1e-5)
    assert np.abs(implicit - unmasked).max() > 1e-3
    # The block's inputs keep their masks; the output carries the decoder's.
    memory = encoder(src)
    out = first(tgt, memory)
    for tensor, mask in ((src, ENC_MASK), (memory, ENC_MASK), (tgt, DEC_MASK)):
        np.testing.assert_array_equal(
            np_(keras.src.backend.get_keras_mask(tensor)), mask
        )
    np.testing.assert_array_equal(np_(keras.src.backend.get_keras_mask(out)), DEC_MASK)


def test_implicit_masks_in_functional_model():
    ids = np.array([[3, 1, 4, 0, 0], [5, 9, 2, 6, 5]])
    tokens = keras.Input((T,), dtype="int32")
    embed = keras.layers.Embedding(10, DIM, mask_zero=True)
    encoder = TransformerEncoderBlock(FF, HEADS)
    decoder = TransformerDecoderBlock(FF, HEADS, normalize_first=True)
    x = embed(tokens)
    model = keras.Model(tokens, decoder(x, encoder(x)))
    implicit = np_(model.predict(ids, verbose=0))  # compiled predict step
    x = np_(embed(ids))
    memory = encoder(x, padding_mask=DEC_MASK)
    explicit = decoder(
        x, memory, decoder_padding_mask=DEC_MASK, encoder_padding_mask=DEC_MASK
    )
    np.testing.assert_allclose(implicit, np_(explicit), atol=1e-5)
    assert np.abs(implicit - np_(decoder(x, encoder(x)))).max() > 1e-3


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision_is_finite_with_masks(policy):
    x, src = rand(B, T, DIM), rand(B, S, DIM, seed=1)
    enc_mask = ENC_MASK.copy()
    enc_mask[1] = False  # a fully padded source: rows with nothing to attend
    reference = TransformerDecoderBlock(FF, HEADS)
    reference(x, src)
    randomize(reference, seed=14)
    keras.config.set_dtype_policy(policy)
    decoder = TransformerDecoderBlock(FF, HEADS)
    out, weights = decoder(
        x,
        src,
        decoder_padding_mask=DEC_MASK,
        encoder_padding_mask=enc_mask,
        return_attention_scores=True,
    )
    assert keras.backend.standardize_dtype(out.dtype) == policy.split("_")[1]
    assert all(
        keras.backend.standardize_dtype(w.dtype) == "float32" for w in decoder.weights
    )
    assert np.all(np.isfinite(np_(out)))
    np.testing.assert_array_equal(np_(weights)[1], 0.0)  # zeros, not NaN
    # Same weights as the float32 reference: close, up to half precision.
    decoder.set_weights(reference.get_weights())
    kwargs = {"decoder_padding_mask": DEC_MASK, "encoder_padding_mask": enc_mask}
    half = np_(decoder(x, src, **kwargs))
    keras.config.set_dtype_policy("float32")
    np.testing.assert_allclose(half, np_(reference(x, src, **kwargs)), atol=0.1)


# Configuration --------------------------------------------------------------


def test_invalid_arguments_raise_clear_errors():
    with pytest.raises(ValueError, match="intermediate_dim=0"):
        TransformerEncoderBlock(0, HEADS)
    with pytest.raises(ValueError, match="num_heads=0"):
        TransformerDecoderBlock(FF, 0)
    with pytest.raises(ValueError, match=r"hidden size \(10\).*num_heads=3"):
        TransformerEncoderBlock(FF, 3)(rand(1, 4, 10))
    with pytest.raises(ValueError, match=r"hidden size \(10\).*num_heads=4"):
        TransformerDecoderBlock(FF, 4)(rand(1, 4, 10))
    with pytest.raises(ValueError, match="Unknown score"):
        TransformerEncoderBlock(FF, HEADS, score="nope")


def test_score_reaches_both_attention_sublayers():
    x, src = rand(B, T, DIM), rand(B, S, DIM, seed=1)
    block = TransformerDecoderBlock(FF, HEADS, score="general")
    block(x, src)
    for attention in (block._self_attention_layer, block._cross_attention_layer):
        assert isinstance(attention, MultiHeadAttention)
        assert attention.score == "general"
    plain = TransformerDecoderBlock(FF, HEADS)
    plain(x, src)
    # Each "general" score adds one (head_dim, head_dim) kernel.
    assert len(block.weights) == len(plain.weights) + 2


def test_dropout_only_in_training():
    x = rand(B, T, DIM)
    block = TransformerEncoderBlock(FF, HEADS, dropout=0.5)
    np.testing.assert_array_equal(np_(block(x)), np_(block(x, training=False)))
    assert np.abs(np_(block(x, training=True)) - np_(block(x))).max() > 1e-3


def test_get_config_round_trip():
    block = TransformerDecoderBlock(
        FF,
        HEADS,
        dropout=0.1,
        activation="gelu",
        layer_norm_epsilon=1e-6,
        kernel_initializer=keras.initializers.TruncatedNormal(stddev=0.02, seed=1),
        normalize_first=True,
        score="additive",
        name="dec",
    )
    config = block.get_config()
    for key, value in {
        "intermediate_dim": FF,
        "num_heads": HEADS,
        "dropout": 0.1,
        "layer_norm_epsilon": 1e-6,
        "normalize_first": True,
        "score": "additive",
    }.items():
        assert config[key] == value
    clone = TransformerDecoderBlock.from_config(config)
    assert clone.get_config() == config
    assert clone.kernel_initializer.stddev == 0.02


def test_functional_model_save_and_load(tmp_path):
    src_in = keras.Input((S, DIM), name="encoder_sequence")
    tgt_in = keras.Input((T, DIM), name="decoder_sequence")
    src_mask = keras.Input((S,), dtype="bool", name="encoder_padding_mask")
    memory = TransformerEncoderBlock(FF, HEADS, score="general", name="enc")(
        src_in, padding_mask=src_mask
    )
    out = TransformerDecoderBlock(FF, HEADS, normalize_first=True, name="dec")(
        tgt_in, memory, encoder_padding_mask=src_mask
    )
    model = keras.Model([src_in, tgt_in, src_mask], out)
    randomize(model, seed=15)
    data = [rand(B, S, DIM, seed=16), rand(B, T, DIM, seed=17), ENC_MASK]
    path = tmp_path / "blocks.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert isinstance(loaded.get_layer("dec"), TransformerDecoderBlock)
    assert loaded.get_layer("enc").get_config()["score"] == "general"
    np.testing.assert_allclose(np_(loaded(data)), np_(model(data)), atol=1e-6)
