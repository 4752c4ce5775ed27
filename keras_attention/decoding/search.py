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


def register(cls):
    """Registers a search for `keras.saving` (no `custom_objects` needed)."""
    return keras.saving.register_keras_serializable(package=PACKAGE)(cls)
