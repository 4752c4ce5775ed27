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

from zoo import lazy

__getattr__, __dir__ = lazy.exports(
    __name__,
    {
        "RecurrentAttentionBackbone": "zoo.ram.backbone",
        "CanvasSizeWarning": "zoo.ram.canvas",
        "LocationPolicy": "zoo.ram.layers",
        "RecurrentAttention": "zoo.ram.layers",
        "replica_normal": "zoo.ram.layers",
        "ImagePreprocessor": "zoo.ram.preprocessor",
        "to_model_pixels": "zoo.ram.preprocessor",
        "PRESETS": "zoo.ram.presets",
        "RecurrentAttentionModel": "zoo.ram.task",
    },
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
