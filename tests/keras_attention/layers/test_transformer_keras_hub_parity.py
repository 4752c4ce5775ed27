"""Transformer blocks beside keras-hub's, in one process, on TF and JAX.

`TransformerEncoderBlock` / `TransformerDecoderBlock` have the sublayers of
`keras_hub.layers.TransformerEncoder` / `TransformerDecoder` in the same order,
so keras-hub's weights copy into ours one for one and the outputs, caches
and output specs are compared directly. keras-hub's decoder returns no
attention weights and its output spec is a single tensor whatever the call
form; there ours is compared with its own eager call instead.
"""

import keras
import keras_hub
import numpy as np
import pytest
from keras import ops

from keras_attention.layers import TransformerDecoderBlock, TransformerEncoderBlock

B, T, S, DIM, HEADS, FF = 2, 4, 5, 6, 2, 8
HEAD_DIM = DIM // HEADS
DEC_MASK = np.array([[1, 1, 1, 0], [1, 1, 1, 1]], bool)
ENC_MASK = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], bool)
BLOCKS = ["encoder", "decoder", "decoder+cross"]


def rand(*shape, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, size=shape).astype("float32")


def np_(x):
    return np.asarray(ops.convert_to_numpy(x), dtype="float32")


def inputs_for(block):
    x, src = rand(B, T, DIM), rand(B, S, DIM, seed=1)
    return (x, src) if block == "decoder+cross" else (x,)


def hub_and_ours(block, normalize_first=False, seed=0, **kwargs):
    """keras-hub's block and ours, built on `inputs_for(block)`, same weights."""
    hub_cls, our_cls = (
        (keras_hub.layers.TransformerEncoder, TransformerEncoderBlock)
        if block == "encoder"
        else (keras_hub.layers.TransformerDecoder, TransformerDecoderBlock)
    )
    args = dict(
        intermediate_dim=FF,
        num_heads=HEADS,
        normalize_first=normalize_first,
        activation="gelu",
        **kwargs,
    )
    hub, ours = hub_cls(**args), our_cls(**args)
    shapes = [x.shape for x in inputs_for(block)]
    hub.build(*shapes)
    ours.build(*shapes)
    assert [w.path.split("/", 1)[1] for w in ours.weights] == [
        w.path.split("/", 1)[1] for w in hub.weights
    ]
    rng = np.random.default_rng(seed)
    hub.set_weights(
        [rng.normal(scale=0.5, size=w.shape).astype("float32") for w in hub.weights]
    )
    ours.set_weights(hub.get_weights())
    return hub, ours


def assert_same_specs(ours, hub):
    ours, hub = keras.tree.flatten(ours), keras.tree.flatten(hub)
    assert len(ours) == len(hub)
    for a, b in zip(ours, hub, strict=True):
        assert tuple(a.shape) == tuple(b.shape)
        assert keras.backend.standardize_dtype(a.dtype) == (
            keras.backend.standardize_dtype(b.dtype)
        )


# Mixed precision: compute_output_spec / compute_output_shape ---------------


@pytest.mark.parametrize("normalize_first", [False, True])
@pytest.mark.parametrize("block", BLOCKS)
def test_mixed_float16_output_spec_matches_keras_hub(block, normalize_first):
    inputs = [ops.convert_to_tensor(x) for x in inputs_for(block)]
    hub, ours = hub_and_ours(block, normalize_first, dtype="mixed_float16")
    # keras-hub's layer test calls compute_output_spec on float32 tensors.
    spec = ours.compute_output_spec(*inputs)
    assert_same_specs(spec, hub.compute_output_spec(*inputs))
    assert keras.backend.standardize_dtype(spec.dtype) == "float16"
    assert tuple(spec.shape) == (B, T, DIM)
    shapes = [x.shape for x in inputs]
    assert tuple(ours.compute_output_shape(*shapes)) == tuple(
        hub.compute_output_shape(shapes[0])
    )
    # A symbolic call (functional model) and an eager call agree with it.
    symbolic = [keras.Input(batch_shape=x.shape) for x in inputs]
    assert_same_specs(ours(*symbolic), hub(*symbolic))
    ours_out, hub_out = ours(*inputs), hub(*inputs)
    assert_same_specs(ours_out, spec)
    assert_same_specs(ours_out, hub_out)
    np.testing.assert_allclose(np_(ours_out), np_(hub_out), atol=3e-2)


@pytest.mark.parametrize("normalize_first", [False, True])
def test_mixed_float16_encoder_spec_with_attention_scores(normalize_first):
    (x,) = inputs_for("encoder")
    hub, ours = hub_and_ours("encoder", normalize_first, dtype="mixed_float16")
    spec = ours.compute_output_spec(x, return_attention_scores=True)
    eager = ours(x, padding_mask=DEC_MASK, return_attention_scores=True)
    hub_eager = hub(x, padding_mask=DEC_MASK, return_attention_scores=True)
    assert_same_specs(spec, eager)
    assert_same_specs(eager, hub_eager)
    assert tuple(spec[1].shape) == (B, HEADS, T, T)
    assert keras.backend.standardize_dtype(spec[1].dtype) == "float16"
    symbolic = ours(keras.Input(batch_shape=x.shape), return_attention_scores=True)
    assert_same_specs(symbolic, eager)
    np.testing.assert_allclose(np_(eager[0]), np_(hub_eager[0]), atol=3e-2)
    np.testing.assert_allclose(np_(eager[1]), np_(hub_eager[1]), atol=1e-2)


@pytest.mark.parametrize("return_attention_scores", [False, True])
@pytest.mark.parametrize("block", ["decoder", "decoder+cross"])
def test_mixed_float16_decoder_spec_with_caches(block, return_attention_scores):
    inputs = inputs_for(block)
    hub, ours = hub_and_ours(block, dtype="mixed_float16")
    caches = {
        "self_attention_cache": np.zeros((B, 2, T, HEADS, HEAD_DIM), "float32"),
        "self_attention_cache_update_index": 0,
    }
    if block == "decoder+cross":
        caches["cross_attention_cache"] = np.zeros(
            (B, 2, S, HEADS, HEAD_DIM), "float32"
        )
        caches["cross_attention_cache_update_index"] = 0
    eager = ours(*inputs, **caches, return_attention_scores=return_attention_scores)
    spec = ours.compute_output_spec(
        *inputs, **caches, return_attention_scores=return_attention_scores
    )
    symbolic = ours(
        *[keras.Input(batch_shape=x.shape) for x in inputs],
        **{
            k: keras.Input(batch_shape=v.shape) if k.endswith("cache") else v
            for k, v in caches.items()
        },
        return_attention_scores=return_attention_scores,
    )
    assert_same_specs(spec, eager)
    assert_same_specs(symbolic, eager)
    assert all(
        keras.backend.standardize_dtype(t.dtype) == "float16"
        for t in keras.tree.flatten(eager)
    )
    keys = S if block == "decoder+cross" else T
    if return_attention_scores:
        assert tuple(eager[-1].shape) == (B, HEADS, T, keys)
        eager = eager[:-1]
    # keras-hub gives the same outputs and caches (it has no attention scores).
    hub_eager = hub(*inputs, **caches)
    assert_same_specs(eager, hub_eager)
    for a, b in zip(eager, hub_eager, strict=True):
        np.testing.assert_allclose(np_(a), np_(b), atol=3e-2)


# Cached decoding: cache update indices -------------------------------------


@pytest.mark.parametrize("normalize_first", [False, True])
def test_cross_attention_cache_update_index_matches_keras_hub(normalize_first):
    x, src = inputs_for("decoder+cross")
    hub, ours = hub_and_ours("decoder+cross", normalize_first, seed=3)
    masks = {"decoder_padding_mask": DEC_MASK, "encoder_padding_mask": ENC_MASK}
    first = {
        "self_attention_cache": np.zeros((B, 2, T, HEADS, HEAD_DIM), "float32"),
        "self_attention_cache_update_index": 0,
        "cross_attention_cache": np.zeros((B, 2, S, HEADS, HEAD_DIM), "float32"),
        "cross_attention_cache_update_index": 0,
    }
    ours_full = ours(x, src, **masks, **first)
    hub_full = hub(x, src, **masks, **first)
    assert len(ours_full) == len(hub_full) == 3
    for a, b in zip(ours_full, hub_full, strict=True):
        np.testing.assert_allclose(np_(a), np_(b), atol=1e-5)
    # Index 0 on an empty cache fills it as `compute_cross_attention_cache`.
    np.testing.assert_allclose(
        np_(ours_full[2]), np_(ours.compute_cross_attention_cache(src)), atol=1e-6
    )
    # Step by step: the self cache is written at i, the cross cache reused.
    caches = {
        "ours": first["self_attention_cache"],
        "hub": first["self_attention_cache"],
    }
    steps = []
    for i in range(T):
        step = {
            "self_attention_cache_update_index": ops.convert_to_tensor(i, "int32"),
            "cross_attention_cache": ours_full[2],
        }
        outputs = {}
        for key, layer in (("ours", ours), ("hub", hub)):
            out, caches[key], cross = layer(
                x[:, i : i + 1],
                src,
                **masks,
                self_attention_cache=caches[key],
                **step,
            )
            np.testing.assert_array_equal(np_(cross), np_(ours_full[2]))
            outputs[key] = np_(out)
        np.testing.assert_allclose(outputs["ours"], outputs["hub"], atol=1e-5)
        steps.append(outputs["ours"])
    np.testing.assert_allclose(np.concatenate(steps, 1), np_(ours_full[0]), atol=1e-5)
    np.testing.assert_allclose(np_(caches["ours"]), np_(hub_full[1]), atol=1e-5)


@pytest.mark.parametrize("use_causal_mask", [True, False])
@pytest.mark.parametrize("with_attention_mask", [False, True])
def test_reading_a_self_cache_without_update_index_matches_keras_hub(
    use_causal_mask, with_attention_mask
):
    """`self_attention_cache_update_index=None`: queries at 0 ... T - 1."""
    (x,) = inputs_for("decoder")
    hub, ours = hub_and_ours("decoder", normalize_first=True, seed=4)
    max_length = T + 2
    _, cache = hub(
        x,
        self_attention_cache=np.zeros((B, 2, max_length, HEADS, HEAD_DIM), "float32"),
        self_attention_cache_update_index=0,
    )
    kwargs = {"self_attention_cache": cache, "use_causal_mask": use_causal_mask}
    if with_attention_mask:
        kwargs["decoder_attention_mask"] = rand(B, 2, max_length, seed=5) > -0.5
    ours_out, ours_cache = ours(x[:, :2], **kwargs)
    hub_out, hub_cache = hub(x[:, :2], **kwargs)
    np.testing.assert_allclose(np_(ours_out), np_(hub_out), atol=1e-5)
    np.testing.assert_array_equal(np_(ours_cache), np_(cache))
    np.testing.assert_array_equal(np_(hub_cache), np_(cache))


# Masks ----------------------------------------------------------------------


@pytest.mark.parametrize("use_causal_mask", [True, False])
@pytest.mark.parametrize("normalize_first", [False, True])
def test_decoder_masks_match_keras_hub(normalize_first, use_causal_mask):
    x, src = inputs_for("decoder+cross")
    hub, ours = hub_and_ours("decoder+cross", normalize_first, seed=6)
    kwargs = {
        "decoder_padding_mask": DEC_MASK,
        "decoder_attention_mask": rand(B, T, T, seed=7) > -0.3,
        "encoder_padding_mask": ENC_MASK,
        "encoder_attention_mask": rand(B, T, S, seed=8) > -0.3,
        "use_causal_mask": use_causal_mask,
    }
    kwargs["decoder_attention_mask"][:, :, 0] = True  # every row sees a key
    kwargs["encoder_attention_mask"][:, :, 0] = True
    ours_out, hub_out = np_(ours(x, src, **kwargs)), np_(hub(x, src, **kwargs))
    np.testing.assert_allclose(ours_out, hub_out, atol=1e-5)
    plain = np_(ours(x, src, use_causal_mask=use_causal_mask))
    assert np.abs(ours_out - plain).max() > 1e-3  # the masks did something


# keras-hub's attention projections warn that they drop the inputs' masks.
@pytest.mark.filterwarnings("ignore:Layer '(query|key|value)':UserWarning")
def test_decoder_implicit_masks_match_keras_hub():
    ids = np.array([[3, 1, 4, 0], [5, 9, 2, 6]])
    src_ids = np.array([[1, 2, 3, 0, 0], [7, 8, 9, 1, 2]])
    embed = keras.layers.Embedding(10, DIM, mask_zero=True)
    hub, ours = hub_and_ours("decoder+cross", seed=9)
    tgt, src = embed(ids), embed(src_ids)
    np.testing.assert_allclose(np_(ours(tgt, src)), np_(hub(tgt, src)), atol=1e-5)
    explicit = ours(
        np_(tgt),
        np_(src),
        decoder_padding_mask=ids > 0,
        encoder_padding_mask=src_ids > 0,
    )
    np.testing.assert_allclose(np_(ours(tgt, src)), np_(explicit), atol=1e-5)


# Configuration --------------------------------------------------------------


@pytest.mark.parametrize("block", ["encoder", "decoder+cross"])
def test_config_matches_keras_hub_and_round_trips(block):
    hub, ours = hub_and_ours(
        block,
        normalize_first=True,
        dropout=0.1,
        layer_norm_epsilon=1e-6,
        kernel_initializer="he_normal",
        name="block",
    )
    hub_config, config = hub.get_config(), ours.get_config()
    # keras-hub also stores its build shapes; Keras's build config does that.
    shared = set(hub_config) - {"decoder_sequence_shape", "encoder_sequence_shape"}
    assert {k: config[k] for k in shared} == {k: hub_config[k] for k in shared}
    assert set(config) - shared == {"score", "chunk_threshold", "chunk_size", "window"}
    # keras-hub's config builds our block: a drop-in for from_config.
    from_hub = type(ours).from_config({k: hub_config[k] for k in shared})
    assert from_hub.get_config() == config
    revived = keras.saving.deserialize_keras_object(
        keras.saving.serialize_keras_object(ours)
    )
    assert type(revived) is type(ours)
    assert revived.get_config() == config
