"""The decoding arguments shared by every generative model and export.

`decoding_options` checks `beam_width`, `max_length` and `batch_size` once
(with `keras_attention.arguments.int_argument`), so a bad value gets the
same clear error from every model; `make_search` picks greedy or beam
search from a width (a Python int or a tensor, as an export's signature
gives it); `sampling_options`, `make_sampler`, `sampling_seed` and
`chunk_seed` do the same for the samplers; `best_sequences`, `repeated`
and `as_texts` shape what the verbs take and return. `zoo.base.generation`
(the search loop) re-exports every name.
"""

import random

import numpy as np
from keras import ops

from keras_attention.arguments import int_argument
from keras_attention.decoding import (
    BeamSearch,
    GreedySearch,
    RandomSampler,
    TopKSampler,
    TopPSampler,
)
from keras_attention.decoding.sampling import HASH_MASK


def decoding_options(beam_width, max_length, batch_size, default_length):
    """Checks the decoding arguments of a user verb.

    Args:
        beam_width: int >= 1 (`1`: greedy), or `None` for greedy.
        max_length: int >= 1, or `None` for `default_length`.
        batch_size: int >= 1.
        default_length: int. The preprocessor's output length.

    Returns:
        `(beam_width, max_length, batch_size)` as ints.

    Raises:
        TypeError: an argument is not an int (`int_argument`).
        ValueError: an argument is below 1.

    Example:
    >>> decoding_options(None, None, 8, default_length=64)
    (1, 64, 8)
    >>> decoding_options(0, None, 8, default_length=64)
    Traceback (most recent call last):
    ...
    ValueError: `beam_width` must be an int >= 1. Received: beam_width=0
    """
    if beam_width is None:
        beam_width = 1
    if max_length is None:
        max_length = default_length
    return (
        int_argument("beam_width", beam_width),
        int_argument("max_length", max_length),
        int_argument("batch_size", batch_size),
    )


def make_search(beam_width, sampler=None, num_return_sequences=1, **penalties):
    """`GreedySearch()` for a beam width of 1, else a `BeamSearch`; or `sampler`.

    A width given as a scalar int tensor (an input of a signature traced
    by TensorFlow, `zoo.translation.export`, whose batch size is unknown)
    is read when the search runs: the search
    returned then runs the greedy search where it is 1, else the beam
    (`keras.ops.cond`), so both must return one structure (call them with
    `return_scores=True`).

    Args:
        beam_width: int >= 1 (checked by `decoding_options`), or a scalar
            int tensor (checked where the graph runs).
        sampler: optional sampler (checked by `sampling_options`),
            returned as it is: a verb given one draws instead of
            searching. Defaults to `None`.
        num_return_sequences: int. Without a sampler, more than one
            (at most an int `beam_width`, checked by `sampling_options`)
            makes a `BeamSearch(return_all_beams=True)`, whose finished
            hypotheses, best first, `generate_with` returns
            (`best_sequences` keeps the first N). Defaults to `1`.
        **penalties: `BeamSearch` arguments (`length_penalty`,
            `coverage_penalty`); a greedy search has none.

    Example:
    >>> type(make_search(1, length_penalty=0.6)).__name__
    'GreedySearch'
    >>> make_search(4, length_penalty=0.6).beam_width
    4
    >>> make_search(4, num_return_sequences=2).return_all_beams
    True
    """
    if sampler is not None:
        return sampler
    if not ops.is_tensor(beam_width):
        if beam_width == 1:
            return GreedySearch()
        return BeamSearch(
            beam_width=beam_width,
            return_all_beams=num_return_sequences > 1,
            **penalties,
        )
    greedy = GreedySearch()
    beam = BeamSearch(beam_width=beam_width, **penalties)

    def search(*args, **kwargs):
        return ops.cond(
            ops.equal(beam_width, 1),
            lambda: greedy(*args, **kwargs),
            lambda: beam(*args, **kwargs),
        )

    return search


def sampling_options(sampler, num_return_sequences, beam_width=1):
    """Checks the sampling arguments of a user verb.

    The names are keras-hub's (`generate(..., sampler=...)`) and Hugging
    Face's (`num_return_sequences`).

    Args:
        sampler: `None` (search: greedy or beam), or a
            `keras_attention.decoding` sampler (`RandomSampler`,
            `TopKSampler`, `TopPSampler`; `make_sampler` makes one from
            Hugging Face's `top_k`, `top_p`, `temperature`).
        num_return_sequences: int >= 1. Outputs per input: draws of a
            sampler, or without one the best finished hypotheses of the
            beam search, at most `beam_width` (as Hugging Face's
            `generate`).
        beam_width: int >= 1. The verb's beam width (checked by
            `decoding_options`). Defaults to `1`.

    Returns:
        `(sampler, num_return_sequences)`.

    Example:
    >>> sampling_options(None, 2, beam_width=4)
    (None, 2)
    >>> sampling_options(None, 5, beam_width=4)
    Traceback (most recent call last):
    ...
    ValueError: `num_return_sequences` must be <= `beam_width` (the best hypotheses of one beam search), or a `sampler` must draw them (e.g. keras_attention.decoding.TopKSampler(k=5)). Received: num_return_sequences=5, beam_width=4
    """
    if sampler is not None and not isinstance(sampler, RandomSampler):
        raise TypeError(
            "`sampler` must be None or a keras_attention.decoding sampler "
            f"(RandomSampler, TopKSampler, TopPSampler). Received: sampler={sampler!r}"
        )
    count = int_argument("num_return_sequences", num_return_sequences)
    if count > beam_width and sampler is None:
        raise ValueError(
            "`num_return_sequences` must be <= `beam_width` (the best hypotheses "
            "of one beam search), or a `sampler` must draw them (e.g. "
            "keras_attention.decoding.TopKSampler(k=5)). Received: "
            f"num_return_sequences={count}, beam_width={beam_width}"
        )
    return sampler, count


def make_sampler(top_k=None, top_p=None, temperature=None, seed=None):
    """A sampler from Hugging Face's arguments (`top_k`, `top_p`, ...).

    `top_p` makes a `TopPSampler` (ranking only the `top_k` best when
    given too), `top_k` alone a `TopKSampler`, neither a `RandomSampler`.

    Args:
        top_k: optional int >= 1.
        top_p: optional float in `(0, 1]`.
        temperature: optional float > 0. Defaults to `1.0` when `None`.
        seed: optional int >= 0. Defaults to `None` (a new seed per call).

    Example:
    >>> make_sampler(top_k=5, seed=1)
    TopKSampler(k=5, seed=1, temperature=1.0)
    >>> make_sampler(top_p=0.9, top_k=40)
    TopPSampler(p=0.9, k=40, seed=None, temperature=1.0)
    """
    options = {"seed": seed, "temperature": 1.0 if temperature is None else temperature}
    if top_p is not None:
        return TopPSampler(p=top_p, k=top_k, **options)
    if top_k is not None:
        return TopKSampler(k=top_k, **options)
    return RandomSampler(**options)


def sampling_seed(sampler):
    """The seed of a verb's draws: the sampler's, else a new one.

    A verb that decodes in chunks gives chunk `c` the seed
    `chunk_seed(seed, c)`.
    """
    if sampler is None:
        return None
    return random.randrange(HASH_MASK) if sampler.seed is None else sampler.seed


def chunk_seed(seed, chunk):
    """The seed of chunk `chunk` of a verb's draws (`None` stays `None`).

    >>> chunk_seed(7, 0), chunk_seed(7, 1) != chunk_seed(7, 0)
    (7, True)
    """
    if seed is None:
        return None
    return (seed + chunk * 0x9E3779B1) % HASH_MASK


def best_sequences(tokens, count):
    """The `count` best hypotheses of each row, in a row: `(batch * count, L)`.

    Args:
        tokens: int array `(batch, L)` (one output per row, kept as it is),
            or `(batch, beam_width, L)`, best first, as `generate_with`
            returns a `BeamSearch(return_all_beams=True)`'s.
        count: int <= `beam_width`.

    Example:
    >>> beams = np.array([[[1, 5], [1, 6], [1, 7]], [[1, 8], [1, 9], [1, 4]]])
    >>> best_sequences(beams, 2).tolist()
    [[1, 5], [1, 6], [1, 8], [1, 9]]
    """
    if tokens.ndim == 2:
        return tokens
    return tokens[:, :count].reshape((-1, tokens.shape[-1]))


def repeated(rows, count):
    """Each row of `rows` (a list or array) `count` times in a row.

    >>> repeated(["a", "b"], 2)
    ['a', 'a', 'b', 'b']
    """
    if count == 1:
        return rows
    if isinstance(rows, np.ndarray):
        return np.repeat(rows, count, axis=0)
    return [row for row in rows for _ in range(count)]


def as_texts(texts, name="texts"):
    """`(list_of_str, single)` from one string or a sequence of strings.

    Args:
        texts: a `str`, or a list / tuple / array of `str`.
        name: the argument's name in error messages.

    Example:
    >>> as_texts("Jesus wept.")
    (['Jesus wept.'], True)
    >>> as_texts(b"Jesus wept.")
    Traceback (most recent call last):
    ...
    TypeError: `texts` must be a str or a sequence of str. Received: texts=b'Jesus wept.'
    """
    if isinstance(texts, str):
        return [texts], True
    if isinstance(texts, (bytes, bytearray)) or not hasattr(texts, "__iter__"):
        raise TypeError(
            f"`{name}` must be a str or a sequence of str. Received: {name}={texts!r}"
        )
    texts = list(texts)
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(
                f"`{name}` must hold str only. Received: {name}[{i}]={text!r}"
            )
    return texts, False
