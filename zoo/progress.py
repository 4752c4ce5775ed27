"""Progress on the command line's long work, on standard error.

Standard output holds only a verb's answer, so `> answers.txt` keeps just
that; progress goes to standard error, and only when standard error is a
terminal: a log file or a pipe gets no frames of a redrawn bar (nor does
`tests/zoo/cli/test_quiet.py`, which reads standard error through a pipe).
Two forms:

- `status(text)`: one line saying what the first, slow step does (loading
  the preset, compiling the search), erased when it is done.
- `in_batches(...)`: Keras's progress bar (`keras.utils.Progbar`) over
  inputs, past a screenful of them (`SCREENFUL`).

Example (standard error is not a terminal here: nothing is drawn):
>>> in_batches(list(range(50)), 16, lambda batch: [2 * x for x in batch], "x")[-1]
98
"""

import contextlib
import sys

#: Inputs beyond which a verb draws a progress bar (a terminal's height).
SCREENFUL = 24


def shown(stream=None):
    """Whether progress is drawn: `stream` (default: stderr) is a terminal."""
    stream = sys.stderr if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


@contextlib.contextmanager
def status(text):
    """Shows `text` + `...` on a terminal's standard error while the block runs."""
    if not shown():
        yield
        return
    sys.stderr.write(f"{text}...")
    sys.stderr.flush()
    try:
        yield
    finally:
        sys.stderr.write("\r\033[K")  # erase the line: the answer follows
        sys.stderr.flush()


def in_batches(
    items, size, step, unit, first="compiling on the first call", batched=False
):
    """`step` run on `items`, `size` at a time, with a progress bar when long.

    Without a bar (a short run, or standard error not a terminal) `step`
    runs once on all `items`, unless `batched`.

    Args:
        items: list or array. The inputs (sliced `size` at a time).
        size: int. Inputs per call of `step`.
        step: callable. A list of inputs -> a list of outputs, one each.
        unit: str. What an input is, for the bar (e.g. `"sentences"`).
        first: str. What the first call does besides, said before it.
        batched: bool. Call `step` on `size` inputs at a time even without
            a bar, so that what it does per call (draws under a seed per
            batch) does not depend on the terminal. Defaults to `False`.

    Returns:
        The outputs of every call, in order, as one list.
    """
    if len(items) <= SCREENFUL or not shown():
        with status(first):
            if not batched:
                return list(step(items))
            starts = range(0, len(items), size)
            return [out for i in starts for out in step(items[i : i + size])]
    import keras

    outputs = []
    with contextlib.redirect_stdout(sys.stderr):  # Keras draws on stdout
        bar = keras.utils.Progbar(len(items), unit_name=unit)
        print(f"{len(items)} {unit}: {first}")
        for start in range(0, len(items), size):
            outputs.extend(step(items[start : start + size]))
            bar.update(min(start + size, len(items)))  # inputs done
    return outputs
