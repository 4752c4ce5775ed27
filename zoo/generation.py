"""What every generative zoo model's user verbs share: argument checks, search.

`translate` and `caption` take the same decoding arguments (`beam_width`,
`max_length`, `batch_size`); they are checked here once, so a bad value gets
the same clear error from every model instead of a silent fallback (a beam
width of 0 used to decode greedily, a negative batch size to return nothing).
"""

import numbers

from keras_attention.decoding import BeamSearch, GreedySearch


def _int_at_least(name, value, low):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"`{name}` must be an int. Received: {name}={value!r}")
    if value < low:
        raise ValueError(
            f"`{name}` must be an int >= {low}. Received: {name}={value!r}"
        )
    return int(value)


def decoding_options(beam_width, max_length, batch_size, default_length):
    """Checks the decoding arguments of a user verb.

    Args:
        beam_width: int >= 1 (`1`: greedy), or `None` for greedy.
        max_length: int >= 1, or `None` for `default_length`.
        batch_size: int >= 1.
        default_length: int. The preprocessor's output length.

    Returns:
        `(beam_width, max_length, batch_size)` as ints.

    Example:
    >>> decoding_options(None, None, 8, default_length=64)
    (1, 64, 8)
    >>> decoding_options(0, None, 8, default_length=64)
    Traceback (most recent call last):
    ...
    ValueError: `beam_width` must be an int >= 1. Received: beam_width=0
    """
    beam_width = 1 if beam_width is None else _int_at_least("beam_width", beam_width, 1)
    if max_length is None:
        max_length = default_length
    max_length = _int_at_least("max_length", max_length, 1)
    batch_size = _int_at_least("batch_size", batch_size, 1)
    return beam_width, max_length, batch_size


def make_search(beam_width, **penalties):
    """`GreedySearch()` for a beam width of 1, else a `BeamSearch`.

    Args:
        beam_width: int >= 1 (checked by `decoding_options`).
        **penalties: `BeamSearch` arguments (`length_penalty`,
            `coverage_penalty`); a greedy search has none.

    Example:
    >>> type(make_search(1, length_penalty=0.6)).__name__
    'GreedySearch'
    >>> make_search(4, length_penalty=0.6).beam_width
    4
    """
    if beam_width == 1:
        return GreedySearch()
    return BeamSearch(beam_width=beam_width, **penalties)


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
