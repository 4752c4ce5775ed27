"""Greedy search: the most probable next token at every step."""

from keras import ops

from keras_attention.decoding import search


@search.register
class GreedySearch(search.Search):
    """Greedy decoding: appends the arg-max token until a stop token.

    At each position the token with the highest logit is chosen. A sequence
    that emits one of `stop_token_ids` is finished: its later positions are
    left as `pad_token_id`, and the search ends when every sequence is
    finished or the prompt is full. The sequences are exactly those of
    `BeamSearch(beam_width=1)` (whatever its penalties; its scores equal
    these log-probabilities when both penalties are 0), at the cost of one
    arg-max per step.

    `GreedySearch` runs inside `tf.function(jit_compile=True)` and `jax.jit`
    (it is an `ops.while_loop` with static shapes).

    Call arguments:
        next: callable `next(prompt, cache, index) -> (logits, hidden_states,
            cache)` giving the `(batch, vocab)` logits of position `index`
            (keras-hub's sampler convention: a model reads the token at
            `index - 1`). `hidden_states` is ignored.
        prompt: int tensor `(batch, max_length)`. Positions before `index`
            are given; the search fills positions `index` to `max_length - 1`.
        cache: optional nested structure of tensors with a leading batch
            dimension, passed to and returned by `next`. Defaults to `None`.
        index: int. Number of given prompt positions (e.g. 1 for a start
            token). Defaults to `0`.
        stop_token_ids: optional sequence of ints. Tokens that end a
            sequence. Defaults to `None` (generate up to `max_length`).
        pad_token_id: int. Written after a sequence's stop token. Defaults
            to `0`.
        return_scores: bool. Also return the log-probability of each
            sequence (summed over the generated tokens, the stop token
            included). Defaults to `False`.
        static_cache: optional nested structure of batch-first tensors that
            `next` reads but never changes; when given, `next` is called as
            `next(prompt, cache, index, static_cache)`. Defaults to `None`.
        drop_finished: optional int >= 1. On TensorFlow outside XLA, drop
            the finished rows from the loop every `drop_finished` steps, so
            that the rest step without them (`search.shrinking_loop`; same
            sequences and scores). Defaults to `None` (a loop with static
            shapes).
        resize_cache: optional callable `(cache, index) -> cache`, with
            `drop_finished`: the cache cut or padded to room for the steps
            before `index`, every `drop_finished` steps, so that a step
            attends over the positions written so far (`shrinking_loop`'s
            `resize`). Defaults to `None`.

    Returns:
        The completed prompt `(batch, max_length)`, or `(sequences, scores)`
        with `scores` of shape `(batch,)` when `return_scores=True`.

    Example:
    >>> import numpy as np
    >>> from keras import ops
    >>> table = np.log(np.array(
    ...     [[0.1, 0.6, 0.3], [0.2, 0.1, 0.7], [0.1, 0.1, 0.8]], "float32"))
    >>> def next(prompt, cache, index):
    ...     last = ops.take(prompt, index - 1, axis=1)
    ...     return ops.take(table, last, axis=0), None, cache
    >>> prompt = np.zeros((1, 4), "int32")
    >>> ops.convert_to_numpy(GreedySearch()(next, prompt, index=1,
    ...     stop_token_ids=[2]))
    array([[0, 1, 2, 0]], dtype=int32)
    """

    def __call__(
        self,
        next,
        prompt,
        cache=None,
        index=0,
        stop_token_ids=None,
        pad_token_id=0,
        return_scores=False,
        static_cache=None,
        drop_finished=None,
        resize_cache=None,
    ):
        sequences, scores = search.token_by_token(
            lambda log_probs, index: ops.argmax(log_probs, axis=-1),
            next,
            prompt,
            cache,
            index,
            stop_token_ids,
            pad_token_id,
            static_cache,
            drop_finished,
            resize_cache,
        )
        if return_scores:
            return sequences, scores
        return sequences
