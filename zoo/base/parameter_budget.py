"""The parameter budget: the weights a config may ask for, counted unbuilt.

A preset or `.keras` file is untrusted input, and `zoo.base.backbone.MAX_SIZES`
bounds each size argument, but not their product: `units=4000`, within its
limit, asked a Seq2Seq preset for 4 GB of weights. So a zoo task rebuilt
from a config (`Task.from_config`, which every preset and `.keras` load
goes through) is first asked how many parameters that config would create
(`Task.parameter_count`, from its backbone's `parameter_count`: arithmetic
on the config, nothing built, nothing allocated), and a config above
`MAX_PARAMETERS` is refused before any variable exists. A model built in
code is not counted; a larger model can be loaded by raising
`MAX_PARAMETERS`.

The counts are exact but for the alignment function, bounded by
`score_parameters`; a backbone's docstring says what else it leaves out.
The helpers below count Keras's own layers as Keras builds them.
"""

import math

#: The most parameters a zoo model rebuilt from a config may have: 2**28,
#: 1 GiB of float32 weights, 32x the largest shipped preset (the
#: Transformer's 8.3 million).
MAX_PARAMETERS = 2**28

#: The weights of a `keras.layers` recurrent cell: gates x (input + units)
#: x units, and its biases (Keras's GRU keeps two, `reset_after=True`).
_GATES = {"rnn": (1, 1), "lstm": (4, 1), "gru": (3, 2)}


def dense(inputs, units, use_bias=True):
    """The weights of `keras.layers.Dense(units)` on `inputs` features.

    Example:
    >>> dense(3, 2), dense(3, 2, use_bias=False)
    (8, 6)
    """
    return inputs * units + (units if use_bias else 0)


def recurrent_cell(cell, inputs, units):
    """The weights of Keras's `SimpleRNNCell`, `LSTMCell` or `GRUCell`.

    Args:
        cell: str. `"rnn"`, `"lstm"` or `"gru"`.
        inputs: int. The input features.
        units: int. The cell's units.

    Raises:
        ValueError: another `cell`.

    Example:
    >>> recurrent_cell("lstm", 3, 2), recurrent_cell("gru", 3, 2)
    (48, 42)
    """
    if cell not in _GATES:
        raise ValueError(
            f"`cell` must be one of {tuple(_GATES)}. Received: cell={cell!r}"
        )
    gates, biases = _GATES[cell]
    return gates * units * (inputs + units) + biases * gates * units


def score_parameters(score, query_dim, key_dim):
    """An upper bound of the weights of an alignment function, unbuilt.

    A score's weights are at most `(query_dim + key_dim + 2) * width`,
    where `width` is the largest of `key_dim` and the ints of its config
    (`units`, `max_length`). A score with no int in its config is asked
    first: built on one feature (a few weights at most), one with no
    weights there (`dot`, `scaled_dot`, `cosine`) has none. Every score of
    `keras_attention.scores` keeps within the bound
    (tests/zoo/base/test_parameter_budget.py checks each).

    Args:
        score: a score name, config dict or layer, as the zoo models take.
        query_dim: int. The query's features.
        key_dim: int. The key's features.

    Example:
    >>> score_parameters("additive", 4, 6)  # 4*6 + 6*6 + 6 (+ 6 bias)
    72
    >>> score_parameters("scaled_dot", 4, 6)
    0
    >>> score_parameters({"class_name": "Additive", "config": {"units": 100}}, 4, 6)
    1200
    """
    from keras_attention import scores

    score = scores.get(score)
    sizes = [
        value
        for value in score.get_config().values()
        if isinstance(value, int) and not isinstance(value, bool)
    ]
    if not sizes:
        probe = type(score).from_config(score.get_config())  # Unbuilt, not shared.
        probe.build((1, 1, 1), (1, 1, 1))
        if not probe.count_params():
            return 0
    return (query_dim + key_dim + 2) * max([key_dim, *sizes])


def conv2d(kernel_side, inputs, filters, use_bias=True):
    """The weights of a square `keras.layers.Conv2D`.

    Example:
    >>> conv2d(3, 1, 4)
    40
    """
    return kernel_side * kernel_side * inputs * filters + (filters if use_bias else 0)


def check(owner, count, maximum=None):
    """Refuses a parameter count above the budget.

    Args:
        owner: str. The model class, named in the error.
        count: int. The parameters its config asks for.
        maximum: optional int. Defaults to `MAX_PARAMETERS`.

    Raises:
        ValueError: naming the class, the count and the budget.

    Example:
    >>> check("Seq2Seq", 2**30)
    Traceback (most recent call last):
    ...
    ValueError: Seq2Seq: the config asks for 1,073,741,824 parameters, over the budget of 268,435,456 (zoo.base.parameter_budget.MAX_PARAMETERS). A size in the config was edited, or the model needs a larger budget.
    """
    where = ""
    if maximum is None:
        maximum, where = MAX_PARAMETERS, " (zoo.base.parameter_budget.MAX_PARAMETERS)"
    if count > maximum:
        raise ValueError(
            f"{owner}: the config asks for {count:,} parameters, over the "
            f"budget of {maximum:,}{where}. A size in the config was edited, "
            "or the model needs a larger budget."
        )


def halved(side, times):
    """`side` after `times` 2x2 poolings with "same" padding.

    Example:
    >>> halved(7, 2)
    2
    """
    for _ in range(times):
        side = math.ceil(side / 2)
    return side
