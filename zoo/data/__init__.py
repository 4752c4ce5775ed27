"""Real-data loaders (Bible EN-ES, Fashion-MNIST) and their shipped samples."""
