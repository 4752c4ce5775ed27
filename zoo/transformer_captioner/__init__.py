"""A Transformer image captioner: self-attention over CNN features.

`TransformerCaptionerBackbone` (small CNN grid, Transformer encoder blocks
over its cells, Transformer decoder blocks with cross-attention) and
`TransformerCaptioner` (the task: `fit`, `caption`, `attention_maps`, cached
greedy and beam search); `PRESETS` names the shipped presets. Captions are
prepared by `zoo.captioning.CaptionPreprocessor`.
"""

from zoo.registry import register
from zoo.transformer_captioner.backbone import TransformerCaptionerBackbone
from zoo.transformer_captioner.presets import PRESETS
from zoo.transformer_captioner.task import TransformerCaptioner

register(
    __name__,
    TransformerCaptioner,
    PRESETS,
    summary="Transformer captioner: self-attention over CNN features, Fashion-MNIST scenes",
)

__all__ = ["PRESETS", "TransformerCaptioner", "TransformerCaptionerBackbone"]
