"""Transformer encoder-decoder for translation (Vaswani et al. 2017).

- `TransformerBackbone` (`backbone.py`): token ids -> encoder and decoder
  hidden states, a functional `keras.Model`.
- `Transformer` (`task.py`): the translation task (`fit`, `translate`,
  `generate`) on the backbone; `from_preset` loads the shipped presets
  (`presets.py`, model card `README.md`).
- `losses.py` (label-smoothed loss), `averaging.py` (checkpoint averaging),
  `configs.py` (the named sizes of `Transformer.from_name`).
"""

from zoo import lazy

__getattr__, __dir__ = lazy.exports(
    __name__,
    {
        "TransformerBackbone": "zoo.transformer.backbone",
        "MaskedLabelSmoothingCrossEntropy": "zoo.transformer.losses",
        "TargetTokens": "zoo.transformer.losses",
        "PRESETS": "zoo.transformer.presets",
        "Transformer": "zoo.transformer.task",
        "TranslationPreprocessor": "zoo.translation",
    },
)

__all__ = [
    "PRESETS",
    "MaskedLabelSmoothingCrossEntropy",
    "TargetTokens",
    "Transformer",
    "TransformerBackbone",
    "TranslationPreprocessor",
]
