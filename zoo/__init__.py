"""zoo: trained attention models built from `keras_attention` layers.

- `zoo.Seq2Seq`: RNN encoder-decoder with Bahdanau/Luong attention.
- `zoo.Transformer`: encoder-decoder Transformer (Vaswani et al. 2017).
- `zoo.RecurrentAttentionModel`: the glimpse agent of Mnih et al. 2014.
- `zoo.ShowAttendTell`: image captioner with soft/hard attention (Xu et al.
  2015).

`zoo.data` holds the real-data loaders. `zoo.from_preset(name_or_dir)` loads
any zoo preset, picking the class from its config; `zoo.list_presets()`
lists the shipped ones.
"""

from zoo import data
from zoo.ram import RecurrentAttentionModel
from zoo.seq2seq import Seq2Seq, TranslationPreprocessor
from zoo.show_attend_tell import CaptionPreprocessor, ShowAttendTell
from zoo.task import Task, list_presets
from zoo.transformer import Transformer

__version__ = "0.1.0"


def from_preset(preset, load_weights=True, **overrides):
    """Loads a zoo preset (name or directory) whatever its model class."""
    return Task.from_preset(preset, load_weights=load_weights, **overrides)


__all__ = [
    "CaptionPreprocessor",
    "RecurrentAttentionModel",
    "Seq2Seq",
    "ShowAttendTell",
    "Task",
    "Transformer",
    "TranslationPreprocessor",
    "data",
    "from_preset",
    "list_presets",
    "__version__",
]
