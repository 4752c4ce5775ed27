"""`TranslationPreprocessor`: packing, shifting, weights, detokenizing, saving."""

import functools
import os

import keras
import keras_hub
import numpy as np
import pytest
import tensorflow as tf

from zoo.base.truncation import TruncatedWarning
from zoo.data import vocabulary
from zoo.translation import TranslationPreprocessor
from zoo.translation.preprocessor import glue_punctuation

pytestmark = pytest.mark.tensorflow_only

PAD, UNK, START, END = 0, 1, 2, 3
SOURCES = [
    "Jesus wept.",
    "In the beginning, God created the heavens and the earth.",
    "Who is he?",
]
TARGETS = [
    "Y lloró Jesús.",
    "En el principio creó Dios los cielos y la tierra.",
    "¿Quién es él?",
]


@functools.cache
def vocabularies(lowercase=False):
    return (
        vocabulary.train_wordpiece(SOURCES, 200, lowercase=lowercase),
        vocabulary.train_wordpiece(TARGETS, 200, lowercase=lowercase),
    )


def make(source_length=80, target_length=80, **kwargs):
    source_vocab, target_vocab = vocabularies(kwargs.get("lowercase", False))
    return TranslationPreprocessor(
        source_vocab, target_vocab, source_length, target_length, **kwargs
    )


def pieces(vocab, texts, lowercase=False):
    """Reference tokenization with a separately built keras-hub tokenizer."""
    tokenizer = keras_hub.tokenizers.WordPieceTokenizer(
        vocabulary=vocab, lowercase=lowercase, strip_accents=False
    )
    # keras-hub returns Python lists for ragged outputs in eager mode.
    return [list(map(int, row)) for row in tokenizer(tf.constant(texts))]


def pad_rows(rows, width):
    return np.array([row + [PAD] * (width - len(row)) for row in rows], "int32")


def expected(texts_src, texts_tgt, source_length, target_length, trim=True):
    """The packed batch, written out with lists (independent of StartEndPacker)."""
    source_vocab, target_vocab = vocabularies()
    src = [p[: source_length - 1] + [END] for p in pieces(source_vocab, texts_src)]
    # `target_length` decoder inputs: [START] + pieces, then labels shifted.
    tgt = [
        [START] + p[: target_length - 1] + [END]
        for p in pieces(target_vocab, texts_tgt)
    ]
    src_width = max(map(len, src)) if trim else source_length
    tgt_width = max(map(len, tgt)) if trim else target_length + 1
    target = pad_rows(tgt, tgt_width)
    # Decoder inputs are `[START] pieces [PAD]...`: no row feeds its [END].
    decoder = np.where(target[:, :-1] == END, PAD, target[:, :-1])
    return pad_rows(src, src_width), decoder, target[:, 1:]


def run(pre, sources=SOURCES, targets=TARGETS):
    x, y, w = pre(tf.constant(sources), tf.constant(targets))
    x = {k: v.numpy() for k, v in x.items()}
    return x, y.numpy(), w.numpy()


@pytest.mark.parametrize("trim", [True, False])
def test_ids_shapes_and_shift(trim):
    pre = make(80, 80, trim_padding=trim)
    x, labels, weights = run(pre)
    source, decoder, want_labels = expected(SOURCES, TARGETS, 80, 80, trim)
    np.testing.assert_array_equal(x["encoder_token_ids"], source)
    np.testing.assert_array_equal(x["decoder_token_ids"], decoder)
    np.testing.assert_array_equal(labels, want_labels)
    if not trim:
        assert x["encoder_token_ids"].shape == (3, 80)
        assert labels.shape == (3, 80)
    # The structure, stated directly.
    assert (decoder[:, 0] == START).all()
    assert END not in decoder
    # Labels are the decoder ids shifted by one, with [END] after the pieces.
    np.testing.assert_array_equal(
        np.where(labels[:, :-1] == END, PAD, labels[:, :-1]), decoder[:, 1:]
    )
    # The decoder's padding mask is the sample weight.
    np.testing.assert_array_equal(decoder != PAD, weights > 0)
    lengths = (labels != PAD).sum(axis=1)
    for row, n in zip(labels, lengths):
        assert row[n - 1] == END and (row[:n] != PAD).all() and (row[n:] == PAD).all()
    for row in x["encoder_token_ids"]:
        n = int((row != PAD).sum())
        assert row[n - 1] == END and (row[n:] == PAD).all()
    # Sample weight: 1 on real tokens and [END], exactly 0 on padding.
    assert weights.dtype == np.float32
    np.testing.assert_array_equal(weights, (labels != PAD).astype("float32"))


def test_trim_padding_cuts_to_the_longest_row():
    pre = make(80, 80)
    x, labels, _ = run(pre, SOURCES[:1] + SOURCES[2:], TARGETS[:1] + TARGETS[2:])
    source_vocab, target_vocab = vocabularies()
    longest_source = max(len(p) for p in pieces(source_vocab, [SOURCES[0], SOURCES[2]]))
    longest_target = max(len(p) for p in pieces(target_vocab, [TARGETS[0], TARGETS[2]]))
    assert x["encoder_token_ids"].shape == (2, longest_source + 1)  # + [END]
    assert labels.shape == (2, longest_target + 1)
    # Some row reaches the last column; no column is padding in every row.
    assert ((labels != PAD).any(axis=0)).all()
    assert ((x["encoder_token_ids"] != PAD).any(axis=0)).all()


def test_truncation_keeps_end_token():
    pre = make(6, 5)
    with pytest.warns(UserWarning, match="truncated"):
        x, labels, weights = run(pre)
    source, decoder, want_labels = expected(SOURCES, TARGETS, 6, 5)
    np.testing.assert_array_equal(x["encoder_token_ids"], source)
    np.testing.assert_array_equal(labels, want_labels)
    assert x["encoder_token_ids"].shape == (3, 6) and labels.shape == (3, 5)
    assert (labels[:, -1] == END).all() and (x["encoder_token_ids"][:, -1] == END).all()
    assert weights.sum() == 15


def test_source_only():
    pre = make()
    features = pre(tf.constant(SOURCES))
    assert list(features) == ["encoder_token_ids"]
    np.testing.assert_array_equal(
        features["encoder_token_ids"].numpy(), expected(SOURCES, TARGETS, 80, 80)[0]
    )


def test_inside_tf_data():
    pre = make()
    dataset = tf.data.Dataset.from_tensor_slices((SOURCES, TARGETS)).batch(3).map(pre)
    x, labels, weights = next(iter(dataset))
    assert x["decoder_token_ids"].shape.rank == 2
    np.testing.assert_array_equal(labels.numpy(), run(pre)[1])


def test_lowercase():
    pre = make(lowercase=True)
    a = pre(tf.constant(["JESUS WEPT."]))["encoder_token_ids"].numpy()
    b = pre(tf.constant(["jesus wept."]))["encoder_token_ids"].numpy()
    np.testing.assert_array_equal(a, b)
    assert UNK not in a


def test_detokenize_stops_at_end_and_glues_punctuation():
    pre = make(lowercase=True)
    tokenizer = pre.target_tokenizer
    ids = list(map(int, tokenizer(tf.constant(["y lloró jesús ."]))[0]))
    # Reference by hand: the raw WordPiece join has a space before the period.
    raw = tokenizer.detokenize(tf.constant([ids], "int32"))[0]
    raw = raw.decode() if isinstance(raw, bytes) else raw
    assert raw == "y lloró jesús ."
    garbage = ids[:3]
    rows = np.array(
        [ids + [END] + garbage + [PAD] * 2, [START] + ids + [PAD] * 2 + [END, 9, 9]],
        "int32",
    )
    assert pre.detokenize(rows) == ["y lloró jesús.", "y lloró jesús."]
    question = list(map(int, tokenizer(tf.constant(["¿ quién es él ?"]))[0]))
    assert pre.detokenize(np.array([question + [END]])) == ["¿quién es él?"]
    assert pre.detokenize(np.array([[END, 5, 6]])) == [""]


@pytest.mark.parametrize(
    "raw, glued",
    [
        ("y fue a Beth - lehem de Judá .", "y fue a Beth-lehem de Judá."),
        ("Tubal - Caín , hijo", "Tubal-Caín, hijo"),
        ("« ¿ quién ? »", "«¿quién?»"),
        ("- uno -", "- uno -"),  # a hyphen not between two words stays
    ],
)
def test_glue_punctuation(raw, glued):
    assert glue_punctuation(raw) == glued


def test_token_labels():
    pre = make()
    x, labels, _ = run(pre, SOURCES[:1], TARGETS[:1])
    source_vocab, target_vocab = vocabularies()
    ids = x["encoder_token_ids"][0]
    assert pre.source_tokens(ids) == [source_vocab[i] for i in ids]
    assert pre.target_tokens(labels[0]) == [target_vocab[i] for i in labels[0]]
    assert pre.target_tokens(labels[0])[-1] == "[END]"
    assert (pre.target_start_id, pre.target_end_id, pre.target_pad_id) == (
        START,
        END,
        PAD,
    )


def test_serialization_round_trip(tmp_path):
    pre = make(20, 16, lowercase=True, trim_padding=False)
    config = pre.get_config()
    assert config["source_tokenizer"]["config"]["vocabulary"] is None  # An asset.
    pre.save_assets(str(tmp_path))
    for name in ("source_tokenizer", "target_tokenizer"):
        assert os.path.isfile(tmp_path / name / "vocabulary.txt")
    source_vocab, target_vocab = vocabularies(True)
    assert vocabulary.load_vocabulary(
        tmp_path / "target_tokenizer" / "vocabulary.txt"
    ) == (list(target_vocab))

    restored = TranslationPreprocessor.from_config(config)
    with pytest.raises(ValueError, match="source_tokenizer has no vocabulary yet"):
        restored(tf.constant(SOURCES))
    restored.load_assets(str(tmp_path))
    assert restored.source_tokenizer.get_vocabulary() == list(source_vocab)
    assert restored.target_tokenizer.get_vocabulary() == list(target_vocab)
    assert (restored.source_sequence_length, restored.target_sequence_length) == (
        20,
        16,
    )
    assert restored.lowercase and not restored.trim_padding
    for a, b in zip(run(pre), run(restored)):
        if isinstance(a, dict):
            for key in a:
                np.testing.assert_array_equal(a[key], b[key])
        else:
            np.testing.assert_array_equal(a, b)

    # Registered: Keras rebuilds it without custom_objects.
    again = keras.saving.deserialize_keras_object(
        keras.saving.serialize_keras_object(pre)
    )
    assert type(again) is TranslationPreprocessor
    with pytest.raises(ValueError, match="Missing vocabulary folder"):
        again.load_assets(str(tmp_path / "elsewhere"))


def test_vocabulary_file_and_tokenizer_objects(tmp_path):
    source_vocab, target_vocab = vocabularies()
    path = tmp_path / "target.txt"
    vocabulary.save_vocabulary(target_vocab, path)
    tokenizer = vocabulary.tokenizer(source_vocab, lowercase=False)
    pre = TranslationPreprocessor(tokenizer, str(path), 80, 80)
    assert pre.source_tokenizer is tokenizer
    for a, b in zip(expected(SOURCES, TARGETS, 80, 80), run(pre)[0].values()):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"source_sequence_length": 1}, "source_sequence_length"),
        ({"target_sequence_length": "8"}, "target_sequence_length"),
    ],
)
def test_bad_lengths(kwargs, name):
    source_vocab, target_vocab = vocabularies()
    with pytest.raises(ValueError, match=f"`{name}` must be an int >= 2"):
        TranslationPreprocessor(source_vocab, target_vocab, **kwargs)


def test_alignment_crops_to_real_tokens_and_labels_them():
    pre = make(lowercase=True)
    source = pre(tf.constant(["jesus wept"]))["encoder_token_ids"][0].numpy()
    source_length = int((source != PAD).sum())
    target = list(map(int, pre.target_tokenizer(tf.constant(["y lloró"]))[0]))
    generated = np.array(target + [END, 7, 7], "int32")  # after [END]: cut
    weights = np.random.default_rng(0).uniform(size=(2, len(generated), len(source)))
    record = pre.alignment(source, generated, weights)
    assert record["weights"].shape == (2, len(target) + 1, source_length)
    np.testing.assert_array_equal(
        record["weights"], weights[:, : len(target) + 1, :source_length]
    )
    assert record["target_tokens"][-1] == "[END]"
    assert record["source_tokens"] == pre.source_tokens(source[:source_length])
    assert "[PAD]" not in record["source_tokens"]


def truncated_counts(pre, sources, targets=None):
    """The (side, count, length) of each truncation warning of one call."""
    import re
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pre(tf.constant(sources), None if targets is None else tf.constant(targets))
    found = []
    for warning in caught:
        assert warning.category is TruncatedWarning  # a UserWarning
        match = re.match(
            r"(\d+) of (\d+) (source|target) sentences were longer than "
            r"(source|target)_sequence_length=(\d+)",
            str(warning.message),
        )
        assert match, str(warning.message)
        found.append((match[3], int(match[1]), int(match[5])))
    return found


def test_truncation_warning_names_the_count_and_the_length():
    source_vocab, target_vocab = vocabularies()
    # Independent count: sentences whose pieces + specials exceed the room.
    source_lengths = [len(p) + 1 for p in pieces(source_vocab, SOURCES)]
    target_lengths = [len(p) + 1 for p in pieces(target_vocab, TARGETS)]
    limit = sorted(source_lengths)[1]  # the shortest two fit, at most
    pre = make(limit, limit)
    want_source = sum(n > limit for n in source_lengths)
    want_target = sum(n > limit for n in target_lengths)
    assert want_source >= 1
    found = truncated_counts(pre, SOURCES, TARGETS)
    assert ("source", want_source, limit) in found
    if want_target:
        assert ("target", want_target, limit) in found
    assert truncated_counts(pre, SOURCES) == [("source", want_source, limit)]
    # Long enough: silent.
    assert truncated_counts(make(80, 80), SOURCES, TARGETS) == []


def test_truncation_warning_names_the_length_that_keeps_them_whole():
    import re
    import warnings

    source_vocab, target_vocab = vocabularies()
    # Independent: the longest row's pieces plus its [END] (or [START]).
    longest = {
        "source": max(len(p) for p in pieces(source_vocab, SOURCES)) + 1,
        "target": max(len(p) for p in pieces(target_vocab, TARGETS)) + 1,
    }
    pre = make(4, 4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pre(tf.constant(SOURCES), tf.constant(TARGETS))
    needs = {}
    for warning in caught:
        match = re.search(
            r"needs (source|target)_sequence_length=(\d+)\)", str(warning.message)
        )
        assert match, str(warning.message)
        needs[match[1]] = int(match[2])
    assert needs == longest
    pre.source_sequence_length = needs["source"]
    pre.target_sequence_length = needs["target"]
    assert truncated_counts(pre, SOURCES, TARGETS) == []
    pre.target_sequence_length = needs["target"] - 1
    assert truncated_counts(pre, SOURCES, TARGETS) == [
        ("target", 1, needs["target"] - 1)
    ]


def test_sequence_length_is_settable_and_raising_it_stops_truncation():
    source_vocab, target_vocab = vocabularies()
    pre = TranslationPreprocessor(source_vocab, target_vocab, sequence_length=4)
    assert (pre.source_sequence_length, pre.target_sequence_length) == (4, 4)
    assert truncated_counts(pre, SOURCES[1:2])
    cut = pre(tf.constant(SOURCES[1:2]))["encoder_token_ids"].numpy()
    assert cut.shape == (1, 4)
    pre.sequence_length = 80
    assert (pre.source_sequence_length, pre.target_sequence_length) == (80, 80)
    assert pre.sequence_length == 80
    assert truncated_counts(pre, SOURCES, TARGETS) == []
    whole = pre(tf.constant(SOURCES[1:2]))["encoder_token_ids"].numpy()
    assert whole.shape[1] == len(pieces(source_vocab, SOURCES[1:2])[0]) + 1
    pre.source_sequence_length = 5
    assert pre(tf.constant(SOURCES[1:2]))["encoder_token_ids"].shape == (1, 5)
    # The raised lengths are part of the config.
    config = pre.get_config()
    assert (config["source_sequence_length"], config["target_sequence_length"]) == (
        5,
        80,
    )
    for name, value in (("sequence_length", 1), ("target_sequence_length", 2.0)):
        with pytest.raises(ValueError, match=f"`{name}` must be an int >= 2"):
            setattr(pre, name, value)


def test_truncation_inside_tf_data_is_silent():
    import warnings

    pre = make(4, 4)
    pairs = tf.data.Dataset.from_tensor_slices((SOURCES, TARGETS)).batch(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x, labels, _ = next(iter(pairs.map(pre)))
    assert x["encoder_token_ids"].shape == (3, 4) and labels.shape == (3, 4)


def test_generation_ids_are_the_target_ids():
    pre = make()
    assert (pre.start_id, pre.end_id, pre.pad_id) == (START, END, PAD)
    assert (pre.start_id, pre.end_id, pre.pad_id) == (
        pre.target_tokenizer.token_to_id("[START]"),
        pre.target_tokenizer.token_to_id("[END]"),
        pre.target_tokenizer.token_to_id("[PAD]"),
    )
    assert pre.source_pad_id == PAD
