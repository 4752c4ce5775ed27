"""Real-data loaders and the samples shipped with them.

Bible EN-ES verse pairs (`bible`), Fashion-MNIST (`fashion_mnist`), Fashion-MNIST
scenes with captions and boxes (`scenes`), caption datasets in Karpathy's split
format (`captions`), TSV parallel text (`parallel_text`), WordPiece
vocabularies (`vocabulary`); `pipeline.finish`, the tail of every `tf.data`
pipeline the zoo builds.
"""

from zoo.data import (
    bible,
    captions,
    fashion_mnist,
    parallel_text,
    pipeline,
    scenes,
    vocabulary,
)

__all__ = [
    "bible",
    "captions",
    "fashion_mnist",
    "parallel_text",
    "pipeline",
    "scenes",
    "vocabulary",
]
