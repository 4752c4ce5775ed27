"""Parallel text in tab-separated files: one sentence pair per line.

Any corpus you can write as `source<TAB>target` lines (UTF-8) trains the
translation models, e.g. the shipped Bible samples
(`zoo.data.bible.sample_path()`) or a Tatoeba / ManyThings export.
"""


def read_tsv(path, source_column=0, target_column=1):
    """Reads sentence pairs from a tab-separated UTF-8 file.

    Empty (or whitespace-only) lines are skipped; fields are taken verbatim
    (only the line break is removed).

    Args:
        path: str or path-like. The TSV file.
        source_column: int. Zero-based column of the source sentence.
            Defaults to `0`.
        target_column: int. Zero-based column of the target sentence.
            Defaults to `1`.

    Returns:
        A list of `(source, target)` string pairs in file order.

    Raises:
        ValueError: naming the file and line number of a line with too few
            columns.

    Example:
    >>> from zoo.data import bible
    >>> pairs = read_tsv(bible.sample_path())
    >>> len(pairs)
    400
    """
    if min(source_column, target_column) < 0:
        raise ValueError(
            f"Columns must be >= 0. Received: {source_column=}, {target_column=}"
        )
    needed = max(source_column, target_column) + 1
    pairs = []
    with open(path, encoding="utf-8", newline="") as f:
        for line_number, line in enumerate(f, start=1):
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            fields = line.split("\t")
            if len(fields) < needed:
                raise ValueError(
                    f"{path}, line {line_number}: expected at least {needed} "
                    f"tab-separated columns, found {len(fields)}: {line[:80]!r}"
                )
            pairs.append((fields[source_column], fields[target_column]))
    return pairs


def load_tsv(path, source_column=0, target_column=1):
    """Loads sentence pairs from a TSV file as a `tf.data.Dataset`.

    Args:
        path: str or path-like. The TSV file; see `read_tsv`.
        source_column: int. Zero-based source column. Defaults to `0`.
        target_column: int. Zero-based target column. Defaults to `1`.

    Returns:
        An unbatched `tf.data.Dataset` of `(source, target)` scalar
        `tf.string` tensors, in file order.

    Example:
    >>> from zoo.data import bible
    >>> ds = load_tsv(bible.sample_path())
    >>> english, spanish = next(iter(ds))
    >>> english.dtype.name
    'string'
    """
    import tensorflow as tf

    pairs = read_tsv(path, source_column, target_column)
    sources = tf.constant([p[0] for p in pairs], tf.string, shape=[len(pairs)])
    targets = tf.constant([p[1] for p in pairs], tf.string, shape=[len(pairs)])
    return tf.data.Dataset.from_tensor_slices((sources, targets))
