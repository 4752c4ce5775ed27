"""Chunked attention with a `score_fn` or a score hook: rematerialised chunks.

FlashAttention's custom gradient (`chunked._flash`) knows the derivative of
a scaled dot product only; a score function or a hook (with its weights)
is differentiated by autodiff instead, one query chunk at a time, each
chunk's forward recomputed in the backward pass (`keras.remat`).
"""

import keras
from keras import ops

from keras_attention.layers.chunked_blocks import NEG, forward, normalised
from keras_attention.layers.dispatch import traced


def rematerialised(plan, query, key, value):
    """Any `score_fn` or `score_mod`: one rematerialised forward per query chunk.

    Autodiff runs through the key loop of one query chunk at a time (its
    residuals, `O(cq Tv)`, live only while that chunk's gradient is
    computed), and through `score_fn`'s and the hook's weights. Run op by
    op (TensorFlow eagerly, PyTorch), the chunks are Python loops, each
    block freed once visited; traced (a `tf.function`, `jax.jit`), they are
    `ops.map` loops (`_mapped`), so the compiled program holds one block
    at a time instead of every block of an unrolled graph.
    """
    score_fn = plan.score_fn
    if isinstance(score_fn, keras.layers.Layer) and not score_fn.built:
        score_fn.build(
            (None, plan.query_chunk, plan.depth), (None, plan.key_chunk, plan.depth)
        )
    if traced(query):
        return _mapped(plan, query, key, value)
    chunks = []
    for i in range(plan.num_query_chunks):
        first_row = i * plan.query_chunk

        def attend(q_chunk, key, value, first_row=first_row):
            context, _ = forward(
                plan, q_chunk, key, value, first_row=first_row, static_keys=True
            )
            return ops.cast(context, plan.value_dtype)

        q_chunk = plan.rows(query, first_row, plan.query_chunk)
        chunks.append(keras.remat(attend)(q_chunk, key, value))
    return ops.concatenate(chunks, axis=2) if len(chunks) > 1 else chunks[0]


def _mapped(plan, query, key, value):
    """`rematerialised` as loops that autodiff can go through when traced.

    `ops.map` over the query chunks (each rematerialised) and, inside, over
    the key chunks: each key block gives its unnormalised context, row
    maximum and row sum, and the blocks are combined as a log-sum-exp, so
    the result is the online softmax's. `ops.map` is a bounded loop on
    every backend (TensorFlow's `map_fn` sets `maximum_iterations`, which
    XLA needs to differentiate a loop; JAX's `lax.map` is a scan), unlike
    `ops.fori_loop`. A loop of traced length is not differentiable, so
    every key block is a step, and one that the causal mask or the window
    hides entirely is skipped by an `ops.cond`.
    """
    batch = ops.shape(query)[0]
    q_size, k_size = plan.query_chunk, plan.key_chunk
    keys = _split_rows(key, k_size, plan.num_key_chunks)
    values = _split_rows(value, k_size, plan.num_key_chunks)
    key_starts = ops.arange(plan.num_key_chunks, dtype="int32") * k_size

    def attend(q_chunk, row, keys, values):
        def hidden():
            """A block the masks hide: no context, no weight."""
            rows = (batch, plan.heads, q_size)
            return (
                ops.zeros((*rows, plan.value_depth), "float32"),
                ops.full((*rows, 1), NEG, "float32"),
                ops.zeros((*rows, 1), "float32"),
            )

        def key_block(inputs):
            k_chunk, v_chunk, k_start = inputs
            visible = plan.visible(row, k_start)
            if visible is None:
                return block(k_chunk, v_chunk, k_start)
            return ops.cond(visible, lambda: block(k_chunk, v_chunk, k_start), hidden)

        def block(k_chunk, v_chunk, k_start):
            scores, mask = plan.block(q_chunk, k_chunk, row, k_start)
            if mask is not None:
                scores = ops.where(mask, scores, NEG)
            maximum = ops.max(scores, -1, keepdims=True)
            weights = ops.exp(scores - maximum)
            if mask is not None:
                weights = ops.where(mask, weights, ops.zeros_like(weights))
            total = ops.sum(weights, -1, keepdims=True)
            weights = plan.dropout(weights, plan.keep(batch, row, k_start))
            context = ops.matmul(ops.cast(weights, v_chunk.dtype), v_chunk)
            return ops.cast(context, "float32"), maximum, total

        contexts, maxima, totals = ops.map(key_block, (keys, values, key_starts))
        maximum = ops.max(maxima, axis=0)
        correction = ops.exp(maxima - maximum)
        total = ops.sum(totals * correction, axis=0)
        context = ops.sum(contexts * correction, axis=0)
        context, _, _ = normalised(context, total)
        return ops.cast(context, plan.value_dtype)

    # The weights of the score and of the hook go into the rematerialised
    # function as arguments (read through a `StatelessScope`), not as
    # captured variables, which TensorFlow's `recompute_grad` cannot
    # differentiate inside a loop.
    variables = _variables(plan)

    def stateless_attend(q_chunk, row, keys, values, *state):
        with keras.StatelessScope(state_mapping=list(zip(variables, state))):
            return attend(q_chunk, row, keys, values)

    remat_attend = keras.remat(stateless_attend)
    state = [variable.value for variable in variables]

    def query_block(inputs):
        q_chunk, row = inputs
        return remat_attend(q_chunk, row, keys, values, *state)

    query_starts = ops.arange(plan.num_query_chunks, dtype="int32") * q_size
    queries = _split_rows(query, q_size, plan.num_query_chunks)
    contexts = ops.map(query_block, (queries, query_starts))
    # (chunks, B, heads, cq, Dv) -> (B, heads, Tq, Dv)
    contexts = ops.transpose(contexts, (1, 2, 0, 3, 4))
    shape = ops.shape(contexts)
    return ops.reshape(
        contexts, (shape[0], shape[1], plan.num_query_chunks * q_size, shape[4])
    )


def _variables(plan):
    """The variables that `plan`'s score and hook read."""
    layers = (plan.score_fn, getattr(plan.score_mod, "hook", None))
    return [
        variable
        for layer in layers
        if isinstance(layer, keras.layers.Layer)
        for variable in layer.variables
    ]


def _split_rows(x, size, count):
    """`(B, heads, count * size, D)` -> `(count, B, heads, size, D)`."""
    shape = ops.shape(x)
    x = ops.reshape(x, (shape[0], shape[1], count, size, shape[3]))
    return ops.transpose(x, (2, 0, 1, 3, 4))
