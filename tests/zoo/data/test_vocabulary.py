import functools
import unicodedata

import pytest

from zoo.data import bible, parallel_text, vocabulary

pytestmark = pytest.mark.tensorflow_only

RESERVED = ["[PAD]", "[UNK]", "[START]", "[END]"]


@functools.lru_cache(maxsize=1)
def sample_sentences():
    pairs = parallel_text.read_tsv(bible.sample_path())
    return [en for en, _ in pairs] + [es for _, es in pairs]


@functools.lru_cache(maxsize=1)
def sample_vocabulary():
    # 400 < the ~470 pieces the learner finds here, so the bound is exercised
    # (and the learner's threshold search stays short).
    return vocabulary.train_wordpiece(sample_sentences(), vocabulary_size=400)


def is_punctuation(ch):
    # keras-hub splits on ASCII symbols and Unicode punctuation (\p{P}).
    return unicodedata.category(ch).startswith("P") or (
        ch.isascii() and not ch.isalnum() and not ch.isspace()
    )


def expected_round_trip(text):
    """What WordPiece detokenize(tokenize(text)) must give, written out directly.

    The text is case-folded (NFKC), split on whitespace and around every
    punctuation character, and the pieces are joined by single spaces.
    Accents are kept.
    """
    text = unicodedata.normalize("NFKC", text).casefold()
    words, current = [], ""
    for ch in text:
        if ch.isspace() or is_punctuation(ch):
            if current:
                words.append(current)
            current = ""
            if not ch.isspace():
                words.append(ch)
        else:
            current += ch
    if current:
        words.append(current)
    return " ".join(words)


def test_reserved_tokens_first_and_size_bound():
    vocab = sample_vocabulary()
    assert vocab[:4] == RESERVED
    assert len(vocab) <= 400
    assert len(set(vocab)) == len(vocab)
    assert any(t.startswith("##") for t in vocab)
    small = vocabulary.train_wordpiece(sample_sentences()[:40], vocabulary_size=60)
    assert small[:4] == RESERVED and len(small) <= 60
    with pytest.raises(ValueError):
        vocabulary.train_wordpiece(["a b"], vocabulary_size=4)


def test_accented_characters_are_kept():
    vocab = sample_vocabulary()
    assert "ó" in vocab or "##ó" in vocab
    assert all(t == t.lower() for t in vocab[4:])  # lowercase=True


def test_tokenizer_round_trips_sample_sentences():
    """Round trip exact up to case folding and spacing around punctuation."""
    tok = vocabulary.tokenizer(sample_vocabulary())
    sentences = sample_sentences()
    ids = tok.tokenize(sentences)
    rows = ids.to_list() if hasattr(ids, "to_list") else ids
    unk = vocabulary.DEFAULT_RESERVED_TOKENS.index("[UNK]")
    assert len(rows) == len(sentences)
    assert not any(unk in list(row) for row in rows)
    decoded = tok.detokenize(ids)
    decoded = [d.decode("utf-8") if isinstance(d, bytes) else d for d in decoded]
    for sentence, text in zip(sentences, decoded, strict=True):
        assert text == expected_round_trip(sentence)


def test_lloro_round_trips_with_accents():
    vocab = sample_vocabulary()
    tok = vocabulary.tokenizer(vocab)
    assert tok.detokenize(tok.tokenize("Y lloró Jesús.")) == "y lloró jesús ."
    # The same vocabulary read by keras-hub directly, with accents kept.
    import keras_hub

    direct = keras_hub.tokenizers.WordPieceTokenizer(
        vocabulary=vocab, lowercase=True, strip_accents=False
    )
    assert direct.detokenize(direct.tokenize("LLORÓ")) == "lloró"
    stripping = vocabulary.train_wordpiece(["Y lloró Jesús."], 100, strip_accents=True)
    assert "ó" not in stripping and "##ó" not in stripping


def test_save_and_load_vocabulary(tmp_path):
    vocab = sample_vocabulary()
    path = tmp_path / "vocab.txt"
    vocabulary.save_vocabulary(vocab, path)
    text = path.read_text(encoding="utf-8")
    assert text.splitlines() == vocab  # one token per line, in order
    assert vocabulary.load_vocabulary(path) == vocab
    tok = vocabulary.tokenizer(str(path))
    assert tok.vocabulary_size() == len(vocab)
    with pytest.raises(ValueError):
        vocabulary.save_vocabulary(["a", "a"], tmp_path / "dup.txt")
    with pytest.raises(ValueError):
        vocabulary.save_vocabulary(["a\nb"], tmp_path / "nl.txt")
