"""Show, Attend and Tell (Xu et al. 2015): image captioning with visual attention."""

from zoo.show_attend_tell.model import ShowAttendTell
from zoo.show_attend_tell.preprocessor import CaptionPreprocessor

__all__ = ["CaptionPreprocessor", "ShowAttendTell"]
