"""`zoo.base.truncation`: one warning for every text preprocessor, one for cut outputs."""

import os
import sys
import warnings

import numpy as np
import pytest
import tensorflow as tf

from zoo.base.truncation import warn_truncated
from zoo.data import vocabulary

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import tiny_models  # noqa: E402

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


def _unfinished_warnings(call):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = call()
    return out, [str(w.message) for w in caught if "max_length" in str(w.message)]


@pytest.mark.parametrize("kind", ["translations", "captions"])
def test_outputs_cut_at_max_length_are_counted_in_a_warning(kind):
    """`translate` / `caption` warn of what stops before `[END]`, as the exports flag it."""
    if kind == "translations":
        model = tiny_models.transformer(seed=0)
        inputs = [pair[0] for pair in tiny_models.bible_pairs()[:3]]

        def decode(max_length):
            tokens = model.generate(
                model.preprocessor(tf.constant(inputs))["encoder_token_ids"],
                beam_width=1,
                max_length=max_length,
            )
            text = model.translate(inputs, beam_width=1, max_length=max_length)
            return tokens, text

    else:
        model = tiny_models.show_attend_tell(seed=0)
        inputs = tiny_models.scenes_batch(3)[0]

        def decode(max_length):
            tokens = model.generate(
                model.preprocessor.images(inputs), beam_width=1, max_length=max_length
            )
            text = model.caption(inputs, beam_width=1, max_length=max_length)
            return tokens, text

    end = model.preprocessor.end_id
    for max_length in (1, 3):
        (tokens, _), messages = _unfinished_warnings(lambda n=max_length: decode(n))
        # Independent count: rows of the same search without `[END]`.
        want = int((~np.any(np.asarray(tokens)[:, 1:] == end, axis=1)).sum())
        assert max_length == 3 or want  # untrained: the warning is exercised
        if want:
            assert messages == [
                f"{want} of 3 {kind} reached max_length={max_length} subwords "
                "before [END] and stop mid-sentence. Raise `max_length` to let "
                "them finish."
            ]
        else:
            assert messages == []
