"""Show, Attend and Tell (Xu et al. 2015): image captioning with visual attention.

`ShowAttendTellBackbone` (encoder CNN + attentive LSTM) and `ShowAttendTell`
(the task: `fit`, and `caption`, `attention_maps` of the captioning kind it
subclasses, `zoo.captioning.CaptioningTask`); `CaptionPreprocessor` (raw
images and captions <-> tensors) is the kind's, re-exported here. `PRESETS`
names the shipped presets.
"""

from zoo import lazy

__getattr__, __dir__ = lazy.exports(
    __name__,
    {
        "CaptionPreprocessor": "zoo.captioning.preprocessor",
        "ShowAttendTellBackbone": "zoo.show_attend_tell.backbone",
        "PRESETS": "zoo.show_attend_tell.presets",
        "ShowAttendTell": "zoo.show_attend_tell.task",
    },
)

__all__ = ["PRESETS", "CaptionPreprocessor", "ShowAttendTell", "ShowAttendTellBackbone"]
