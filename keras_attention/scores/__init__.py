"""Alignment (score) functions: `score(query, key) -> (batch, Tq, Tv)`.

Names and the mathematics they share:

| name (aliases)                          | class        | formula                     |
|-----------------------------------------|--------------|-----------------------------|
| `dot`                                   | `Dot`        | s^T h (times a learned scalar with `use_scale`) |
| `scaled_dot`                            | `ScaledDot`  | s^T h / sqrt(d_k)           |
| `general` (`luong`, `multiplicative`)   | `General`    | s^T W_a h                   |
| `additive` (`bahdanau`)                 | `Additive`   | v^T tanh(W_a s + U_a h)     |
| `perceptron`                            | `Perceptron` | same as `Additive`          |
| `concat`                                | `Concat`     | W[s; h], or v^T tanh(W[s;h]) (= `Additive`) |
| `cosine` (`content`)                    | `Cosine`     | s^T h / (|s| |h|)           |
| `location`                              | `Location`   | W_a s, cropped to Tv        |
| `tanh_sum`                              | `TanhSum`    | c sum_d tanh(a (s_d + h_d)) |

`Dot(use_scale=...)` and `TanhSum(use_scale=...)` are the two scores of
`keras.layers.Attention` (`score_mode="dot"` and `"concat"`), with Keras's
variables.

Mixed precision: under a float16 compute dtype the scores that multiply a
query by a key (`dot`, `scaled_dot`, `general`) run that product in float32
and return float32 scores (`precision.dot_scores`), so they stay finite for
every finite float16 input, where float16 scores (and Keras's layers)
overflow to NaN at about 100x unit scale; `cosine` works in float32. The
other scores are sums of `Dense`-like projections (and bounded `tanh`s) in
the compute dtype: they are finite while those projections stay below
float16's 65504, as a `Dense` layer's would. bfloat16 has float32's range
and runs as it is.
"""

import keras

from keras_attention.scores.additive import Additive, Perceptron
from keras_attention.scores.base import Score
from keras_attention.scores.concat import Concat
from keras_attention.scores.cosine import Cosine
from keras_attention.scores.dot import Dot
from keras_attention.scores.general import General
from keras_attention.scores.location import Location
from keras_attention.scores.precision import dot_scores, score_dtype, widen
from keras_attention.scores.scaled_dot import ScaledDot
from keras_attention.scores.tanh_sum import TanhSum

ALIASES = {
    "dot": Dot,
    "scaled_dot": ScaledDot,
    "general": General,
    "luong": General,
    "multiplicative": General,
    "additive": Additive,
    "bahdanau": Additive,
    "concat": Concat,
    "perceptron": Perceptron,
    "cosine": Cosine,
    "content": Cosine,
    "location": Location,
    "tanh_sum": TanhSum,
}


def serialize(score):
    """Returns the config dict of a score layer."""
    return keras.saving.serialize_keras_object(score)


def deserialize(config):
    """Rebuilds a score layer from `serialize`'s output."""
    return keras.saving.deserialize_keras_object(config)


def _score_class(config):
    """The `Score` subclass a config dict names, looked up without building
    anything, or None.

    The class is found by alias, or by its registered name among the
    objects Keras knows (registered classes and `custom_objects`).
    """
    for name in (config.get("class_name"), config.get("registered_name")):
        if not isinstance(name, str):
            continue
        if name.lower() in ALIASES:
            return ALIASES[name.lower()]
        cls = keras.saving.get_registered_object(name)
        if isinstance(cls, type) and issubclass(cls, Score):
            return cls
    return None


def get(identifier):
    """Returns a score layer from a name, a config dict or an instance.

    Like `keras.activations.get`: a `Score` instance is returned as is, a
    name (see the module table) builds a fresh layer with default arguments,
    and a dict made by `serialize` (or `{"class_name": name, "config": {}}`)
    is deserialized. A dict is deserialized only once its `class_name` (or
    `registered_name`) names a `Score` class (an alias, or a class
    registered with Keras): any other object, such as Keras's
    `{"class_name": "__numpy__", ...}` array, is refused unbuilt.

    Args:
        identifier: str, dict or `Score`.

    Returns:
        A `Score` layer.

    Raises:
        ValueError: an unknown name, or a dict that names no score class.

    Example:
    >>> get("bahdanau")
    <Additive name=additive, built=False>
    >>> get({"class_name": "__numpy__", "config": {"value": 1, "dtype": "U9"}})
    Traceback (most recent call last):
    ...
    ValueError: The config does not describe a score layer: class_name='__numpy__' is not a score's name nor a registered `keras_attention.scores.Score` class. Received: score={'class_name': '__numpy__', 'config': {'value': 1, 'dtype': 'U9'}}
    """
    if isinstance(identifier, Score):
        return identifier
    if isinstance(identifier, str):
        key = identifier.lower()
        if key not in ALIASES:
            raise ValueError(
                f"Unknown score {identifier!r}. Valid names are: "
                f"{', '.join(sorted(ALIASES))}."
            )
        return ALIASES[key]()
    if isinstance(identifier, dict):
        cls = _score_class(identifier)
        if cls is None:
            raise ValueError(
                "The config does not describe a score layer: class_name="
                f"{identifier.get('class_name')!r:.80} is not a score's name "
                "nor a registered `keras_attention.scores.Score` class. "
                f"Received: score={identifier!r:.200}"
            )
        config = identifier.get("config", {})
        if not isinstance(config, dict):
            raise ValueError(
                f"The config of a score must be a dict. Received: config={config!r:.80}"
            )
        name = identifier.get("class_name")
        if isinstance(name, str) and name.lower() in ALIASES:
            return cls(**config)
        score = deserialize(identifier)
        if not isinstance(score, Score):  # A registered name that lied.
            raise ValueError(
                f"The config does not describe a score layer. Received: "
                f"score={identifier!r:.200}"
            )
        return score
    raise ValueError(
        "A score must be a name, a config dict or a `keras_attention.scores."
        f"Score` layer. Received: score={identifier!r:.200}"
    )


__all__ = [
    "Additive",
    "Concat",
    "Cosine",
    "Dot",
    "General",
    "Location",
    "Perceptron",
    "ScaledDot",
    "Score",
    "TanhSum",
    "deserialize",
    "dot_scores",
    "get",
    "score_dtype",
    "serialize",
    "widen",
]
