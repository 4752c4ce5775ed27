"""`benchmarks/ctranslate2_conversion.py`: CTranslate2 computes what ours does.

A tiny pre-norm `zoo.Transformer` with every weight drawn at random (layer
norms and biases included, so a misplaced one shows) is converted, and
CTranslate2's per-token log-probabilities of a target and its greedy
outputs are compared with the Keras model's. CTranslate2 is a benchmark
dependency (the `bench` extra), not in the `dev` extra that `make test`
installs: without it these tests are skipped (in CI too).
"""

import os
import sys

import keras
import numpy as np
import pytest

import zoo

ctranslate2 = pytest.importorskip("ctranslate2")
pytestmark = pytest.mark.tensorflow_only  # the preprocessor's tokenizer ops

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

from ctranslate2_conversion import (  # noqa: E402
    CTranslate2Translator,
    convert,
    gnmt_score,
)

WORDS = ["in", "the", "beginning", "god", "light", "en", "el", "principio", "luz"]
VOCABULARY = ["[PAD]", "[UNK]", "[START]", "[END]", *WORDS]
END = VOCABULARY.index("[END]")


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """A random tiny translator and its conversion's directory."""
    keras.utils.set_random_seed(0)
    pre = zoo.TranslationPreprocessor(VOCABULARY, VOCABULARY, sequence_length=12)
    model = zoo.Transformer(
        vocabulary_size=len(VOCABULARY),
        num_layers=2,
        hidden_dim=16,
        intermediate_dim=32,
        num_heads=2,
        dropout=0.0,
        normalize_first=True,
        preprocessor=pre,
    )
    rng = np.random.default_rng(0)
    for weight in model.weights:
        weight.assign(rng.normal(0.0, 0.5, weight.shape).astype("float32"))
    return model, convert(model, tmp_path_factory.mktemp("ct2"))


def _sources(rng, count):
    """Random source ids, each ending with `[END]`, of different lengths."""
    return [
        [*rng.integers(4, len(VOCABULARY), rng.integers(1, 7)), END]
        for _ in range(count)
    ]


def _tokens(ids):
    return [VOCABULARY[i] for i in ids]


def _padded(rows):
    batch = np.zeros((len(rows), max(map(len, rows))), "int32")
    for b, row in enumerate(rows):
        batch[b, : len(row)] = row
    return batch


def test_log_probabilities_equal_ours(converted):
    model, directory = converted
    rng = np.random.default_rng(1)
    sources = _sources(rng, 6)
    targets = [list(rng.integers(4, len(VOCABULARY), 5)) for _ in sources]
    translator = ctranslate2.Translator(directory, compute_type="float32")
    scored = translator.score_batch(
        [_tokens(s) for s in sources], [_tokens(t) for t in targets]
    )
    logits = model.predict(
        {
            "encoder_token_ids": _padded(sources),
            "decoder_token_ids": np.array([[2, *t] for t in targets], "int32"),
        },
        verbose=0,
    )
    log_probs = keras.ops.convert_to_numpy(keras.ops.log_softmax(logits, axis=-1))
    for b, target in enumerate(targets):
        ours = [log_probs[b, i, token] for i, token in enumerate([*target, END])]
        np.testing.assert_allclose(scored[b].log_probs, ours, atol=1e-4)


def test_greedy_outputs_equal_ours(converted):
    model, directory = converted
    sources = _sources(np.random.default_rng(2), 8)
    ours = model.generate(_padded(sources), beam_width=1, max_length=10)
    translator = ctranslate2.Translator(directory, compute_type="float32")
    theirs = translator.translate_batch(
        [_tokens(s) for s in sources], beam_size=1, max_decoding_length=10
    )
    for row, result in zip(np.asarray(ours), theirs):
        generated = [VOCABULARY[i] for i in row[1:] if i != 0]
        expected = result.hypotheses[0] + (["[END]"] if END in row else [])
        assert generated == expected


@pytest.mark.filterwarnings("ignore:.*reached max_length")
def test_translator_speaks_text_like_translate(converted):
    model, directory = converted
    texts = ["in the beginning", "god light", "the light"]
    translator = CTranslate2Translator(directory, model.preprocessor, "float32")
    assert translator(texts, beam_width=1, max_length=10) == model.translate(
        texts, beam_width=1, max_length=10
    )


def test_gnmt_score_is_the_beam_searchs():
    # (5 + 7) / 6 = 2: the log-probability halves at alpha 1, quarters at 2.
    assert gnmt_score(-4.0, 7, 1.0) == -2.0
    assert gnmt_score(-4.0, 7, 2.0) == -1.0
    assert gnmt_score(-4.0, 7, 0.0) == -4.0
