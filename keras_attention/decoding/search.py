"""Plumbing shared by the decoding searches (`GreedySearch`, `BeamSearch`).

Every search is called like a keras-hub sampler:
`search(next, prompt, cache=None, index=0, stop_token_ids=None)`, where

- `prompt` is an int tensor `(batch, max_length)` whose first `index`
  positions are given (e.g. a start token); the search fills the rest.
- `next(prompt, cache, index) -> (logits, hidden_states, cache)` returns the
  logits `(batch, vocab)` of the token at position `index` (so a model reads
  the token at `index - 1`, as in keras-hub's `CausalLM.generate_step`), any
  hidden states, and the updated `cache`.
- `cache` is `None` or any nested structure of tensors whose leading
  dimension is the batch (an RNN state, a key/value cache).
- `static_cache` (optional) is a nested structure of batch-first tensors
  that `next` reads and never changes (an encoder's output, its projected
  cross-attention keys and values). A beam search tiles it once and never
  reorders it between beams, as it must `cache`; `next` is then called as
  `next(prompt, cache, index, static_cache)`.
"""

import keras
from keras import ops, tree

PACKAGE = "keras_attention"


class Search:
    """Base class of the decoding searches: argument checks and helpers.

    Subclasses implement `__call__(next, prompt, cache=None, index=0,
    stop_token_ids=None, pad_token_id=0, return_scores=False,
    static_cache=None)`.
    """

    def get_config(self):
        return {}

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items())
        return f"{type(self).__name__}({args})"


def bind_static_cache(next, static_cache):
    """`next` as a three-argument step, `static_cache` passed as its fourth.

    >>> step = bind_static_cache(lambda p, c, i, s: (s, None, c), "encoder")
    >>> step(None, (), 1)[0]
    'encoder'
    """
    if static_cache is None:
        return next

    def step(prompt, cache, index):
        return next(prompt, cache, index, static_cache)

    return step


def prepare_prompt(prompt, index, pad_token_id):
    """Returns the prompt with every position from `index` on set to padding.

    Also checks a static `index` and returns it as an int32 scalar.
    """
    prompt = ops.convert_to_tensor(prompt)
    if len(prompt.shape) != 2:
        raise ValueError(
            "`prompt` must be an int tensor of shape (batch, max_length). "
            f"Received: prompt.shape={tuple(prompt.shape)}"
        )
    max_length = prompt.shape[1]
    if isinstance(index, int) and max_length is not None:
        if not 0 <= index < max_length:
            raise ValueError(
                "`index` (the number of given prompt positions) must be in "
                f"[0, max_length) so that something is left to generate. "
                f"Received: index={index}, max_length={max_length}"
            )
    index = ops.cast(index, "int32")
    positions = ops.arange(ops.shape(prompt)[1], dtype="int32")[None, :]
    pad = ops.cast(pad_token_id, prompt.dtype)
    return ops.where(positions < index, prompt, pad), index


def stop_token_mask(stop_token_ids, vocab_size):
    """Boolean `(vocab_size,)` vector, `True` at the stop tokens, or `None`."""
    if stop_token_ids is None:
        return None
    stop_token_ids = ops.convert_to_tensor(list(stop_token_ids), dtype="int32")
    vocab = ops.arange(vocab_size, dtype="int32")
    return ops.any(vocab[:, None] == stop_token_ids[None, :], axis=-1)


def token_log_probs(logits):
    """float32 log-softmax of `(..., vocab)` logits."""
    return ops.log_softmax(ops.cast(logits, "float32"), axis=-1)


def write_tokens(sequences, tokens, index):
    """Writes `tokens (...)` at position `index` of `sequences (..., L)`."""
    positions = ops.arange(ops.shape(sequences)[-1], dtype="int32")
    tokens = ops.cast(tokens, sequences.dtype)[..., None]
    return ops.where(positions == index, tokens, sequences)


def static_vocab_size(logits):
    """The vocabulary size, which must be known when tracing."""
    vocab_size = logits.shape[-1]
    if vocab_size is None:
        raise ValueError(
            "The logits returned by `next` need a static vocabulary "
            f"dimension. Received: logits.shape={tuple(logits.shape)}"
        )
    return vocab_size


def token_by_token(
    choose,
    next,
    prompt,
    cache,
    index,
    stop_token_ids,
    pad_token_id,
    static_cache,
    drop_finished=None,
    resize_cache=None,
):
    """The loop of the one-token-per-step searches (greedy, the samplers).

    Each step asks `next` for the logits of position `index`, lets
    `choose(log_probs, index) -> tokens (batch,)` pick a token per row from
    the float32 log-softmax, and writes it to the rows not yet finished.
    A row that writes a stop token is finished; the loop ends when every
    row is finished or the prompt is full. It is an `ops.while_loop` with
    static shapes (it runs inside `jax.jit` and `tf.function`), or with
    `drop_finished` a loop whose batch shrinks (see `shrinking_loop`).

    Args:
        choose: callable `(log_probs (batch, vocab), index) -> tokens`.
        next, prompt, cache, index, stop_token_ids, pad_token_id,
            static_cache, drop_finished, resize_cache: the search's call
            arguments (see `GreedySearch`).

    Returns:
        `(sequences (batch, max_length), scores (batch,))`: the completed
        prompt and the summed log-probabilities of the chosen tokens (the
        stop token included).
    """
    sequences, index = prepare_prompt(prompt, index, pad_token_id)
    max_length = ops.shape(sequences)[1]
    batch_size = ops.shape(sequences)[0]
    cache = () if cache is None else cache
    # The shrinking loop carries the static cache (it loses rows); the
    # static one closes over it, as a constant of the loop.
    shrinking = drop_finished is not None and stop_token_ids is not None
    static = () if static_cache is None else static_cache
    state = {
        "sequences": sequences,
        "cache": cache,
        "static": static if shrinking else (),
        "index": index,
        "scores": ops.zeros((batch_size,), dtype="float32"),
        "done": ops.zeros((batch_size,), dtype="bool"),
    }
    step = next if static_cache is not None else lambda p, c, i, s: next(p, c, i)

    def body(state):
        sequences, index, done = state["sequences"], state["index"], state["done"]
        logits, _, cache = step(
            sequences, state["cache"], index, state["static"] if shrinking else static
        )
        log_probs = token_log_probs(logits)
        is_stop = stop_token_mask(stop_token_ids, static_vocab_size(logits))
        tokens = ops.cast(choose(log_probs, index), "int32")
        token_log_prob = ops.take_along_axis(log_probs, tokens[:, None], axis=1)
        live = ops.logical_not(done)
        sequences = ops.where(
            live[:, None], write_tokens(sequences, tokens, index), sequences
        )
        scores = state["scores"] + ops.where(live, token_log_prob[:, 0], 0.0)
        if is_stop is not None:
            done = ops.logical_or(done, ops.take(is_stop, tokens))
        return {
            **state,
            "sequences": sequences,
            "cache": cache,
            "index": index + 1,
            "scores": scores,
            "done": done,
        }

    if not shrinking:
        state = ops.while_loop(
            lambda state: ops.logical_not(ops.all(state["done"])),
            body,
            loop_vars=state,
            maximum_iterations=max_length - index,
        )
        return state["sequences"], state["scores"]
    outputs = {"sequences": state["sequences"], "scores": state["scores"]}
    outputs = shrinking_loop(
        body,
        state,
        outputs,
        rows=lambda state: state["done"],
        every=drop_finished,
        maximum_iterations=max_length - index,
        resize=resize_cache,
    )
    return outputs["sequences"], outputs["scores"]


#: The entries of a search's loop state that hold one value per example
#: (the others, `sequences`, `cache` and `static`, hold one per row: a beam
#: search has `beam_width` rows per example).
PER_EXAMPLE = ("log_probs", "coverage", "fin_seqs", "fin_scores", "done")


def shrinking_loop(
    body, state, outputs, rows, every, maximum_iterations, width=1, resize=None
):
    """A search's loop that drops its finished examples, every `every` steps.

    What CTranslate2 does: a batch whose examples end at different steps
    stops paying for the ended ones. Every `every` steps the examples that
    `rows(state)` marks as finished leave the loop state (its `sequences`,
    `cache`, `static` cache and per-example entries, `PER_EXAMPLE`) and
    their outputs (the state's entries named by `outputs`) are written to
    `outputs` at their first place. A finished example's outputs must not
    change after it is finished, so that dropping it changes no result.

    TensorFlow only (`tf.while_loop` with shapes that vary along the batch
    axis: not under XLA); the loop ends when no example is left unfinished
    (`state["done"]`) or after `maximum_iterations` steps.

    Args:
        body: callable `state -> state`, one step.
        state: dict. The loop state: `sequences` `(batch * width, L)`,
            `cache`, `static`, `index` and per-example entries.
        outputs: dict of full-batch buffers `(batch, ...)`, by state key.
        rows: callable `state -> bool (batch,)`: the examples that may go.
        every: int >= 1. Steps between two drops.
        maximum_iterations: int scalar.
        width: int (or an int scalar tensor, a beam width given to an
            export). Rows per example in `sequences`, `cache`, `static`.
        resize: optional callable `(cache, index) -> cache`: the cache
            with room for the steps before `index` only (a key/value cache
            cut or padded to those positions), called every `every` steps
            for the next `every`, so that a step attends over the
            positions written so far, not the whole `max_length`.

    Returns:
        `outputs`, with every example's final entries, and the final
        `index`.
    """
    import tensorflow as tf

    batch = ops.shape(state["done"])[0]
    state = {**state, "example": ops.arange(batch, dtype="int32")}
    first = state["index"]

    def by_example(x):
        if isinstance(width, int) and width == 1:
            return x
        return ops.reshape(x, (-1, width) + tuple(ops.shape(x)[1:]))

    def written(outputs, state, which):
        examples = ops.expand_dims(ops.take(state["example"], which), 1)
        return {
            key: ops.scatter_update(
                buffer,
                examples,
                ops.take(by_example(state[key]), which, axis=0)
                if key not in PER_EXAMPLE
                else ops.take(state[key], which, axis=0),
            )
            for key, buffer in outputs.items()
        }

    def kept(state, which):
        rows = ops.reshape(which[:, None] * width + ops.arange(width)[None, :], (-1,))
        new = {}
        for key, value in state.items():
            if key == "index":
                new[key] = value
            elif key in PER_EXAMPLE or key == "example":
                new[key] = tree.map_structure(
                    lambda x: ops.take(x, which, axis=0), value
                )
            else:
                new[key] = tree.map_structure(
                    lambda x: ops.take(x, rows, axis=0), value
                )
        return new

    def loop_body(state, outputs):
        state = body(state)
        finished = rows(state)
        boundary = ops.equal((state["index"] - first) % every, 0)
        due = ops.logical_and(ops.any(finished), boundary)

        def drop():
            going = ops.cast(ops.nonzero(finished)[0], "int32")
            staying = ops.cast(ops.nonzero(ops.logical_not(finished))[0], "int32")
            return kept(state, staying), written(outputs, state, going)

        state, outputs = tf.cond(due, drop, lambda: (state, outputs))
        if resize is not None:
            state = tf.cond(
                boundary,
                lambda: {
                    **state,
                    "cache": resize(state["cache"], state["index"] + every),
                },
                lambda: state,
            )
        return state, outputs

    def relaxed(x, axes=1):
        shape = tf.TensorShape(x.shape)
        if shape.rank == 0:
            return shape
        axes = min(axes, shape.rank)
        return tf.TensorShape([None] * axes).concatenate(shape[axes:])

    invariants = tree.map_structure(relaxed, state)
    if resize is not None:
        state["cache"] = resize(state["cache"], first + every)
        invariants["cache"] = tree.map_structure(
            lambda x: relaxed(x, len(x.shape) - 1), state["cache"]
        )
    state, outputs = tf.while_loop(
        lambda state, outputs: ops.logical_not(ops.all(state["done"])),
        loop_body,
        (state, outputs),
        shape_invariants=(
            invariants,
            tree.map_structure(lambda x: tf.TensorShape(x.shape), outputs),
        ),
        maximum_iterations=maximum_iterations,
    )
    everyone = ops.arange(ops.shape(state["done"])[0], dtype="int32")
    return {**written(outputs, state, everyone), "index": state["index"]}


def register(cls):
    """Registers a search for `keras.saving` (no `custom_objects` needed)."""
    return keras.saving.register_keras_serializable(package=PACKAGE)(cls)
