"""The inputs of an `Attention` call: the tensor and list forms, checked.

`Attention.call` takes Keras's list form `layer([query, value(, key)],
mask=[...])` and the tensor form `layer(query, value, key, ...)`; both
become one `Call` record that the layer's route and paths read. The
argument checks of the layer's constructor and `build` live here too.
"""

import dataclasses

import keras
from keras import ops

from keras_attention import scores
from keras_attention.layers import dispatch

# `keras.layers.Attention(score_mode=...)` -> the score with Keras's variables.
KERAS_SCORES = {"dot": "dot", "concat": "tanh_sum"}


@dataclasses.dataclass
class Call:
    """One call of `Attention`, as its route and paths read it.

    `query_mask` is the mask of the rows inside the attention; Keras's list
    call has none there (`row_mask` zeroes its masked rows after, and
    `batch_shape` restores its batch axes), and its causal mask aligns the
    first query with the first value (`causal_from_start`). `padding` is
    `dispatch.triton_padding` of the masks as the caller gave them;
    `scale` and `kind` are set by `_route`; `score_mod` (the layer's hook
    bound to the call, `score_mods.Bound`) by `call`.
    """

    query: object
    value: object
    key: object
    query_mask: object = None
    value_mask: object = None
    attention_mask: object = None
    use_causal_mask: bool = False
    causal_from_start: bool = False
    training: object = None
    returns: tuple = (False, False, False)
    query_positions: object = None
    projected_key: object = None
    padding: object = None
    row_mask: object = None
    batch_shape: object = None
    scale: object = None
    kind: str = "none"
    score_mod: object = None


def tensor_call(query, value, key, query_mask, value_mask, key_mask, mask):
    """The `Call` of `layer(query, value, key, ...)`, checked."""
    if mask is not None:
        raise ValueError(
            "`mask=[query_mask, value_mask]` goes with Keras's list call "
            "`layer([query, value], mask=...)`; the tensor call takes "
            f"`query_mask` and `value_mask`. Received: mask={mask!r}"
        )
    if value is None:
        raise ValueError(
            "Attention needs a value: call it as `layer(query, value)` or "
            f"`layer([query, value])`. Received: value={value!r}"
        )
    key = value if key is None else key
    check_shapes(query.shape, value.shape, key.shape)
    check_floating(query=query, value=value, key=key)
    # The masks as given: `triton_padding` compares the objects.
    padding = dispatch.triton_padding(query_mask, (value_mask, key_mask))
    if key_mask is not None:
        key_mask = ops.cast(key_mask, "bool")
        value_mask = (
            key_mask
            if value_mask is None
            else ops.logical_and(ops.cast(value_mask, "bool"), key_mask)
        )
    return Call(query, value, key, query_mask, value_mask, padding=padding)


def list_call(inputs, mask, use_causal_mask):
    """The `Call` of Keras's `layer([query, value(, key)], mask=[qm, vm])`.

    As `keras.layers.Attention`: the query mask only zeroes the output
    rows, the causal mask aligns the first query with the first value,
    `mask[2]` (a key mask) is ignored, and inputs of rank > 3 have several
    batch axes (they are flattened into one around the attention).
    """
    query, value, key = unpack_list("inputs", inputs)
    key = value if key is None else key
    query_mask = value_mask = None
    if mask is not None:
        if not isinstance(mask, (list, tuple)) or not 2 <= len(mask) <= 3:
            raise ValueError(
                "Attention's list call takes `mask=[query_mask, "
                f"value_mask]`. Received: mask={mask!r}"
            )
        query_mask, value_mask = mask[0], mask[1]
    # One mask object for queries and values (Keras's masks of `[x, x]`)
    # is a self-attention padding JAX's Triton kernel takes.
    shared = query_mask is not None and query_mask is value_mask
    padding = "shared" if shared else dispatch.triton_padding(None, (value_mask,))
    check_shapes(query.shape, value.shape, key.shape, any_rank=True)
    check_floating(query=query, value=value, key=key)
    query_shape, value_shape = ops.shape(query), ops.shape(value)
    batch_shape = None
    if query_mask is not None:
        query_mask = ops.broadcast_to(ops.cast(query_mask, "bool"), query_shape[:-1])
    if value_mask is not None:
        value_mask = ops.broadcast_to(ops.cast(value_mask, "bool"), value_shape[:-1])
    if len(query.shape) > 3:
        batch_shape = query_shape[:-2]
        query, value, key = (flatten_batch(x, 2) for x in (query, value, key))
        if value_mask is not None:
            value_mask = flatten_batch(value_mask, 1)
    return Call(
        query,
        value,
        key,
        value_mask=value_mask,
        use_causal_mask=use_causal_mask,
        causal_from_start=True,
        padding=padding,
        row_mask=query_mask,
        batch_shape=batch_shape,
    )


def is_static_int(dim):
    """Whether a shape entry is a known length (not `None` or symbolic)."""
    return isinstance(dim, int) and not isinstance(dim, bool)


def select(outputs, returns):
    """The context, then the outputs whose `return_*` flag is set."""
    context, *others = outputs
    chosen = [output for output, wanted in zip(others, returns) if wanted]
    return (context, *chosen) if chosen else context


def unpack_list(name, inputs):
    """Splits Keras's `[query, value(, key)]` list; `key` may be `None`."""
    if (
        not isinstance(inputs, (list, tuple))
        or not 2 <= len(inputs) <= 3
        or any(x is None or isinstance(x, int) for x in inputs[:2])  # one shape
    ):
        raise ValueError(
            "Attention's list call takes [query, value] or [query, value, key]. "
            f"Received: {name}={inputs!r}"
        )
    key = inputs[2] if len(inputs) == 3 else None
    return inputs[0], inputs[1], key


def check_list_call(**arguments):
    given = [name for name, value in arguments.items() if value is not None]
    if given:
        raise ValueError(
            "Keras's list call `layer([query, value(, key)], mask=[query_mask, "
            "value_mask])` takes no separate tensors or masks; use the tensor "
            "call `layer(query, value, key, ...)` for them. Received: "
            + ", ".join(f"{name}={arguments[name]!r}" for name in given)
        )


def flatten_batch(x, inner_rank):
    """Merges the leading batch axes of `x` into one."""
    return ops.reshape(x, (-1, *ops.shape(x)[-inner_rank:]))


def unflatten_batch(x, batch_shape):
    """Splits the first axis of `x` (or `None`) back into `batch_shape`."""
    if x is None:
        return None
    return ops.reshape(x, (*batch_shape, *ops.shape(x)[1:]))


def rank3(shape):
    """The `(batch, T, D)` shape seen by the score when batch axes are merged."""
    shape = tuple(shape)
    return shape if len(shape) == 3 else (None, *shape[-2:])


def check_choice(name, value, choices):
    if value not in choices:
        raise ValueError(
            f"`{name}` must be one of {', '.join(map(repr, choices))}. "
            f"Received: {name}={value!r}"
        )


def check_score(score):
    if isinstance(score, str):
        if score.lower() not in scores.ALIASES:
            raise ValueError(
                f"Unknown score {score!r}. Valid names are: "
                f"{', '.join(sorted(scores.ALIASES))}. Received: score={score!r}"
            )
    elif not isinstance(score, (dict, scores.Score)):
        raise ValueError(
            "`score` must be a name, a config dict or a `keras_attention."
            f"scores.Score` layer. Received: score={score!r}"
        )


def check_floating(**tensors):
    """Raises a `TypeError` naming the first tensor that is not floating.

    An integer or boolean query, value or key would give an integer
    context (truncated weights): Keras's `Attention` fails on them too.
    """
    for name, tensor in tensors.items():
        dtype = keras.backend.standardize_dtype(tensor.dtype)
        if not keras.backend.is_float_dtype(dtype):
            raise TypeError(
                f"Attention needs floating-point inputs (cast them first, "
                f"e.g. with keras.ops.cast(x, 'float32')). Received: "
                f"{name}.dtype={dtype}"
            )


def check_shapes(query_shape, value_shape, key_shape, any_rank=False):
    shapes = (
        f"Received: query.shape={tuple(query_shape)}, "
        f"value.shape={tuple(value_shape)}, key.shape={tuple(key_shape)}"
    )
    ranks = {len(query_shape), len(value_shape), len(key_shape)}
    if any_rank and (len(ranks) > 1 or min(ranks) < 3):
        raise ValueError(
            "Attention expects query (..., Tq, Dq), value (..., Tv, Dv) and "
            f"key (..., Tv, Dk) of equal rank 3 or more. {shapes}"
        )
    if not any_rank and ranks != {3}:
        raise ValueError(
            "Attention expects query (batch, Tq, Dq), value (batch, Tv, Dv) "
            "and key (batch, Tv, Dk) of rank 3 (the list call "
            f"`layer([query, value])` also takes more batch axes). {shapes}"
        )
    for axis in range(len(query_shape) - 2):
        sizes = {s[axis] for s in (query_shape, value_shape, key_shape)} - {None}
        if len(sizes) > 1:
            raise ValueError(
                f"query, value and key must have the same batch size. {shapes}"
            )
    if (
        None not in (value_shape[-2], key_shape[-2])
        and value_shape[-2] != key_shape[-2]
    ):
        raise ValueError("key and value must have the same length (axis -2). " + shapes)


def keras_score(score, score_mode, use_scale):
    """`(score, score_mode, use_scale)` of `Attention`'s arguments, checked.

    Keras's `score_mode` / `use_scale` become the score of the same
    variables (`KERAS_SCORES`); no score at all is `"scaled_dot"`.
    """
    if use_scale is not None and not isinstance(use_scale, bool):
        raise ValueError(
            f"`use_scale` must be a bool. Received: use_scale={use_scale!r}"
        )
    if score_mode is not None:
        check_choice("score_mode", score_mode, tuple(KERAS_SCORES))
    if use_scale is not None or score_mode is not None:
        if score is not None:
            raise ValueError(
                "Pass either `score` or Keras's `score_mode` / `use_scale`, "
                f"not both. Received: score={score!r}, "
                f"score_mode={score_mode!r}, use_scale={use_scale!r}"
            )
        score_mode = score_mode or "dot"
        use_scale = bool(use_scale)
        score = {
            "class_name": KERAS_SCORES[score_mode],
            "config": {"use_scale": use_scale},
        }
    elif score is None:
        score = "scaled_dot"
    check_score(score)
    return score, score_mode, use_scale
