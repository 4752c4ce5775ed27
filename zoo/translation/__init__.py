"""Shared translation code of the zoo's translation models.

- `TranslationPreprocessor` (`preprocessor.py`): sentence pairs <-> subword ids.
- `TranslationTask` (`task.py`): `translate()` and alignments on top of
  `zoo.base.generation.GenerativeTask`; `Seq2Seq` and `Transformer` subclass it.
- `corpus_scores` (`metrics.py`): sacreBLEU BLEU and chrF.
- `ensemble` (`ensemble.py`): decoding with several translators at once.
- `teacher_forcing` (`teacher_forcing.py`): decoder inputs, labels, weights.
- `data.py`: the training scripts' data splits, batches and evaluation.
"""

from zoo import lazy

__getattr__, __dir__ = lazy.exports(
    __name__,
    {
        "teacher_forcing": "zoo.base.teacher_forcing",
        "add_data_arguments": "zoo.translation.data",
        "evaluate_translations": "zoo.translation.data",
        "fixed_batches": "zoo.translation.data",
        "load_splits": "zoo.translation.data",
        "translation_metadata": "zoo.translation.data",
        "translation_split": "zoo.translation.data",
        "Ensemble": "zoo.translation.ensemble",
        "ensemble": "zoo.translation.ensemble",
        "corpus_scores": "zoo.translation.metrics",
        "TranslationPreprocessor": "zoo.translation.preprocessor",
        "glue_punctuation": "zoo.translation.preprocessor",
        "TranslationTask": "zoo.translation.task",
    },
)

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
