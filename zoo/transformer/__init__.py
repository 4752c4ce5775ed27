"""Transformer encoder-decoder for translation (Vaswani et al. 2017).

- `TransformerBackbone` (`backbone.py`): token ids -> encoder and decoder
  hidden states, a functional `keras.Model`.
- `Transformer` (`task.py`): the translation task (`fit`, `translate`,
  `generate`) on the backbone; `from_preset` loads the shipped presets
  (`presets.py`, model card `README.md`).
- `losses.py` (label-smoothed loss), `averaging.py` (checkpoint averaging),
  `configs.py` (the named sizes of `Transformer.from_name`).
"""

# Imported for their registration: presets store the compiled loss and the
# learning-rate schedule, which must be known when a preset is loaded.
from keras_attention.training import schedules  # noqa: F401
from zoo.registry import register
from zoo.transformer.backbone import TransformerBackbone
from zoo.transformer.losses import MaskedLabelSmoothingCrossEntropy, TargetTokens
from zoo.transformer.presets import PRESETS
from zoo.transformer.task import Transformer
from zoo.translation import TranslationPreprocessor

register(
    __name__,
    Transformer,
    PRESETS,
    summary="Transformer encoder-decoder (Vaswani et al.), EN->ES",
)

__all__ = [
    "PRESETS",
    "MaskedLabelSmoothingCrossEntropy",
    "TargetTokens",
    "Transformer",
    "TransformerBackbone",
    "TranslationPreprocessor",
]
