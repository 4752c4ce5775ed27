"""`zoo.base.truncation.warn_truncated`: one warning for every text preprocessor."""

import warnings

import pytest
import tensorflow as tf

from zoo.base.truncation import warn_truncated
from zoo.data import vocabulary

pytestmark = pytest.mark.tensorflow_only

TOKENIZER = vocabulary.tokenizer(["[PAD]", "[UNK]", "a", "bag", "coat"])
TEXTS = ["a", "a bag", "a bag coat", "a bag coat bag a"]  # 1, 2, 3, 5 tokens


def recorded(tokens, sequence_length, **kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cut = warn_truncated(
            tokens, sequence_length, "sequence_length", "rows", **kwargs
        )
    return cut, [str(w.message) for w in caught]


@pytest.mark.parametrize("sequence_length", [2, 3, 4, 6])
def test_counts_rows_whose_tokens_and_one_special_do_not_fit(sequence_length):
    # Independent count: a row fits when len(tokens) + 1 <= sequence_length.
    sizes = [len(text.split()) for text in TEXTS]
    want = sum(size + 1 > sequence_length for size in sizes)
    cut, messages = recorded(TOKENIZER(TEXTS), sequence_length, hint=" (or more)")
    assert cut == want
    if want:
        (message,) = messages
        assert message.startswith(
            f"{want} of 4 rows were longer than sequence_length={sequence_length}"
        )
        assert "the longest needs sequence_length=6" in message
        assert "Raise `preprocessor.sequence_length` (or more)" in message
    else:
        assert messages == []


def test_silent_when_traced_or_when_rows_are_cut_already():
    @tf.function
    def traced(texts):
        return warn_truncated(TOKENIZER(texts), 2, "sequence_length", "rows")

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert traced(tf.constant(TEXTS)) is None
    dense = vocabulary.tokenizer(["[PAD]", "[UNK]", "a", "bag"], sequence_length=2)
    assert recorded(dense(TEXTS), 2) == (None, [])
