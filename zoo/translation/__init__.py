"""Shared translation code of the zoo's translation models.

- `TranslationPreprocessor` (`preprocessor.py`): sentence pairs <-> subword ids.
- `TranslationTask` (`task.py`): `translate()` and alignments on top of
  `zoo.base.generation.GenerativeTask`; `Seq2Seq` and `Transformer` subclass it.
- `corpus_scores` (`metrics.py`): sacreBLEU BLEU and chrF.
- `ensemble` (`ensemble.py`): decoding with several translators at once.
- `teacher_forcing` (`teacher_forcing.py`): decoder inputs, labels, weights.
- `data.py`: the training scripts' data splits, batches and evaluation.
"""

from zoo.base.teacher_forcing import teacher_forcing
from zoo.translation.data import (
    add_data_arguments,
    evaluate_translations,
    fixed_batches,
    load_splits,
    translation_metadata,
    translation_split,
)
from zoo.translation.ensemble import Ensemble, ensemble
from zoo.translation.metrics import corpus_scores
from zoo.translation.preprocessor import TranslationPreprocessor, glue_punctuation
from zoo.translation.task import TranslationTask

__all__ = [
    "Ensemble",
    "TranslationPreprocessor",
    "TranslationTask",
    "add_data_arguments",
    "corpus_scores",
    "ensemble",
    "evaluate_translations",
    "fixed_batches",
    "glue_punctuation",
    "load_splits",
    "teacher_forcing",
    "translation_metadata",
    "translation_split",
]
