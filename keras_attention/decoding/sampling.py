"""Sampling decoders: random, top-k and top-p (nucleus) draws, seeded.

The samplers take keras-hub's names and constructor arguments
(`RandomSampler`, `TopKSampler`, `TopPSampler`) and this package's call
contract (`next(prompt, cache, index)`, see `search`): they run the loop of
`GreedySearch` and draw each token instead of taking the arg-max.

How the seed flows: the noise of a draw is a pure function of
`(seed, step index, row, candidate)`: a counter-based integer hash in
`keras.ops` (31-bit values in int32, so the same on TensorFlow, JAX and
PyTorch, whose unsigned integer ops differ) turned into uniform floats and
then Gumbel noise. A token is the arg-max of the tempered, filtered
log-probabilities plus that noise (the Gumbel-max trick: an exact draw
from their softmax). No random state is read or written, so a seed gives
the same draws eagerly, inside `jax.jit` and inside `tf.function`, and each
step draws fresh noise because the step index is hashed in. The seed may
be a scalar int tensor given when the search is called (an input of a
compiled function), so one compilation serves every seed.
"""

import random

from keras import ops

from keras_attention.arguments import float_argument, int_argument
from keras_attention.decoding import search

#: Values of the hash are kept below 2**31 (non-negative int32).
HASH_MASK = 0x7FFFFFFF

#: The multiplier of the hash's mixing rounds (an odd constant of
#: Thomas Mueller's integer hash).
HASH_MULTIPLIER = 0x45D9F3B


def _int32(x):
    return ops.cast(x, "int32")


def _mix(x):
    """A bijective mixing of 31-bit non-negative int32 values."""
    multiplier = _int32(HASH_MULTIPLIER)
    mask = _int32(HASH_MASK)
    x = ops.bitwise_and(x, mask)
    for _ in range(2):
        x = ops.bitwise_xor(x, ops.right_shift(x, _int32(16)))
        x = ops.bitwise_and(ops.multiply(x, multiplier), mask)
    return ops.bitwise_xor(x, ops.right_shift(x, _int32(16)))


def uniform_noise(seed, step, shape):
    """Uniform floats in `(0, 1)` of `shape` `(rows, n)`, hashed statelessly.

    A pure function of `(seed, step, row, column)`: the same on every call
    and backend, different for each step (and seed).

    Args:
        seed: int or scalar int tensor.
        step: int or scalar int tensor.
        shape: `(rows, n)`, ints or scalar int tensors.

    Returns:
        float32 tensor `shape`, multiples of `2**-24` offset by half of one.

    Example:
    >>> a = ops.convert_to_numpy(uniform_noise(7, 1, (2, 3)))
    >>> b = ops.convert_to_numpy(uniform_noise(7, 2, (2, 3)))
    >>> bool((a == ops.convert_to_numpy(uniform_noise(7, 1, (2, 3)))).all())
    True
    >>> bool((a != b).all()), bool(((a > 0) & (a < 1)).all())
    (True, True)
    """
    key = _mix(ops.add(_mix(_int32(seed)), _int32(step)))
    rows, n = shape
    counter = ops.add(
        _int32(ops.arange(rows))[:, None] * _int32(n), _int32(ops.arange(n))[None, :]
    )
    bits = _mix(ops.bitwise_xor(_mix(ops.add(counter, key)), key))
    return (ops.cast(ops.right_shift(bits, _int32(7)), "float32") + 0.5) / 2.0**24


@search.register
class RandomSampler(search.Search):
    """Random sampling: each token drawn from the model's tempered softmax.

    The loop is `GreedySearch`'s (stop tokens, padding, `static_cache`,
    compiled once per shape); at each step the token is drawn from
    `softmax(log_probs / temperature)`, restricted by the subclasses
    (`TopKSampler`, `TopPSampler`) to a candidate set. The draws are a pure
    function of the seed and the step (see the module): a seed reproduces
    them on a backend, eagerly or compiled.

    Args:
        seed: optional int. The seed of the draws; `None` draws a new seed
            at each call (a compiled caller passes `seed` when calling
            instead, see below). Defaults to `None`.
        temperature: float > 0. Divides the log-probabilities: below 1
            sharpens the distribution (towards greedy), above 1 flattens
            it. Defaults to `1.0`.

    Call arguments:
        As `GreedySearch`'s, and `seed`: optional int or scalar int tensor
        that replaces the constructor's seed for this call (so that a
        compiled function takes the seed as an input). `return_scores`
        gives the model's log-probability of each sequence (at temperature
        1, whatever the filter).

    Example:
    >>> import numpy as np
    >>> from keras import ops
    >>> table = np.log(np.array(
    ...     [[0.1, 0.6, 0.3], [0.2, 0.1, 0.7], [0.1, 0.1, 0.8]], "float32"))
    >>> def next(prompt, cache, index):
    ...     last = ops.take(prompt, index - 1, axis=1)
    ...     return ops.take(table, last, axis=0), None, cache
    >>> prompt = np.zeros((4, 5), "int32")
    >>> sampler = RandomSampler(seed=3)
    >>> first = ops.convert_to_numpy(sampler(next, prompt, index=1))
    >>> bool((first == ops.convert_to_numpy(sampler(next, prompt, index=1))).all())
    True
    >>> first.shape
    (4, 5)
    """

    def __init__(self, seed=None, temperature=1.0):
        self.seed = int_argument("seed", seed, minimum=0, allowed=(None,))
        self.temperature = float_argument(
            "temperature", temperature, minimum=0.0, tensor=True
        )

    def get_config(self):
        return {"seed": self.seed, "temperature": self.temperature}

    def candidates(self, log_probs):
        """`(log_probs, token_ids)` of the tokens a draw may pick.

        `token_ids` is `None` when every token may be drawn (the columns
        are the token ids); a filter returns its candidates' ids
        `(batch, n)`, the others' log-probabilities being `-inf`.
        """
        return log_probs, None

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
        seed=None,
    ):
        if seed is None:
            seed = self.seed
        if seed is None:
            seed = random.randrange(HASH_MASK)

        def choose(log_probs, index):
            values, token_ids = self.candidates(log_probs / self.temperature)
            noise = uniform_noise(seed, index, ops.shape(values))
            gumbel = -ops.log(-ops.log(noise))
            chosen = ops.argmax(values + gumbel, axis=-1)
            if token_ids is None:
                return chosen
            return ops.take_along_axis(token_ids, chosen[:, None], axis=1)[:, 0]

        sequences, scores = search.token_by_token(
            choose,
            next,
            prompt,
            cache,
            index,
            stop_token_ids,
            pad_token_id,
            static_cache,
        )
        if return_scores:
            return sequences, scores
        return sequences


def _top_k(log_probs, k):
    """`ops.top_k` of at most the vocabulary (`k` may be a tensor)."""
    vocab_size = search.static_vocab_size(log_probs)
    k = min(k, vocab_size) if isinstance(k, int) else ops.minimum(k, vocab_size)
    return ops.top_k(log_probs, k)


@search.register
class TopKSampler(RandomSampler):
    """Top-k sampling: each token drawn from the `k` most probable.

    The tempered log-probabilities of the `k` best tokens are renormalised
    and one is drawn (ties at the `k`-th value are broken as `ops.top_k`
    breaks them, by the lower id). See `RandomSampler` for the seed and the
    call.

    Args:
        k: int >= 1, or a scalar int tensor (an input of a TensorFlow
            signature). The number of candidates; more than the vocabulary
            means all of it. Defaults to `5`.
        seed: optional int. Defaults to `None`.
        temperature: float > 0. Defaults to `1.0`.

    Example:
    >>> import numpy as np
    >>> from keras import ops
    >>> table = np.log(np.array(
    ...     [[0.1, 0.6, 0.3], [0.2, 0.1, 0.7], [0.1, 0.1, 0.8]], "float32"))
    >>> def next(prompt, cache, index):
    ...     last = ops.take(prompt, index - 1, axis=1)
    ...     return ops.take(table, last, axis=0), None, cache
    >>> prompt = np.zeros((1, 4), "int32")
    >>> ops.convert_to_numpy(TopKSampler(k=1, seed=0)(next, prompt, index=1,
    ...     stop_token_ids=[2]))  # k=1 is greedy
    array([[0, 1, 2, 0]], dtype=int32)
    """

    def __init__(self, k=5, seed=None, temperature=1.0):
        super().__init__(seed=seed, temperature=temperature)
        self.k = int_argument("k", k, tensor=True)

    def get_config(self):
        return {"k": self.k, **super().get_config()}

    def candidates(self, log_probs):
        return _top_k(log_probs, self.k)


@search.register
class TopPSampler(RandomSampler):
    """Top-p (nucleus) sampling: each token drawn from the smallest set of
    most probable tokens whose probability reaches `p`.

    The tokens are ranked by their tempered probability; the nucleus holds
    them in that order up to and including the first at which the
    cumulative probability reaches `p` (so it always holds the best token),
    and one is drawn from it, renormalised. See `RandomSampler` for the
    seed and the call.

    Args:
        p: float in `(0, 1]`, or a scalar float tensor. The probability mass
            of the nucleus. Defaults to `0.1`.
        k: optional int >= 1, or a scalar int tensor. Ranks only the `k`
            best tokens (faster on a large vocabulary; the nucleus is then
            at most `k` tokens, so `p=1.0` is `TopKSampler(k)`). Defaults
            to `None` (the whole vocabulary).
        seed: optional int. Defaults to `None`.
        temperature: float > 0. Defaults to `1.0`.

    Example:
    >>> import numpy as np
    >>> from keras import ops
    >>> table = np.log(np.array(
    ...     [[0.1, 0.6, 0.3], [0.2, 0.1, 0.7], [0.1, 0.1, 0.8]], "float32"))
    >>> def next(prompt, cache, index):
    ...     last = ops.take(prompt, index - 1, axis=1)
    ...     return ops.take(table, last, axis=0), None, cache
    >>> prompt = np.zeros((1, 4), "int32")
    >>> ops.convert_to_numpy(TopPSampler(p=0.5, seed=0)(next, prompt, index=1,
    ...     stop_token_ids=[2]))  # each best token holds over half the mass
    array([[0, 1, 2, 0]], dtype=int32)

    Reference:
        [Holtzman et al., 2020](https://arxiv.org/abs/1904.09751).
    """

    def __init__(self, p=0.1, k=None, seed=None, temperature=1.0):
        super().__init__(seed=seed, temperature=temperature)
        self.p = float_argument("p", p, minimum=0.0, maximum=1.0, tensor=True)
        self.k = int_argument("k", k, allowed=(None,), tensor=True)

    def get_config(self):
        return {"p": self.p, "k": self.k, **super().get_config()}

    def candidates(self, log_probs):
        k = search.static_vocab_size(log_probs) if self.k is None else self.k
        values, token_ids = _top_k(log_probs, k)
        total = ops.logsumexp(log_probs, axis=-1, keepdims=True)
        probs = ops.exp(values - total)  # Of the whole tempered softmax.
        before = ops.cumsum(probs, axis=-1) - probs  # The mass ranked above.
        in_nucleus = before < ops.cast(self.p, "float32")
        return ops.where(in_nucleus, values, float("-inf")), token_ids
