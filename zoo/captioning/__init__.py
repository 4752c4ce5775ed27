"""The captioning kind: what every image captioner of the zoo shares.

- `zoo.captioning.preprocessor`: `CaptionPreprocessor` (images and
  captions <-> tensors).
- `zoo.captioning.export`: the SavedModel of a captioner.
- `zoo.captioning.evaluation`: BLEU-1..4 and the attention peak in the
  named item's box, on the scenes.
- `zoo.captioning.plotting`: per-word attention overlays.
"""

from zoo.captioning.preprocessor import CaptionPreprocessor

__all__ = ["CaptionPreprocessor"]
