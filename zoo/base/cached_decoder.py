"""Cached decoding through a stack of Transformer decoder blocks.

The zoo's Transformer families (translation and captioning) decode one
token at a time against two caches per decoder block: the self-attention
keys and values of the tokens so far (written at each step), and the
cross-attention keys and values of the encoder's output (projected once by
`encode`, only read by `next`). These two functions hold that loop once;
a family's `encode` and `next` add what is its own (embedding, final norm,
output projection).

The blocks are `keras_attention.layers.TransformerDecoderBlock`s (or any
layer with the same cached call and `compute_cross_attention_cache`).
"""

from keras import ops


def decoder_caches(decoder_blocks, memory, num_heads, max_length, dtype):
    """The decoding caches of `decoder_blocks` over the encoder's `memory`.

    Args:
        decoder_blocks: list of decoder blocks, in order.
        memory: tensor `(batch, S, hidden_dim)`, the encoder's output.
        num_heads: int. Attention heads per block (`hidden_dim` divides by it).
        max_length: int. Decoding steps (the self-attention cache size).
        dtype: the dtype of the self-attention caches (the model's compute
            dtype).

    Returns:
        A dict: `self_attention_cache`, per block a pair of zero tensors
        (keys, values) `(batch, num_heads, max_length, head_dim)`, and
        `cross_attention_cache`, per block the pair of projected memory keys
        and values `(batch, num_heads, S, head_dim)`: the blocks' split,
        heads-first caches, which a step neither re-stacks nor transposes.

    Example:
    >>> import numpy as np
    >>> from keras_attention.layers import TransformerDecoderBlock
    >>> blocks = [TransformerDecoderBlock(intermediate_dim=16, num_heads=2)]
    >>> memory = np.zeros((3, 5, 8), "float32")
    >>> _ = blocks[0](np.zeros((3, 1, 8), "float32"), memory)  # builds it
    >>> cache = decoder_caches(blocks, memory, 2, max_length=7, dtype="float32")
    >>> tuple(cache["self_attention_cache"][0][0].shape)
    (3, 2, 7, 4)
    >>> tuple(cache["cross_attention_cache"][0][1].shape)
    (3, 2, 5, 4)
    """
    batch = ops.shape(memory)[0]
    head_dim = memory.shape[-1] // num_heads
    shape = (batch, num_heads, max_length, head_dim)
    return {
        "self_attention_cache": tuple(
            (ops.zeros(shape, dtype),) * 2 for _ in decoder_blocks
        ),
        "cross_attention_cache": tuple(
            block.compute_cross_attention_cache(memory, split=True)
            for block in decoder_blocks
        ),
    }


def decoder_step(decoder_blocks, x, cache, index, encoder_padding_mask=None):
    """Runs one embedded token through the blocks against their caches.

    Args:
        decoder_blocks: list of decoder blocks, in order.
        x: tensor `(batch, 1, hidden_dim)`: the embedded token at position
            `index`.
        cache: the dict of `decoder_caches` (other keys are kept), as
            updated by earlier steps.
        index: int scalar. The token's position: its keys and values are
            written at `index` of the self-attention caches.
        encoder_padding_mask: optional bool `(batch, S)`, `True` for the
            memory positions to attend.

    Returns:
        `(x, attention, cache)`: the last block's output `(batch, 1,
        hidden_dim)`; its cross-attention over the memory averaged over the
        heads, float32 `(batch, S)`; and the cache with the new
        self-attention caches.

    Example:
    >>> import numpy as np
    >>> from keras_attention.layers import TransformerDecoderBlock
    >>> blocks = [TransformerDecoderBlock(intermediate_dim=16, num_heads=2)]
    >>> memory = np.ones((2, 5, 8), "float32")
    >>> _ = blocks[0](np.zeros((2, 1, 8), "float32"), memory)
    >>> cache = decoder_caches(blocks, memory, 2, max_length=3, dtype="float32")
    >>> x, attention, cache = decoder_step(
    ...     blocks, np.ones((2, 1, 8), "float32"), cache, 0)
    >>> tuple(x.shape), tuple(attention.shape)
    ((2, 1, 8), (2, 5))
    >>> bool(np.allclose(ops.convert_to_numpy(attention).sum(-1), 1.0))
    True
    """
    last = decoder_blocks[-1]
    self_caches = []
    for block, self_cache, cross_cache in zip(
        decoder_blocks, cache["self_attention_cache"], cache["cross_attention_cache"]
    ):
        # The memory argument is not read when the cross-attention cache is
        # given (it holds the projections): `x` stands in for it.
        outputs = block(
            x,
            x,
            encoder_padding_mask=encoder_padding_mask,
            self_attention_cache=self_cache,
            self_attention_cache_update_index=index,
            cross_attention_cache=cross_cache,
            return_attention_scores=block is last,
        )
        x, self_cache = outputs[0], outputs[1]
        self_caches.append(self_cache)
    weights = ops.cast(outputs[3][:, :, 0, :], "float32")
    cache = {**cache, "self_attention_cache": tuple(self_caches)}
    return x, ops.mean(weights, axis=1), cache


def resized_caches(cache, length):
    """The self-attention caches cut or zero-padded to `length` positions.

    What a search that attends over the positions written so far
    (`keras_attention.decoding.search.shrinking_loop`'s `resize`) needs:
    the positions kept hold what was written; the added ones are zeros that
    the causal mask hides until a step writes them.

    Args:
        cache: the dict of `decoder_caches` (other keys are kept).
        length: int scalar. Positions to hold.

    Example:
    >>> import numpy as np
    >>> cache = {"self_attention_cache": ((np.ones((1, 2, 3, 4)),) * 2,)}
    >>> keys, values = resized_caches(cache, 5)["self_attention_cache"][0]
    >>> tuple(keys.shape), float(ops.convert_to_numpy(keys)[0, 0, 3:].sum())
    ((1, 2, 5, 4), 0.0)
    >>> tuple(resized_caches(cache, 2)["self_attention_cache"][0][1].shape)
    (1, 2, 2, 4)
    """

    def resized(x):
        x = x[:, :, :length]
        missing = ops.maximum(length - ops.shape(x)[2], 0)
        return ops.pad(x, [[0, 0], [0, 0], [0, missing], [0, 0]])

    caches = tuple(
        (resized(keys), resized(values))
        for keys, values in cache["self_attention_cache"]
    )
    return {**cache, "self_attention_cache": caches}
