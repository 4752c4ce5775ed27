"""zoo: trained attention models built from `keras_attention` layers.

`zoo.Seq2Seq` (Bahdanau/Luong RNN encoder-decoder) has landed; the
Transformer, the Recurrent Attention Model and Show-Attend-Tell follow.
`zoo.data` holds the real-data loaders. `zoo.from_preset(name_or_dir)`
loads any zoo preset, picking the class from its config.
"""

from zoo import data
from zoo.seq2seq import Seq2Seq, TranslationPreprocessor
from zoo.task import Task, list_presets

__version__ = "0.1.0"


def from_preset(preset, load_weights=True, **overrides):
    """Loads a zoo preset (name or directory) whatever its model class."""
    return Task.from_preset(preset, load_weights=load_weights, **overrides)


__all__ = [
    "Seq2Seq",
    "Task",
    "TranslationPreprocessor",
    "data",
    "from_preset",
    "list_presets",
    "__version__",
]
