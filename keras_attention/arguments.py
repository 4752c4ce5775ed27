"""The one check of an integer argument, for the library and the zoo."""

import numbers

from keras import backend, ops


def int_argument(name, value, minimum=1, maximum=None, allowed=(), tensor=False):
    """`value` as an `int` if it is an integer in range, or one of `allowed`.

    A bool is not an integer here (`True` is no size); NumPy integers are,
    and come back as Python ints (configs stay JSON). As Keras does, a
    value of the wrong type raises a TypeError and one out of range a
    ValueError, with the same message.

    Args:
        name: str. The argument, named in the error.
        value: the value given.
        minimum: int. The smallest integer accepted. Defaults to `1`.
        maximum: optional int. The largest integer accepted. Defaults to
            `None` (no limit).
        allowed: tuple of the other values accepted as they are (`None`,
            `"auto"`). Defaults to `()`.
        tensor: bool. Also accept a scalar integer tensor (a width traced
            into a graph), returned as it is: its value is known only when
            the graph runs, where the caller checks it. Defaults to `False`.

    Returns:
        `int(value)`, or `value` when it is one of `allowed` or a tensor.

    Raises:
        TypeError: `value` is neither an integer nor of the type of an
            `allowed` value, naming the argument, what it accepts and the
            value.
        ValueError: `value` is out of range (or a string not allowed), in
            the same words.

    Example:
    >>> int_argument("window", 3), int_argument("window", None, allowed=(None,))
    (3, None)
    >>> int_argument("chunk_threshold", -1, minimum=0, allowed=("auto", None))
    Traceback (most recent call last):
    ...
    ValueError: `chunk_threshold` must be an int >= 0, 'auto' or None. Received: chunk_threshold=-1
    >>> int_argument("beam_width", 2.0)
    Traceback (most recent call last):
    ...
    TypeError: `beam_width` must be an int >= 1. Received: beam_width=2.0
    >>> int_argument("units", 12000, maximum=8192)
    Traceback (most recent call last):
    ...
    ValueError: `units` must be at most 8192. Received: units=12000
    """
    for other in allowed:
        if value is other or (isinstance(value, str) and value == other):
            return value
    if tensor and ops.is_tensor(value):
        return _scalar_tensor(name, value, "int")
    is_int = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if not is_int or value < minimum:
        accepted = [f"an int >= {minimum}", *map(repr, allowed)]
        if len(accepted) > 1:
            accepted = [", ".join(accepted[:-1]) + " or " + accepted[-1]]
        message = f"`{name}` must be {accepted[0]}. Received: {name}={value!r}"
        same_kind = is_int or any(type(value) is type(other) for other in allowed)
        raise ValueError(message) if same_kind else TypeError(message)
    if maximum is not None and value > maximum:
        raise ValueError(
            f"`{name}` must be at most {maximum}. Received: {name}={value!r}"
        )
    return int(value)


def float_argument(name, value, minimum, maximum=None, tensor=False):
    """`value` as a `float` if it is a real number in `(minimum, maximum]`.

    The float sibling of `int_argument` (a bool is no number; an int is a
    float here), for a temperature or a probability mass.

    Args:
        name: str. The argument, named in the error.
        value: the value given.
        minimum: float. The bound that `value` must exceed.
        maximum: optional float. The largest value accepted. Defaults to
            `None` (no limit).
        tensor: bool. Also accept a scalar float tensor, returned as it is
            (checked by the caller where the graph runs). Defaults to
            `False`.

    Raises:
        TypeError: `value` is not a real number.
        ValueError: `value` is out of range.

    Example:
    >>> float_argument("p", 1, minimum=0.0, maximum=1.0)
    1.0
    >>> float_argument("temperature", 0.0, minimum=0.0)
    Traceback (most recent call last):
    ...
    ValueError: `temperature` must be a float > 0.0. Received: temperature=0.0
    """
    if tensor and ops.is_tensor(value):
        return _scalar_tensor(name, value, "float")
    accepted = f"a float > {minimum}"
    if maximum is not None:
        accepted += f" and <= {maximum}"
    message = f"`{name}` must be {accepted}. Received: {name}={value!r}"
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise TypeError(message)
    if not value > minimum or (maximum is not None and value > maximum):
        raise ValueError(message)
    return float(value)


def _scalar_tensor(name, value, kind):
    """`value` if it is a scalar tensor of `kind` ("int", "float"), else a TypeError."""
    if len(value.shape) == 0 and kind in backend.standardize_dtype(value.dtype):
        return value
    article = "an" if kind == "int" else "a"
    raise TypeError(
        f"`{name}` must be {article} {kind} or a scalar {kind} tensor. Received: "
        f"{name}={value!r}"
    )
