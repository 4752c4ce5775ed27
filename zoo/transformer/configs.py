"""Named sizes of `zoo.Transformer`: `tiny`, `small`, `base` and `big`.

`base` and `big` are the two models of Vaswani et al. (2017), table 3
(`big` with the dropout 0.3 it used on English-German); `tiny` is for tests
and smoke runs, `small` for CPU-sized training runs.
"""

import copy

CONFIGS = {
    "tiny": {
        "num_layers": 2,
        "hidden_dim": 64,
        "intermediate_dim": 128,
        "num_heads": 4,
        "dropout": 0.1,
    },
    "small": {
        "num_layers": 3,
        "hidden_dim": 256,
        "intermediate_dim": 1024,
        "num_heads": 4,
        "dropout": 0.1,
    },
    "base": {
        "num_layers": 6,
        "hidden_dim": 512,
        "intermediate_dim": 2048,
        "num_heads": 8,
        "dropout": 0.1,
    },
    "big": {
        "num_layers": 6,
        "hidden_dim": 1024,
        "intermediate_dim": 4096,
        "num_heads": 16,
        "dropout": 0.3,
    },
}


def get(name, **overrides):
    """Returns the keyword arguments of a named size, with overrides.

    Args:
        name: str. One of `"tiny"`, `"small"`, `"base"`, `"big"`.
        **overrides: entries to change or add (e.g. `num_layers=4`).

    Returns:
        A new dict of `Transformer` keyword arguments.

    Example:
    >>> get("base", dropout=0.2)["hidden_dim"]
    512
    """
    if name not in CONFIGS:
        raise ValueError(
            f"Unknown Transformer size {name!r}. Expected one of "
            f"{sorted(CONFIGS)}. Received: name={name!r}"
        )
    config = copy.deepcopy(CONFIGS[name])
    config.update(overrides)
    return config
