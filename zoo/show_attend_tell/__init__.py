"""Show, Attend and Tell (Xu et al. 2015): image captioning with visual attention.

`ShowAttendTellBackbone` (encoder CNN + attentive LSTM) and `ShowAttendTell`
(the task: `fit`, and `caption`, `attention_maps` of the captioning kind it
subclasses, `zoo.captioning.CaptioningTask`); `CaptionPreprocessor` (raw
images and captions <-> tensors) is the kind's, re-exported here. `PRESETS`
names the shipped presets.
"""

from zoo.captioning.preprocessor import CaptionPreprocessor
from zoo.registry import register
from zoo.show_attend_tell.backbone import ShowAttendTellBackbone
from zoo.show_attend_tell.presets import PRESETS
from zoo.show_attend_tell.task import ShowAttendTell

register(
    __name__,
    ShowAttendTell,
    PRESETS,
    summary="Show, Attend and Tell captioner, Fashion-MNIST scenes",
)

__all__ = ["PRESETS", "CaptionPreprocessor", "ShowAttendTell", "ShowAttendTellBackbone"]
