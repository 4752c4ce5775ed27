"""Recurrent Attention Model (Mnih et al., 2014).

- `backbone.py`: `RecurrentAttentionBackbone`, the functional graph.
- `preprocessor.py`: `ImagePreprocessor`, images of any dtype and layout.
- `task.py`: `RecurrentAttentionModel`: hybrid loss, `classify`, `glimpses`,
  `look`.
- `canvas.py`: the image sizes a preset is good for; `CanvasSizeWarning`.
- `evaluation.py`: error on the preset's canvases and where the policy looks.
- `layers.py`: the agent's layers (`LocationPolicy`, `RecurrentAttention`).
- `presets.py`: the shipped presets.
- `train.py`: the error table and the presets (`python -m zoo.ram.train`);
  `plotting.py`: glimpse-path figures; `export.py`: the serving export.
"""

from zoo.ram.backbone import RecurrentAttentionBackbone
from zoo.ram.canvas import CanvasSizeWarning
from zoo.ram.layers import LocationPolicy, RecurrentAttention, replica_normal
from zoo.ram.preprocessor import ImagePreprocessor, to_model_pixels
from zoo.ram.presets import PRESETS
from zoo.ram.task import RecurrentAttentionModel
from zoo.registry import register

register(
    __name__,
    RecurrentAttentionModel,
    PRESETS,
    summary="Recurrent Attention Model glimpse classifier, Fashion-MNIST",
)

__all__ = [
    "CanvasSizeWarning",
    "ImagePreprocessor",
    "LocationPolicy",
    "PRESETS",
    "RecurrentAttention",
    "RecurrentAttentionBackbone",
    "RecurrentAttentionModel",
    "replica_normal",
    "to_model_pixels",
]
