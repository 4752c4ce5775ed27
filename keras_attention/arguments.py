"""Checks of the integer arguments of every layer and score."""

import numbers


def int_argument(name, value, minimum=1, allowed=()):
    """`value` as an `int` if it is an integer `>= minimum`, or one of `allowed`.

    A bool is not an integer here (`True` is no size); NumPy integers are,
    and come back as Python ints (configs stay JSON).

    Args:
        name: str. The argument, named in the error.
        value: the value given.
        minimum: int. The smallest integer accepted. Defaults to `1`.
        allowed: tuple of the other values accepted as they are (`None`,
            `"auto"`). Defaults to `()`.

    Returns:
        `int(value)`, or `value` when it is one of `allowed`.

    Raises:
        ValueError: naming the argument, what it accepts and the value.

    Example:
    >>> int_argument("window", 3), int_argument("window", None, allowed=(None,))
    (3, None)
    >>> int_argument("chunk_threshold", -1, minimum=0, allowed=("auto", None))
    Traceback (most recent call last):
    ...
    ValueError: `chunk_threshold` must be an int >= 0, 'auto' or None. Received: chunk_threshold=-1
    """
    for other in allowed:
        if value is other or (isinstance(value, str) and value == other):
            return value
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Integral)
        or value < minimum
    ):
        accepted = [f"an int >= {minimum}", *map(repr, allowed)]
        if len(accepted) > 1:
            accepted = [", ".join(accepted[:-1]) + " or " + accepted[-1]]
        raise ValueError(f"`{name}` must be {accepted[0]}. Received: {name}={value!r}")
    return int(value)
