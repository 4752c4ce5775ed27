"""The truncation warning of the text preprocessors (translation, captions).

A preprocessor packs each tokenized row into a fixed length and cuts what
does not fit. `warn_truncated` is the one warning both preprocessors give
for it, with one behaviour:

- Called eagerly (`translate`, a direct call on a batch), each call that
  cuts rows warns (`UserWarning`), naming how many rows of the batch were
  cut, the setting to raise and the value that would keep the longest row
  whole. Python's warning filters apply as usual (by default an identical
  message from the same place is shown once).
- Traced (inside `tf.data`, as `fit` and `evaluate` map the preprocessor,
  or a `tf.function`, as the exports trace it) nothing is printed: a
  warning there would need `tf.py_function`, which holds the GIL in the
  input pipeline and cannot be saved in an exported SavedModel. To check
  training data, call the preprocessor eagerly on a batch of it. The
  exports return `cut_rows` instead, a flag beside each output
  (`input_truncated`).
"""

import warnings

from zoo import quiet
from zoo.data.vocabulary import row_lengths

tf = quiet.LazyModule("tensorflow", "Cutting tokenized text")


def cut_rows(tokens, sequence_length):
    """Which rows packing `tokens` into `sequence_length` cuts, eager or traced.

    A row fits when its tokens and one special token (`[END]` after a
    source, `[START]` before a decoder input) fit in `sequence_length`.
    What the exports return beside each output (`input_truncated`), where a
    traced graph cannot warn.

    Args:
        tokens: a keras-hub tokenizer's output for a batch (see
            `zoo.data.vocabulary.row_lengths`).
        sequence_length: int. The length rows are packed to.

    Returns:
        bool tensor `(batch,)`, or `None` for a dense output (a tokenizer
        with its own `sequence_length`: its rows are cut already).

    Example:
    >>> from zoo.data.vocabulary import tokenizer
    >>> tok = tokenizer(["[PAD]", "[UNK]", "a", "bag"])
    >>> cut_rows(tok(["a bag bag", "a", "a bag"]), 3).numpy().tolist()
    [True, False, False]
    """
    lengths = row_lengths(tokens)
    return None if lengths is None else _cut(lengths, sequence_length)


def _cut(lengths, sequence_length):
    """Rows of `lengths` tokens that do not fit with one special token."""
    return lengths + 1 > sequence_length


def warn_truncated(tokens, sequence_length, setting, rows, hint=""):
    """Warns, when run eagerly, if packing `tokens` will cut rows.

    A row fits when its tokens and one special token (`[END]` after a
    source, `[START]` before a decoder input) fit in `sequence_length`.

    Args:
        tokens: a keras-hub tokenizer's output for a batch (see
            `zoo.data.vocabulary.row_lengths`); a dense output (a tokenizer
            with its own `sequence_length`) has no lengths and never warns.
        sequence_length: int. The length rows are packed to.
        setting: str. The preprocessor attribute that holds it, e.g.
            `"source_sequence_length"`; the warning says to raise it.
        rows: str. What a row is, plural, e.g. `"captions"`.
        hint: str. Appended to the advice, e.g. another setting to raise.
            Defaults to `""`.

    Returns:
        The number of rows cut (an int), or `None` when traced or when the
        lengths are unknown.

    Example:
    >>> from zoo.data.vocabulary import tokenizer
    >>> tok = tokenizer(["[PAD]", "[UNK]", "a", "bag"])
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     cut = warn_truncated(tok(["a bag bag", "a", "a bag"]), 3,
    ...                          "sequence_length", "captions")
    >>> cut, len(caught)
    (1, 1)
    >>> print(caught[0].message)
    1 of 3 captions were longer than sequence_length=3 subwords and were truncated (the longest needs sequence_length=4). Raise `preprocessor.sequence_length` to keep them whole.
    >>> warn_truncated(tok(["a bag"]), 3, "sequence_length", "captions")
    0
    """
    if not tf.executing_eagerly():
        return None
    lengths = row_lengths(tokens)
    if lengths is None:
        return None
    needed = lengths.numpy() + 1
    count = int(_cut(lengths, sequence_length).numpy().sum())
    if count:
        warnings.warn(
            TruncatedWarning(
                count,
                len(needed),
                rows,
                setting,
                sequence_length,
                int(needed.max()),
                hint,
            ),
            stacklevel=2,  # the preprocessor method that tokenized
        )
    return count


class CutWarning(UserWarning):
    """A warning that rows were cut, with advice a front end can reword.

    `str()` is `what` and the library's `advice` (a Python setting); a
    front end with another knob (the command line's flags) words its own
    with `advise`.

    Args:
        what: str. What was cut, a sentence.
        advice: str. What to do about it, a sentence.

    Example:
    >>> warning = CutWarning("2 of 9 rows were cut.", "Raise `n`.")
    >>> str(warning), warning.advise("Raise --n.")
    ('2 of 9 rows were cut. Raise `n`.', '2 of 9 rows were cut. Raise --n.')
    """

    def __init__(self, what, advice):
        self.what = what
        super().__init__(self.advise(advice))

    def advise(self, advice):
        """The warning's text with `advice` (str) as its last sentence.

        Example:
        >>> CutWarning("1 of 2 rows were cut.", "Raise `n`.").advise("Raise --n.")
        '1 of 2 rows were cut. Raise --n.'
        """
        return f"{self.what} {advice}"


class TruncatedWarning(CutWarning):
    """`warn_truncated`'s warning: input rows cut at the preprocessor's length.

    The library's advice names the preprocessor's setting; the command line
    names its flag (`advise`).

    Args:
        cut: int. The rows cut.
        total: int. The rows packed.
        rows: str. What a row is, plural, e.g. `"source sentences"`.
        setting: str. The preprocessor attribute that holds the length.
        sequence_length: int. The length rows are packed to.
        needed: int. The length that keeps the longest row whole.
        hint: str. Appended to the setting in the advice, e.g. another
            setting to raise. Defaults to `""`.

    Example:
    >>> warning = TruncatedWarning(1, 2, "captions", "sequence_length", 3, 5)
    >>> print(warning.advise("Raise --sequence-length."))
    1 of 2 captions were longer than sequence_length=3 subwords and were truncated (the longest needs sequence_length=5). Raise --sequence-length.
    """

    def __init__(self, cut, total, rows, setting, sequence_length, needed, hint=""):
        super().__init__(
            f"{cut} of {total} {rows} were longer than "
            f"{setting}={sequence_length} subwords and were truncated (the "
            f"longest needs {setting}={needed}).",
            f"Raise `preprocessor.{setting}`{hint} to keep them whole.",
        )


class UnfinishedWarning(CutWarning):
    """`warn_unfinished`'s warning: generated rows cut at the decoding length.

    Args:
        unfinished: int. The rows cut.
        total: int. The rows generated.
        rows: str. What a row is, plural, e.g. `"translations"`.
        max_length: int. The decoding length.

    Example:
    >>> warning = UnfinishedWarning(1, 2, "captions", 20)
    >>> warning.max_length, warning.advise("Raise --max-length.")
    (20, '1 of 2 captions reached max_length=20 subwords before [END] and stop mid-sentence. Raise --max-length.')
    """

    def __init__(self, unfinished, total, rows, max_length):
        self.max_length = max_length
        super().__init__(
            f"{unfinished} of {total} {rows} reached max_length={max_length} "
            "subwords before [END] and stop mid-sentence.",
            "Raise `max_length` to let them finish.",
        )


def warn_unfinished(tokens, end_id, max_length, rows):
    """Warns (`UnfinishedWarning`) if generated rows reached `max_length` before `end_id`.

    What `translate` and `caption` give back is then cut mid-sentence; the
    exports return the same as `output_truncated`.

    Args:
        tokens: int arrays `(batch, 1 + max_length)` as `generate` returns
            them (`[START]` first), one per decoded chunk.
        end_id: int. The `[END]` id.
        max_length: int. The decoding length, named in the advice.
        rows: str. What a row is, plural, e.g. `"translations"`.

    Returns:
        The number of unfinished rows (an int).

    Example:
    >>> import numpy as np
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     count = warn_unfinished([np.array([[2, 5, 3], [2, 5, 5]])], 3, 2, "captions")
    >>> count, str(caught[0].message)
    (1, '1 of 2 captions reached max_length=2 subwords before [END] and stop mid-sentence. Raise `max_length` to let them finish.')
    """
    import numpy as np

    unfinished = total = 0
    for chunk in tokens:
        chunk = np.asarray(chunk)
        total += len(chunk)
        unfinished += int((~np.any(chunk[:, 1:] == end_id, axis=1)).sum())
    if unfinished:
        warnings.warn(
            UnfinishedWarning(unfinished, total, rows, max_length),
            stacklevel=3,  # the caller of `translate` / `caption`
        )
    return unfinished
