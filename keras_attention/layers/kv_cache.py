"""The key/value cache of incremental decoding, for `MultiHeadAttention`.

A cache is keras-hub's stacked tensor `(batch, 2, max_length, num_heads,
key_dim)` or a heads-first pair `(keys, values)`. This module checks its
layout, writes a step's projections into it (`CachedProjections`, the
layer's projections), finds the prefix a causal step reads, and reads it in
place for one query (a decoding step).
"""

import math

import keras
from keras import ops

from keras_attention.layers import dispatch, head_masks
from keras_attention.scores.dot import Dot
from keras_attention.scores.precision import widen
from keras_attention.scores.scaled_dot import ScaledDot

#: Up to this many heads, one query (a decoding step) is attended with
#: block-diagonal matmuls that read keys and values `(B, Tv, heads, dim)` in
#: place, instead of transposing them to heads-first at every step (a copy
#: of the whole cache, 4x the time on a CPU); the matmuls do `heads` times
#: the products, all but one block of them with zeros.
MAX_BLOCK_HEADS = 8


def _block_diagonal(x):
    """`(B, heads, dim)` -> `(B, heads, heads * dim)`, row h holding x[:, h].

    Row `h` is zero outside its block `h * dim ... (h + 1) * dim`.
    """
    heads, dim = x.shape[1], x.shape[2]
    eye = ops.eye(heads, dtype=x.dtype)
    blocks = x[:, :, None, :] * eye[None, :, :, None]
    return ops.reshape(blocks, (-1, heads, heads * dim))


def one_query_dot_scores(score, query, key):
    """Raw `(B, heads, 1, Tv)` dot scores of one query, keys read in place.

    For the `Dot` and `ScaledDot` scores (the same products and scaling as
    their `call`, float32 for float16 inputs); `None` for another score.

    >>> import numpy as np
    >>> q = np.random.normal(size=(2, 1, 3, 4)).astype("float32")
    >>> k = np.random.normal(size=(2, 5, 3, 4)).astype("float32")
    >>> raw = one_query_dot_scores(ScaledDot(), q, k)
    >>> bool(np.allclose(raw, np.einsum("bqhd,bkhd->bhqk", q, k) / 2, atol=1e-6))
    True
    """
    if type(score) is ScaledDot:
        query = widen(query)
        query = ops.multiply(
            query, ops.cast(1.0 / math.sqrt(key.shape[-1]), query.dtype)
        )
    elif type(score) is Dot:
        query = widen(query)
    else:
        return None
    key = widen(key)
    heads, dim = key.shape[2], key.shape[3]
    flat_keys = ops.reshape(key, (-1, ops.shape(key)[1], heads * dim))
    blocks = _block_diagonal(ops.cast(query[:, 0], key.dtype))
    # keys (B, Tv, heads * dim) @ blocks^T: only the small operand moves.
    raw = ops.matmul(flat_keys, ops.transpose(blocks, (0, 2, 1)))
    raw = ops.transpose(raw, (0, 2, 1))
    if type(score) is Dot and score.scale is not None:
        raw = ops.multiply(raw, ops.cast(score.scale, raw.dtype))
    return raw[:, :, None, :]


def one_query_context(weights, value):
    """`(B, 1, heads, dim)` context of one query's weights `(B, heads, 1, Tv)`.

    The values `(B, Tv, heads, dim)` are read in place: one matmul of the
    weights with every head's values, then each head's own block.

    >>> import numpy as np
    >>> w = np.random.uniform(size=(2, 3, 1, 5)).astype("float32")
    >>> v = np.random.normal(size=(2, 5, 3, 4)).astype("float32")
    >>> out = one_query_context(w, v)
    >>> bool(np.allclose(out, np.einsum("bhqk,bkhd->bqhd", w, v), atol=1e-6))
    True
    """
    heads, dim = value.shape[2], value.shape[3]
    flat_values = ops.reshape(value, (-1, ops.shape(value)[1], heads * dim))
    weights = ops.cast(weights[:, :, 0, :], flat_values.dtype)
    every = ops.reshape(ops.matmul(weights, flat_values), (-1, heads, heads, dim))
    eye = ops.eye(heads, dtype=every.dtype)
    own = ops.sum(every * eye[None, :, :, None], axis=2)
    return own[:, None]


def write_cache(cache, new, index, axis):
    """`cache` with `new` (cast to its dtype) written from `index` on `axis`.

    `ops.slice_update`, except for one position under JAX: there a
    `where` on the position writes it. Both give the same values (a
    selection; a negative index counted from the end, then clipped into
    the cache, as JAX's `dynamic_update_slice` does), but in a compiled
    decoding loop XLA turned each `slice_update` into copies of the whole
    cache: 35 per greedy step of the zoo's Transformer translator, 17 with
    the `where` (`experiments/benchmarks/jax_decoding_step.py --loop`).
    """
    new = ops.cast(new, cache.dtype)
    length = cache.shape[axis]
    if keras.config.backend() == "jax" and new.shape[axis] == 1 and length:
        shape = [1] * len(cache.shape)
        shape[axis] = length
        index = ops.convert_to_tensor(index, "int32")
        # As `dynamic_update_slice`: a negative index counts from the end.
        index = ops.clip(ops.where(index < 0, index + length, index), 0, length - 1)
        here = ops.reshape(ops.arange(length, dtype="int32") == index, shape)
        return ops.where(here, new, cache)
    start = [0] * len(cache.shape)
    start[axis] = index
    return ops.slice_update(cache, start, new)


def take_prefix(x, length, axis):
    """The first `length` entries of `x` along `axis`; None passes through.

    A mask whose `axis` is 1 (broadcast) keeps it.
    """
    if x is None:
        return None
    index = [slice(None)] * len(x.shape)
    index[axis] = slice(0, length)
    return x[tuple(index)]


def cache_length(cache):
    """`max_length` of a key/value cache, stacked or a (keys, values) pair.

    >>> import numpy as np
    >>> cache_length(np.zeros((1, 2, 5, 2, 4))), cache_length(
    ...     (np.zeros((1, 2, 5, 4)), np.zeros((1, 2, 5, 3))))
    (5, 5)
    """
    return ops.shape(cache[0] if isinstance(cache, (tuple, list)) else cache)[2]


def _shape_matches(shape, expected):
    """Whether dimensions agree wherever both are known."""
    return len(shape) == len(expected) and all(
        s is None or e is None or s == e for s, e in zip(shape, expected)
    )


def check_cache(cache, num_heads, key_dim, value_dim):
    """Raises a `ValueError` unless `cache` has a layout the layer reads."""
    if isinstance(cache, (tuple, list)):
        shapes = [tuple(getattr(c, "shape", ())) for c in cache]
        expected = [
            (num_heads, None, key_dim),
            (num_heads, None, value_dim),
        ]
        if (
            len(shapes) != 2
            or any(
                len(s) != 4 or not _shape_matches(s[1:], e)
                for s, e in zip(shapes, expected)
            )
            or not _shape_matches(shapes[0][:3], shapes[1][:3])
        ):
            raise ValueError(
                "A split `cache` must be a pair (keys, values) of shapes "
                f"(batch, num_heads={num_heads}, max_length, "
                f"key_dim={key_dim}) and (batch, num_heads, "
                f"max_length, value_dim={value_dim}). Received: "
                f"shapes {shapes}"
            )
        return
    shape = tuple(cache.shape)
    expected = (2, None, num_heads, key_dim)
    if value_dim != key_dim:
        raise ValueError(
            "The stacked cache holds keys and values in one tensor, so it "
            f"needs `value_dim == key_dim` (or pass `cache` as a pair "
            f"(keys, values)). Received: key_dim={key_dim}, "
            f"value_dim={value_dim}"
        )
    if len(shape) != 5 or not _shape_matches(shape[1:], expected):
        raise ValueError(
            "`cache` must have shape (batch, 2, max_length, num_heads="
            f"{num_heads}, key_dim={key_dim}). Received: "
            f"cache.shape={shape}"
        )


def visible_prefix(cache_update_index, query_length, cache_size):
    """How many cache positions a causal decoding step reads, or None (all).

    The `Tq` queries of a step stand at `cache_update_index ...
    cache_update_index + Tq - 1`, so the causal mask hides every later
    cache position from all of them: where the index is known now
    (`dispatch.concrete_int`: a Python int, eager PyTorch or TensorFlow)
    the step attends over the first `cache_update_index + Tq` positions
    only, with the same weights (the hidden ones are exactly 0). Under a
    trace (`tf.function`, `jax.jit`, `torch.compile`) the index has no
    value and the step reads the whole cache: static shapes.

    Returns `(prefix, use_causal_mask)`: the number of positions read
    (None: all), and whether a causal mask is still needed among them
    (not for one query, which sees its whole prefix; the first step
    reads two positions, as a softmax over one is what Keras warns of).

    >>> visible_prefix(3, 1, 8), visible_prefix(0, 1, 8), visible_prefix(6, 2, 8)
    ((4, False), (2, True), (None, True))
    """
    index = dispatch.concrete_int(cache_update_index)
    length = query_length
    if index is None or index < 0 or length is None or cache_size is None:
        return None, True
    prefix = max(index + length, 2)
    if prefix >= cache_size:
        return None, True
    return prefix, length != 1 or prefix != index + 1


class CachedProjections:
    """`MultiHeadAttention`'s projections into heads, through its cache.

    A mixin: `_project` projects a call's query, key and value (reading and
    writing the cache), and `_read_visible_cache` cuts a causal decoding
    step to the cache positions it can see. It reads the layer's
    projections and hooks (`_key_value_heads`, `_overrides_hooks`,
    `_check_attention_mask`).
    """

    def _project(self, call):
        """Projects query, key and value into heads, reading and writing the cache.

        The query becomes `(B, Tq, num_heads, key_dim)`; key and value
        `(B, Tv, num_heads, dim)`, the whole cache with one (heads first,
        `(B, num_heads, max_length, dim)`, from a split cache); `call.cache`
        the cache as returned. With `rotary`, the query and the new keys are
        rotated at their positions (from the cache index) before the keys
        are written.
        """
        cache, index = call.cache, call.cache_update_index
        call.query = self._rotate(self.query_dense(call.query), index)
        if cache is None:
            if index is not None:
                raise ValueError(
                    "`cache_update_index` should not be set if `cache` is "
                    f"`None`. Received: cache_update_index={index}"
                )
            call.key = self._rotate(self.key_dense(call.key), None)
            call.value = self.value_dense(call.value)
            return
        check_cache(cache, self._key_value_heads(), self.key_dim, self.value_dim)
        call.heads_first = isinstance(cache, (tuple, list))
        if call.heads_first:
            key_cache, value_cache = cache
            axis = 2
        else:
            key_cache, value_cache = cache[:, 0, ...], cache[:, 1, ...]
            axis = 1
        if index is None:
            call.key, call.value = key_cache, value_cache
            return
        key = self._rotate(self.key_dense(call.key), index)
        value = self.value_dense(call.value)
        if call.heads_first:
            key = ops.transpose(key, (0, 2, 1, 3))
            value = ops.transpose(value, (0, 2, 1, 3))
        call.key = write_cache(key_cache, key, index, axis)
        call.value = write_cache(value_cache, value, index, axis)
        if call.heads_first:
            call.cache = (call.key, call.value)
        else:
            call.cache = ops.stack((call.key, call.value), axis=1)

    def _rotate(self, heads, index):
        """Rotary positions of `(B, T, heads, dim)` from `index` (or 0)."""
        if self._rotary is None:
            return heads
        return self._rotary(heads, start_index=0 if index is None else index)

    def _read_visible_cache(self, call):
        """Cuts a causal decoding step's keys to those it can see.

        Where the step's index is known (`visible_prefix`) the
        keys, values and masks keep the first `prefix` cache positions (the
        masks are checked against the whole cache first). A subclass
        overriding Keras's hooks, or a flash kernel, gets the whole cache,
        laid out as Keras's `(B, Tv, num_heads, dim)`.

        Returns `(prefix, cache_size)`: `prefix` None where the whole cache
        is read.
        """
        axis = 2 if call.heads_first else 1
        cache_size = call.key.shape[axis]
        prefix = None
        if (
            call.cache is not None
            and call.use_causal_mask
            and not self._overrides_hooks()
        ):
            prefix, call.use_causal_mask = visible_prefix(
                call.cache_update_index, call.query.shape[1], cache_size
            )
        if prefix is not None:
            keys = call.key[:, 0] if call.heads_first else call.key
            call.value_mask = head_masks.key_padding_mask(
                call.value_mask, call.key_mask, keys
            )
            call.key_mask = None
            if call.attention_mask is not None:
                call.attention_mask = self._check_attention_mask(
                    call.attention_mask, call.query, keys
                )
            call.key = take_prefix(call.key, prefix, axis)
            call.value = take_prefix(call.value, prefix, axis)
            call.value_mask = take_prefix(call.value_mask, prefix, -1)
            call.attention_mask = take_prefix(call.attention_mask, prefix, -1)
        # Only this class's own hook reads heads-first keys and values.
        if call.heads_first and (
            self._overrides_hooks() or self._flash_attention is True
        ):
            call.key = ops.transpose(call.key, (0, 2, 1, 3))
            call.value = ops.transpose(call.value, (0, 2, 1, 3))
            call.heads_first = False
        return prefix, cache_size
