"""Real-data loaders (Bible EN-ES, Fashion-MNIST, TSV parallel text) and samples."""

from zoo.data import bible, fashion_mnist, parallel_text, vocabulary

__all__ = ["bible", "fashion_mnist", "parallel_text", "vocabulary"]
