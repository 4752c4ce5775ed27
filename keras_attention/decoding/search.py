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
from keras import ops

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
    choose, next, prompt, cache, index, stop_token_ids, pad_token_id, static_cache
):
    """The loop of the one-token-per-step searches (greedy, the samplers).

    Each step asks `next` for the logits of position `index`, lets
    `choose(log_probs, index) -> tokens (batch,)` pick a token per row from
    the float32 log-softmax, and writes it to the rows not yet finished.
    A row that writes a stop token is finished; the loop ends when every
    row is finished or the prompt is full. It is an `ops.while_loop` with
    static shapes (it runs inside `jax.jit` and `tf.function`).

    Args:
        choose: callable `(log_probs (batch, vocab), index) -> tokens`.
        next, prompt, cache, index, stop_token_ids, pad_token_id,
            static_cache: the search's call arguments (see
            `GreedySearch`).

    Returns:
        `(sequences (batch, max_length), scores (batch,))`: the completed
        prompt and the summed log-probabilities of the chosen tokens (the
        stop token included).
    """
    next = bind_static_cache(next, static_cache)
    sequences, index = prepare_prompt(prompt, index, pad_token_id)
    max_length = ops.shape(sequences)[1]
    batch_size = ops.shape(sequences)[0]
    cache = () if cache is None else cache
    scores = ops.zeros((batch_size,), dtype="float32")
    done = ops.zeros((batch_size,), dtype="bool")

    def cond(sequences, cache, index, scores, done):
        return ops.logical_not(ops.all(done))

    def body(sequences, cache, index, scores, done):
        logits, _, cache = next(sequences, cache, index)
        log_probs = token_log_probs(logits)
        is_stop = stop_token_mask(stop_token_ids, static_vocab_size(logits))
        tokens = ops.cast(choose(log_probs, index), "int32")
        token_log_prob = ops.take_along_axis(log_probs, tokens[:, None], axis=1)
        live = ops.logical_not(done)
        sequences = ops.where(
            live[:, None], write_tokens(sequences, tokens, index), sequences
        )
        scores = scores + ops.where(live, token_log_prob[:, 0], 0.0)
        if is_stop is not None:
            done = ops.logical_or(done, ops.take(is_stop, tokens))
        return sequences, cache, index + 1, scores, done

    sequences, _, _, scores, _ = ops.while_loop(
        cond,
        body,
        loop_vars=(sequences, cache, index, scores, done),
        maximum_iterations=max_length - index,
    )
    return sequences, scores


def register(cls):
    """Registers a search for `keras.saving` (no `custom_objects` needed)."""
    return keras.saving.register_keras_serializable(package=PACKAGE)(cls)
