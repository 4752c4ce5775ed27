"""Score hooks: biases, caps and masks of attention scores from positions.

A hook is a small registered Keras layer (so a saved model reloads without
`custom_objects`, and a learned hook saves its weights) that the attention
layers take as `score_mod=`. It sees each block of raw scores with the
positions of its queries and keys and the indices of its heads, as
PyTorch's FlexAttention `score_mod(score, b, h, q_idx, kv_idx)` does, and
may add a boolean `mask_mod` of the same positions:

- `call(scores, query_positions, key_positions, head, segment_ids=None)`
  returns the modified float32 scores, of the shape of `scores`;
- `mask_mod(query_positions, key_positions, head, segment_ids=None)`
  returns a boolean mask broadcastable to `scores` (`True` = attend), or
  None.

`scores` is `(B, H, ..., Tq', Tk')`: a whole score matrix on the explicit
path, one block on the chunked path, `(B, H, n, w, span)` windows on the
windowed path. `query_positions` (int32, `(..., Tq', 1)`) and
`key_positions` (`(..., 1, Tk')`) broadcast against its trailing axes,
and `head` (int32, `(H, 1, ..., 1)`) against `scores.shape[1:]`; so a
hook computes its bias per block and never holds a `(T, T)` tensor, and
the chunked and windowed paths keep their `O(T)` memory. In a decoding
step the query positions are offset by the cache index. Positions past a
sequence's end (a padded block) may reach a hook; they are masked.

The attention layers copy a hook from its config and build it with the
number of query heads (`build((None, num_heads, None, None))`). A list or
tuple of hooks (`score_mod=[ALiBi(), SoftCap(50.0)]`) becomes `ScoreMods`:
the hooks applied in order, their masks combined with AND.
"""

import math

import keras
import numpy as np
from keras import ops

PACKAGE = "keras_attention"


@keras.saving.register_keras_serializable(package=PACKAGE)
class ScoreMod(keras.layers.Layer):
    """The identity hook: the base of every score hook.

    A subclass overrides `call` (a bias or any function of the scores) and
    or `mask_mod` (positions to hide). Hooks compute in float32 (the
    scores' dtype) whatever the global policy.

    Args:
        **kwargs: base layer arguments such as `name`.

    Call arguments:
        scores: float32 `(B, H, ..., Tq', Tk')`.
        query_positions: int32, broadcastable, `(..., Tq', 1)`.
        key_positions: int32, broadcastable, `(..., 1, Tk')`.
        head: int32 `(H, 1, ..., 1)`: the query heads of the block.
        segment_ids: optional int `(B, T)`, the attention call's
            `segment_ids`, indexed by position.

    Returns:
        The modified scores, float32, of the shape of `scores`.
    """

    def __init__(self, **kwargs):
        kwargs.setdefault("dtype", "float32")
        super().__init__(**kwargs)
        self.num_heads = None

    def build(self, scores_shape):
        self.num_heads = scores_shape[1]

    def call(self, scores, query_positions, key_positions, head, segment_ids=None):
        return scores

    def mask_mod(self, query_positions, key_positions, head, segment_ids=None):
        """A boolean mask broadcastable to the block's scores, or None."""
        return None

    def compute_output_spec(self, scores, *args, **kwargs):
        return keras.KerasTensor(scores.shape, dtype="float32")


@keras.saving.register_keras_serializable(package=PACKAGE)
class ALiBi(ScoreMod):
    """Attention with linear biases: `score - m_h |i - j|`.

    Head `h` of `H` gets the slope `m_h` of Press et al.: the geometric
    sequence `2^(-8 (h + 1) / H)` for a power of two, interleaved with the
    next power's for other `H`. With a causal mask this is the paper's
    `-m_h (i - j)`; without one the bias is symmetric.

    Example:
    >>> import numpy as np
    >>> from keras_attention.layers import MultiHeadAttention
    >>> layer = MultiHeadAttention(num_heads=2, key_dim=4, score_mod=ALiBi())
    >>> x = np.ones((1, 5, 8), "float32")
    >>> tuple(layer(x, x, use_causal_mask=True).shape)
    (1, 5, 8)
    >>> [round(float(s), 4) for s in alibi_slopes(2)]
    [0.0625, 0.0039]

    Reference:
        Press et al., 2022, "Train Short, Test Long: Attention with Linear
        Biases Enables Input Length Extrapolation".
    """

    def call(self, scores, query_positions, key_positions, head, segment_ids=None):
        slopes = ops.take(ops.convert_to_tensor(alibi_slopes(self.num_heads)), head)
        distance = ops.abs(ops.subtract(query_positions, key_positions))
        return scores - slopes * ops.cast(distance, "float32")


def alibi_slopes(num_heads):
    """ALiBi's slope of each of `num_heads` heads (float32 NumPy array)."""

    def power_of_two(n):
        start = 2.0 ** (-8.0 / n)
        return [start ** (i + 1) for i in range(n)]

    closest = 2 ** int(math.floor(math.log2(num_heads)))
    slopes = power_of_two(closest)
    if closest < num_heads:
        slopes += power_of_two(2 * closest)[0::2][: num_heads - closest]
    return np.asarray(slopes, "float32")


@keras.saving.register_keras_serializable(package=PACKAGE)
class RelativePositionBias(ScoreMod):
    """T5's learned relative position bias: one scalar per head and bucket.

    The key-minus-query distance falls in one of `num_buckets` buckets:
    exact below `num_buckets / 4` (half of them for each direction when
    `bidirectional`), logarithmic up to `max_distance`, the last bucket
    beyond. The bias table `(num_buckets, num_heads)` is the hook's weight.

    Args:
        num_buckets: int. Defaults to `32`.
        max_distance: int. Distance of the last bucket. Defaults to `128`.
        bidirectional: bool. Separate buckets for keys after the query
            (an encoder); `False` puts them all in bucket 0 (a decoder).
            Defaults to `True`.
        embeddings_initializer: the table's initializer. Defaults to
            `"zeros"`.

    Example:
    >>> bias = RelativePositionBias(num_buckets=8, max_distance=16)
    >>> buckets = relative_position_bucket(np.arange(-3, 4), 8, 16, True)
    >>> keras.ops.convert_to_numpy(buckets).tolist()
    [2, 2, 1, 0, 5, 6, 6]

    Reference:
        Raffel et al., 2020, "Exploring the Limits of Transfer Learning
        with a Unified Text-to-Text Transformer", section 2.1.
    """

    def __init__(
        self,
        num_buckets=32,
        max_distance=128,
        bidirectional=True,
        embeddings_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_buckets = num_buckets
        self.max_distance = max_distance
        self.bidirectional = bidirectional
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)

    def build(self, scores_shape):
        super().build(scores_shape)
        self.embeddings = self.add_weight(
            name="embeddings",
            shape=(self.num_buckets, self.num_heads),
            initializer=self.embeddings_initializer,
        )

    def call(self, scores, query_positions, key_positions, head, segment_ids=None):
        bucket = relative_position_bucket(
            ops.subtract(key_positions, query_positions),
            self.num_buckets,
            self.max_distance,
            self.bidirectional,
        )
        table = ops.reshape(ops.cast(self.embeddings, "float32"), (-1,))
        return scores + ops.take(table, bucket * self.num_heads + head)

    def get_config(self):
        config = super().get_config()
        config.update(
            num_buckets=self.num_buckets,
            max_distance=self.max_distance,
            bidirectional=self.bidirectional,
            embeddings_initializer=keras.initializers.serialize(
                self.embeddings_initializer
            ),
        )
        return config


def relative_position_bucket(
    relative_position, num_buckets, max_distance, bidirectional
):
    """T5's bucket of each `key - query` distance (int32, of its shape)."""
    relative_position = ops.convert_to_tensor(relative_position, "int32")
    bucket = ops.zeros_like(relative_position)
    if bidirectional:
        num_buckets //= 2
        bucket = ops.where(relative_position > 0, num_buckets, 0)
        distance = ops.abs(relative_position)
    else:
        distance = ops.maximum(-relative_position, 0)
    max_exact = num_buckets // 2
    scaled = ops.log(ops.cast(ops.maximum(distance, 1), "float32") / max_exact)
    scaled = scaled / math.log(max_distance / max_exact) * (num_buckets - max_exact)
    large = ops.minimum(max_exact + ops.cast(scaled, "int32"), num_buckets - 1)
    return bucket + ops.where(distance < max_exact, distance, large)


@keras.saving.register_keras_serializable(package=PACKAGE)
class SoftCap(ScoreMod):
    """Logit soft-capping: `cap * tanh(score / cap)` (Gemma 2).

    Args:
        cap: positive float. The bound of the scores.

    Example:
    >>> import numpy as np
    >>> cap = SoftCap(2.0)
    >>> scores = np.array([[[[100.0, -1.0]]]], "float32")
    >>> zero = np.zeros((1, 1), "int32")  # positions and heads: unused here
    >>> capped = keras.ops.convert_to_numpy(cap(scores, zero, zero, zero))
    >>> [round(float(s), 3) for s in capped.ravel()]
    [2.0, -0.924]

    Reference:
        Gemma Team, 2024, "Gemma 2: Improving Open Language Models at a
        Practical Size", section 2.
    """

    def __init__(self, cap, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(cap, (int, float)) or isinstance(cap, bool) or cap <= 0:
            raise ValueError(f"`cap` must be a positive float. Received: cap={cap!r}")
        self.cap = float(cap)

    def call(self, scores, query_positions, key_positions, head, segment_ids=None):
        return self.cap * ops.tanh(scores / self.cap)

    def get_config(self):
        return {**super().get_config(), "cap": self.cap}


@keras.saving.register_keras_serializable(package=PACKAGE)
class SegmentMask(ScoreMod):
    """A document mask: a query sees only the keys of its own segment.

    The attention call's `segment_ids` `(B, T)` give each position its
    segment (several documents packed in one row); with a cache they cover
    its `max_length` positions. Positions past the end read the last id.

    Example:
    >>> import numpy as np
    >>> from keras_attention.layers import MultiHeadAttention
    >>> layer = MultiHeadAttention(num_heads=2, key_dim=4, score_mod=SegmentMask())
    >>> x = np.ones((1, 4, 8), "float32")
    >>> ids = np.array([[0, 0, 1, 1]])
    >>> _, w = layer(x, x, segment_ids=ids, return_attention_scores=True)
    >>> keras.ops.convert_to_numpy(w)[0, 0] > 0
    array([[ True,  True, False, False],
           [ True,  True, False, False],
           [False, False,  True,  True],
           [False, False,  True,  True]])
    """

    def mask_mod(self, query_positions, key_positions, head, segment_ids=None):
        if segment_ids is None:
            raise ValueError(
                "`SegmentMask` reads the attention call's `segment_ids` (B, T). "
                "Received: segment_ids=None"
            )
        segment_ids = ops.convert_to_tensor(segment_ids)
        last = ops.shape(segment_ids)[1] - 1

        def segments(positions):
            index = ops.clip(positions, 0, last)
            ids = ops.take(segment_ids, ops.reshape(index, (-1,)), axis=1)
            ids = ops.reshape(ids, (ops.shape(ids)[0], *ops.shape(index)))
            return ops.expand_dims(ids, 1)  # the heads axis

        return ops.equal(segments(query_positions), segments(key_positions))


@keras.saving.register_keras_serializable(package=PACKAGE)
class ScoreMods(ScoreMod):
    """Several score hooks as one: applied in order, masks ANDed.

    What a layer makes of `score_mod=[...]`. Each hook's `call` takes the
    scores the one before it returned (`[ALiBi(), SoftCap(50.0)]` caps the
    biased scores); a position is attended only where every hook's
    `mask_mod` keeps it.

    Args:
        score_mods: list of `ScoreMod` (or their configs), at least one.
        **kwargs: base layer arguments such as `name`.

    Example:
    >>> import numpy as np
    >>> from keras_attention.layers import MultiHeadAttention
    >>> hooks = [ALiBi(), SoftCap(50.0), SegmentMask()]
    >>> layer = MultiHeadAttention(num_heads=2, key_dim=4, score_mod=hooks)
    >>> x = np.ones((1, 4, 8), "float32")
    >>> ids = np.array([[0, 0, 1, 1]])
    >>> tuple(layer(x, x, segment_ids=ids).shape)
    (1, 4, 8)
    >>> [type(hook).__name__ for hook in layer._score_mod.score_mods]
    ['ALiBi', 'SoftCap', 'SegmentMask']
    """

    def __init__(self, score_mods, **kwargs):
        super().__init__(**kwargs)
        hooks = [get(hook) for hook in score_mods]
        if not hooks or None in hooks:
            raise ValueError(
                "`score_mods` must be a non-empty list of `ScoreMod`s. "
                f"Received: score_mods={score_mods!r}"
            )
        self.score_mods = hooks

    def build(self, scores_shape):
        super().build(scores_shape)
        for hook in self.score_mods:
            hook.build(scores_shape)

    def call(self, scores, query_positions, key_positions, head, segment_ids=None):
        for hook in self.score_mods:
            scores = hook(
                scores, query_positions, key_positions, head, segment_ids=segment_ids
            )
        return scores

    def mask_mod(self, query_positions, key_positions, head, segment_ids=None):
        mask = None
        for hook in self.score_mods:
            more = hook.mask_mod(
                query_positions, key_positions, head, segment_ids=segment_ids
            )
            if more is not None:
                mask = more if mask is None else ops.logical_and(mask, more)
        return mask

    def get_config(self):
        return {
            **super().get_config(),
            "score_mods": [serialize(hook) for hook in self.score_mods],
        }


def get(identifier):
    """A score hook from a `ScoreMod`, its serialized config, a list or tuple
    of them (`ScoreMods`), or None."""
    if identifier is None or isinstance(identifier, ScoreMod):
        return identifier
    if isinstance(identifier, (list, tuple)):
        return ScoreMods(identifier)
    if isinstance(identifier, dict):
        hook = keras.saving.deserialize_keras_object(identifier)
        if isinstance(hook, ScoreMod):
            return hook
    raise ValueError(
        "`score_mod` must be a `keras_attention.layers.ScoreMod` (e.g. "
        "`ALiBi()`, `SoftCap(50.0)`), its serialized config, a list of them "
        f"or None. Received: score_mod={identifier!r}"
    )


def built_copy(config, num_heads):
    """A layer's own hook from its config (or None), named `score_mod`, built."""
    if config is None:
        return None
    hook = get({**config, "config": {**config["config"], "name": "score_mod"}})
    hook.build((None, num_heads, None, None))
    return hook


def serialize(hook):
    """A hook's config (None stays None): what a layer's config stores."""
    return None if hook is None else keras.saving.serialize_keras_object(hook)


def bind(hook, heads, segment_ids=None, query_offset=0):
    """A layer's hook bound to one call (`Bound`), or None without a hook.

    `segment_ids` without a hook to read them raise a `ValueError`.
    """
    if hook is None:
        if segment_ids is not None:
            raise ValueError(
                "`segment_ids` are read by a `score_mod` such as `SegmentMask()`; "
                "this layer has none. Received: score_mod=None"
            )
        return None
    return Bound(hook, heads, segment_ids, query_offset)


class Bound:
    """A layer's hook bound to one call: `(scores, q, k) -> (scores, mask)`.

    The attention layers give the chunked and windowed functions (which know
    positions but not heads) this callable: it holds the call's query heads
    (`heads`, int32 `(H,)`), `segment_ids` and the offset of the first
    query's position.
    """

    def __init__(self, hook, heads, segment_ids=None, query_offset=0):
        self.hook = hook
        self.heads = heads
        self.segment_ids = segment_ids
        self.query_offset = query_offset

    def with_heads(self, heads):
        """The same hook on other query heads (a group of grouped heads)."""
        return Bound(self.hook, heads, self.segment_ids, self.query_offset)

    def __call__(self, scores, query_positions, key_positions):
        """`(scores, mask or None)`; positions are relative to the first query."""
        query_positions = ops.add(
            ops.cast(query_positions, "int32"), ops.cast(self.query_offset, "int32")
        )
        key_positions = ops.cast(key_positions, "int32")
        head = ops.reshape(
            ops.cast(self.heads, "int32"), (-1,) + (1,) * (len(scores.shape) - 2)
        )
        scores = self.hook(
            ops.cast(scores, "float32"),
            query_positions,
            key_positions,
            head,
            segment_ids=self.segment_ids,
        )
        mask = self.hook.mask_mod(
            query_positions, key_positions, head, segment_ids=self.segment_ids
        )
        return scores, mask


def modify_scores(raw, attention_mask, score_mod):
    """`(raw, mask)` with the call's score hook applied to a whole score matrix.

    `raw` is `(B, heads, Tq, Tv)`; the hook's mask is ANDed with
    `attention_mask` (of rank 2 to 4, a heads axis added as in Keras).
    """
    if score_mod is None:
        return raw, attention_mask
    rows = ops.arange(ops.shape(raw)[2], dtype="int32")[:, None]
    cols = ops.arange(ops.shape(raw)[3], dtype="int32")[None, :]
    raw, extra = score_mod(raw, rows, cols)
    if extra is None:
        return raw, attention_mask
    if attention_mask is None:
        return raw, extra
    attention_mask = ops.cast(attention_mask, "bool")
    while len(attention_mask.shape) < 4:
        attention_mask = ops.expand_dims(attention_mask, -3)
    return raw, ops.logical_and(attention_mask, extra)
