"""Show, Attend and Tell (Xu et al. 2015): image captioning with visual attention.

`ShowAttendTellBackbone` (encoder CNN + attentive LSTM), `CaptionPreprocessor`
(raw images and captions <-> tensors) and `ShowAttendTell` (the task:
`fit`, `caption`, `attention_maps`); `PRESETS` names the shipped presets.
"""

from zoo.captioning.preprocessor import CaptionPreprocessor
from zoo.show_attend_tell.backbone import ShowAttendTellBackbone
from zoo.show_attend_tell.presets import PRESETS
from zoo.show_attend_tell.task import ShowAttendTell

__all__ = ["PRESETS", "CaptionPreprocessor", "ShowAttendTell", "ShowAttendTellBackbone"]
