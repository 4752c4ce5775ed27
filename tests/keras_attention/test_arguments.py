"""Every integer argument of the layers and scores is checked by one helper,
`keras_attention.arguments.int_argument`: one message, naming the argument,
what it takes and the value given; bools are no sizes, NumPy ints are. A
value of the wrong type raises a TypeError, one out of range a ValueError."""

import numpy as np
import pytest
from keras import ops

from keras_attention import scores
from keras_attention.arguments import int_argument
from keras_attention.layers import (
    Attention,
    AttentionDecoderCell,
    GlimpseNetwork,
    GlimpseSensor,
    ImageSelfAttention,
    MultiHeadAttention,
    TransformerEncoderBlock,
)

LAYERS = {
    "attention": lambda **kw: Attention(**kw),
    "mha": lambda **kw: MultiHeadAttention(num_heads=2, key_dim=4, **kw),
    "image": lambda **kw: ImageSelfAttention(**kw),
    "encoder": lambda **kw: TransformerEncoderBlock(
        **{"intermediate_dim": 8, "num_heads": 2, **kw}
    ),
    "sensor": lambda **kw: GlimpseSensor(**{"patch_size": 4, **kw}),
    "glimpse": lambda **kw: GlimpseNetwork(**kw),
    "cell": lambda **kw: AttentionDecoderCell(**{"units": 4, "memory_dim": 4, **kw}),
    "additive": lambda **kw: scores.Additive(**kw),
    "concat": lambda **kw: scores.Concat(**kw),
    "location": lambda **kw: scores.Location(**kw),
}

# (layer, argument, what the message says it takes)
ARGUMENTS = [
    ("attention", "window", "an int >= 1 or None"),
    ("attention", "local_units", "an int >= 1 or None"),
    ("attention", "chunk_threshold", "an int >= 0, 'auto' or None"),
    ("attention", "chunk_size", "an int >= 1 or 'auto'"),
    ("mha", "chunk_threshold", "an int >= 0, 'auto' or None"),
    ("mha", "chunk_size", "an int >= 1 or 'auto'"),
    ("mha", "window", "an int >= 1 or None"),
    ("image", "key_dim", "an int >= 1 or None"),
    ("image", "value_dim", "an int >= 1 or None"),
    ("image", "chunk_threshold", "an int >= 0, 'auto' or None"),
    ("image", "query_chunk_size", "an int >= 1 or 'auto'"),
    ("image", "key_chunk_size", "an int >= 1 or 'auto'"),
    ("encoder", "intermediate_dim", "an int >= 1"),
    ("encoder", "num_heads", "an int >= 1"),
    ("encoder", "chunk_threshold", "an int >= 0, 'auto' or None"),
    ("encoder", "window", "an int >= 1 or None"),
    ("sensor", "patch_size", "an int >= 1"),
    ("sensor", "num_scales", "an int >= 1"),
    ("sensor", "scale_factor", "an int >= 1"),
    ("glimpse", "glimpse_units", "an int >= 1"),
    ("glimpse", "output_units", "an int >= 1"),
    ("cell", "units", "an int >= 1"),
    ("cell", "memory_dim", "an int >= 1"),
    ("additive", "units", "an int >= 1 or None"),
    ("concat", "units", "an int >= 1 or None"),
    ("location", "max_length", "an int >= 1 or None"),
]


@pytest.mark.parametrize(("layer", "name", "takes"), ARGUMENTS)
@pytest.mark.parametrize("bad", [-1, True, 2.0, "8"])
def test_one_message_for_every_integer_argument(layer, name, takes, bad):
    if bad == -1 and "int >= 0" in takes:
        bad = -2
    expected = f"`{name}` must be {takes}. Received: {name}={bad!r}"
    # A string where strings are taken ('auto') is a bad value, not type.
    bad_type = isinstance(bad, (bool, float)) or (
        isinstance(bad, str) and "'" not in takes
    )
    with pytest.raises(TypeError if bad_type else ValueError) as error:
        LAYERS[layer](**{name: bad})
    assert str(error.value) == expected


def test_numpy_ints_are_kept_as_python_ints():
    layer = Attention(window=np.int64(2), chunk_threshold=np.int32(0))
    assert type(layer.window) is int and type(layer.chunk_threshold) is int
    assert layer.get_config()["window"] == 2
    assert int_argument("units", np.uint8(3)) == 3


def test_allowed_values_pass_unchanged():
    assert int_argument("chunk_size", "auto", allowed=("auto",)) == "auto"
    assert int_argument("window", None, allowed=(None,)) is None
    with pytest.raises(TypeError, match="Received: window=None"):
        int_argument("window", None)
    with pytest.raises(ValueError, match="Received: chunk_size='AUTO'"):
        int_argument("chunk_size", "AUTO", allowed=("auto",))


def test_a_maximum_is_a_value_error_naming_it():
    assert int_argument("units", 8192, maximum=8192) == 8192
    with pytest.raises(ValueError) as error:
        int_argument("units", 8193, maximum=8192)
    assert str(error.value) == "`units` must be at most 8192. Received: units=8193"


def test_a_scalar_int_tensor_passes_only_where_tensors_are_taken():
    width = ops.convert_to_tensor(3, "int32")
    assert int_argument("beam_width", width, tensor=True) is width
    with pytest.raises(TypeError, match="beam_width"):
        int_argument("beam_width", width)
    for bad in (ops.convert_to_tensor(3.0), ops.convert_to_tensor([3, 4])):
        with pytest.raises(TypeError, match="a scalar int tensor"):
            int_argument("beam_width", bad, tensor=True)
