"""A Transformer image captioner: self-attention over CNN features.

`TransformerCaptionerBackbone` (small CNN grid, Transformer encoder blocks
over its cells, Transformer decoder blocks with cross-attention) and
`TransformerCaptioner` (the task: `fit`, `caption`, `attention_maps`, cached
greedy and beam search); `PRESETS` names the shipped presets. Captions are
prepared by `zoo.captioning.CaptionPreprocessor`.
"""

from zoo import lazy

__getattr__, __dir__ = lazy.exports(
    __name__,
    {
        "TransformerCaptionerBackbone": "zoo.transformer_captioner.backbone",
        "PRESETS": "zoo.transformer_captioner.presets",
        "TransformerCaptioner": "zoo.transformer_captioner.task",
    },
)

__all__ = ["PRESETS", "TransformerCaptioner", "TransformerCaptionerBackbone"]
