"""Transformer encoder-decoder for translation (Vaswani et al. 2017)."""

# Imported for their registration: presets store the compiled loss and the
# learning-rate schedule, which must be known when a preset is loaded.
from keras_attention.training import schedules  # noqa: F401
from zoo.transformer.losses import MaskedLabelSmoothingCrossEntropy, TargetTokens
from zoo.transformer.model import Transformer

__all__ = ["MaskedLabelSmoothingCrossEntropy", "TargetTokens", "Transformer"]
