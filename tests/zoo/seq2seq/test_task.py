"""`Seq2Seq` (the task): overfitting real pairs, presets, masking, decoding."""

import functools

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_attention.decoding import BeamSearch, GreedySearch
from zoo.base.task import Task
from zoo.data import bible, parallel_text, vocabulary
from zoo.seq2seq import Seq2Seq
from zoo.translation import TranslationPreprocessor, TranslationTask, corpus_scores

pytestmark = pytest.mark.tensorflow_only

PAD, UNK, START, END = 0, 1, 2, 3
SOURCES = ["jesus wept", "god is love", "in the beginning was the word", "light"]
TARGETS = ["y lloró jesús", "dios es amor", "en el principio era el verbo", "luz"]


@functools.lru_cache(maxsize=1)
def vocabularies():
    return (
        vocabulary.train_wordpiece(SOURCES, 200),
        vocabulary.train_wordpiece(TARGETS, 200),
    )


def tiny(seed=0, **kwargs):
    source_vocab, target_vocab = vocabularies()
    keras.utils.set_random_seed(seed)
    config = dict(embedding_dim=12, units=12, dropout=0.0, cell="gru")
    config.update(kwargs)
    preprocessor = TranslationPreprocessor(
        source_vocab, target_vocab, 40, 40, lowercase=True
    )
    return Seq2Seq(
        len(source_vocab), len(target_vocab), preprocessor=preprocessor, **config
    )


def randomize(model, seed=1, scale=0.5):
    """Weights no fresh model has, so a reload must really read them."""
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        variable.assign(rng.normal(0, scale, variable.shape).astype("float32"))


def never_emit(model, token_ids):
    """Makes some tokens (e.g. [PAD]) impossible outputs of the projection."""
    bias = np.array(model.projection.bias)
    bias[list(token_ids)] = -1e4
    model.projection.bias.assign(bias)


def prepared(model, sources=SOURCES, targets=TARGETS):
    x, y, w = model.preprocessor(tf.constant(sources), tf.constant(targets))
    return {k: np.array(v) for k, v in x.items()}, np.array(y), np.array(w)


def pad_columns(array, count):
    return np.concatenate([array, np.zeros((len(array), count), array.dtype)], 1)


def log_softmax(logits):
    logits = logits - logits.max(-1, keepdims=True)
    return logits - np.log(np.exp(logits).sum(-1, keepdims=True))


# Built once a module: each new model traces its own decoding and predict
# functions. The tests below only read them.


@pytest.fixture(scope="module")
def fresh():
    """The tiny model as built."""
    return tiny()


@pytest.fixture(scope="module")
def decoder():
    """The tiny model with random weights that never emits [PAD], [UNK], [START]."""
    model = tiny()
    randomize(model)
    never_emit(model, [PAD, UNK, START])
    return model


# === Overfitting real data ===


@pytest.mark.slow
def test_overfits_twenty_real_pairs(tmp_path):
    pairs = parallel_text.read_tsv(bible.sample_path("train"))
    # The 20 shortest pairs (by Spanish length) keep the RNN steps few.
    pairs = sorted(pairs, key=lambda p: (len(p[1]), p))[:20]
    sources, targets = [p[0] for p in pairs], [p[1] for p in pairs]
    source_vocab = vocabulary.train_wordpiece(sources, 300, lowercase=False)
    target_vocab = vocabulary.train_wordpiece(targets, 300, lowercase=False)
    preprocessor = TranslationPreprocessor(source_vocab, target_vocab, 64, 64)
    keras.utils.set_random_seed(0)
    model = Seq2Seq(
        len(source_vocab),
        len(target_vocab),
        embedding_dim=64,
        units=64,
        cell="gru",
        dropout=0.0,
        preprocessor=preprocessor,
    )
    model.compile(
        keras.optimizers.Adam(0.01),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        weighted_metrics=["accuracy"],
    )
    # Tokenized once: re-tokenizing 20 sentences every epoch costs more than
    # the training step here (raw-text `fit` is tested below).
    x, y, w = preprocessor(tf.constant(sources), tf.constant(targets))
    assert y.shape[1] < 64  # Nothing was truncated.
    # lr 0.01 x 60 epochs reaches BLEU 100 for seeds 0-5 (0.02 x 40 did not).
    model.fit(x, y, sample_weight=w, batch_size=10, epochs=60, verbose=0)
    translations = model.translate(sources, beam_width=1)
    scores = corpus_scores(translations, targets)
    assert scores["bleu"] > 90, (scores, translations[:3], targets[:3])

    # A trained, compiled model (optimizer state in the weights file) reloads
    # exactly.
    model.save_to_preset(str(tmp_path), metadata={"metrics": scores})
    loaded = Seq2Seq.from_preset(str(tmp_path))
    np.testing.assert_array_equal(np.array(model(x)), np.array(loaded(x)))
    assert loaded.translate(sources[:5], beam_width=1) == translations[:5]
    assert loaded.preset_metadata["metrics"]["bleu"] == scores["bleu"]


# === Presets ===


@pytest.mark.parametrize(
    "style, score, cell, bidirectional",
    [
        ("bahdanau", "additive", "gru", True),
        ("luong", "general", "lstm", True),
        ("luong", "dot", "gru", False),
        ("bahdanau", "concat", "lstm", False),
    ],
)
def test_preset_round_trip_is_exact(tmp_path, style, score, cell, bidirectional):
    model = tiny(style=style, score=score, cell=cell, bidirectional=bidirectional)
    randomize(model)
    x, _, _ = prepared(model)
    logits = np.array(model(x))
    greedy = model.translate(SOURCES, beam_width=1, max_length=6)
    beam = model.translate(SOURCES, beam_width=2, max_length=6)
    meta = model.save_to_preset(str(tmp_path), metadata={"metrics": {"bleu": 1.5}})
    assert meta["parameters"] == model.count_params()

    for loader in (Seq2Seq, Task):
        keras.utils.set_random_seed(99)  # Fresh weights differ from saved ones.
        loaded = loader.from_preset(str(tmp_path))
        assert type(loaded) is Seq2Seq
        assert (loaded.style, loaded.score, loaded.cell) == (style, score, cell)
        assert loaded.preset_metadata["metrics"] == {"bleu": 1.5}
        np.testing.assert_array_equal(np.array(loaded(x)), logits)
        for a, b in (
            (model.preprocessor.source_tokenizer, loaded.preprocessor.source_tokenizer),
            (model.preprocessor.target_tokenizer, loaded.preprocessor.target_tokenizer),
        ):
            assert a.get_vocabulary() == b.get_vocabulary()
    # Both loaders gave the same model; it decodes as the saved one (each
    # loaded model traces its own searches, so one of them is enough).
    assert loaded.translate(SOURCES, beam_width=1, max_length=6) == greedy
    assert loaded.translate(SOURCES, beam_width=2, max_length=6) == beam


def test_config_round_trip():
    model = tiny(style="luong", score="general", encoder_layers=2, window=2)
    config = model.get_config()
    rebuilt = Seq2Seq.from_config(config)
    assert {k: v for k, v in rebuilt.get_config().items() if k != "preprocessor"} == {
        k: v for k, v in config.items() if k != "preprocessor"
    }
    assert rebuilt.count_params() == model.count_params()
    again = keras.saving.deserialize_keras_object(
        keras.saving.serialize_keras_object(model)
    )
    assert type(again) is Seq2Seq
    assert type(again.preprocessor) is TranslationPreprocessor


# === Training: masking and gradients ===


@pytest.mark.parametrize(
    "style, score", [("bahdanau", "additive"), ("luong", "general")]
)
def test_every_weight_gets_a_gradient(style, score):
    model = tiny(style=style, score=score, cell="lstm")
    x, y, w = prepared(model)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    with tf.GradientTape() as tape:
        loss = loss_fn(y, model(x, training=True), sample_weight=w)
    grads = tape.gradient(loss, model.trainable_variables)
    for variable, grad in zip(model.trainable_variables, grads):
        assert grad is not None, variable.path
        assert np.abs(np.array(tf.convert_to_tensor(grad))).sum() > 0, variable.path


def test_masked_loss_ignores_padding():
    model = tiny()
    randomize(model, scale=0.3)
    model.compile(
        keras.optimizers.SGD(0.1),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        weighted_metrics=["accuracy"],
    )
    x, y, w = prepared(model)
    assert (w == 0).any()  # The batch has padding.
    # NumPy reference: mean cross-entropy and accuracy over real tokens.
    logits = np.array(model(x)).astype("float64")
    real = y != PAD
    token_ce = -np.take_along_axis(log_softmax(logits), y[..., None], -1)[..., 0]
    expected_loss = token_ce[real].mean()
    expected_accuracy = (logits.argmax(-1) == y)[real].mean()

    def evaluate(x, y, w=None):
        return model.evaluate(
            x, y, sample_weight=w, batch_size=len(y), verbose=0, return_dict=True
        )

    base = evaluate(x, y, w)
    assert base["loss"] == pytest.approx(expected_loss, rel=1e-5)
    assert base["accuracy"] == pytest.approx(expected_accuracy, abs=1e-6)
    padded = evaluate(
        {
            "encoder_token_ids": pad_columns(x["encoder_token_ids"], 5),
            "decoder_token_ids": pad_columns(x["decoder_token_ids"], 7),
        },
        pad_columns(y, 7),
        pad_columns(w, 7),
    )
    assert padded["loss"] == pytest.approx(base["loss"], rel=1e-5)
    assert padded["accuracy"] == pytest.approx(base["accuracy"], abs=1e-6)
    # The target mask on the logits alone already excludes padding.
    unweighted = evaluate(x, y)
    assert unweighted["loss"] == pytest.approx(base["loss"], rel=1e-5)


def test_fit_accepts_raw_and_prepared_inputs():
    model = tiny()
    model.compile(
        keras.optimizers.SGD(0.5),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    initial = model.get_weights()
    pairs = tf.data.Dataset.from_tensor_slices((SOURCES, TARGETS))
    x, y, w = prepared(model)  # Padded to the longest of all four pairs.
    runs = {
        "lists": lambda: model.fit(
            SOURCES, TARGETS, batch_size=2, shuffle=False, verbose=0
        ),
        "unbatched": lambda: model.fit(pairs, batch_size=2, verbose=0),
        "batched": lambda: model.fit(pairs.batch(2), verbose=0),
        "prepared": lambda: model.fit(
            x, y, sample_weight=w, batch_size=2, shuffle=False, verbose=0
        ),
    }
    trained = {}
    for name, run in runs.items():
        model.set_weights(initial)
        history = run()
        assert np.isfinite(history.history["loss"][0]), name
        trained[name] = model.get_weights()
    # The same two batches: the same update whatever the input form (and
    # however much padding each batch carries).
    assert not np.allclose(trained["lists"][0], initial[0])
    for name in ("unbatched", "batched", "prepared"):
        for a, b in zip(trained["lists"], trained[name]):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6, err_msg=name)


# === Decoding ===


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(style="bahdanau", score="additive", cell="gru"),
        dict(style="luong", score="general", cell="lstm", encoder_layers=2),
        dict(style="bahdanau", score="additive", bidirectional=False, window=1),
    ],
)
def test_next_matches_teacher_forcing(kwargs):
    model = tiny(**kwargs)
    randomize(model, scale=0.3)
    x, _, _ = prepared(model)
    logits = np.array(model(x))
    decoder_ids = x["decoder_token_ids"]
    cache = model.encode(x["encoder_token_ids"], decoder_ids.shape[1])
    source_lengths = (x["encoder_token_ids"] != PAD).sum(1)
    for t in range(decoder_ids.shape[1]):
        step_logits, attention, cache = model.next(decoder_ids, cache, t + 1)
        real = decoder_ids[:, t] != PAD
        np.testing.assert_allclose(
            np.array(step_logits)[real], logits[real, t], rtol=1e-4, atol=1e-5
        )
        attention = np.array(attention)
        for b in range(len(attention)):  # No attention on source padding.
            assert (attention[b, source_lengths[b] :] == 0).all()


def test_greedy_equals_beam_width_one_and_brute_force():
    model = tiny(style="luong", score="general")
    randomize(model)
    never_emit(model, [PAD, UNK, START])
    max_length = 6
    ids = model.preprocessor(tf.constant(SOURCES[:2]))["encoder_token_ids"]
    prompt = np.zeros((2, max_length + 1), "int32")
    prompt[:, 0] = START

    def search(method):
        return np.array(
            method(
                model.next,
                prompt,
                cache=model.encode(ids, max_length),
                index=1,
                stop_token_ids=[END],
            )
        )

    greedy = search(GreedySearch())
    np.testing.assert_array_equal(
        search(BeamSearch(beam_width=1, length_penalty=0.0)), greedy
    )
    # Brute force: re-run the whole functional model on each prefix.
    for b in range(2):
        prefix = [START]
        while len(prefix) <= max_length and prefix[-1] != END:
            step = model(
                {
                    "encoder_token_ids": np.array(ids[b : b + 1]),
                    "decoder_token_ids": np.array([prefix], "int32"),
                }
            )
            prefix.append(int(np.argmax(np.array(step)[0, -1])))
        expected = prefix + [PAD] * (max_length + 1 - len(prefix))
        assert greedy[b].tolist() == expected
    translations = model.translate(SOURCES[:2], beam_width=1, max_length=max_length)
    assert translations == model.preprocessor.detokenize(greedy[:, 1:])


def test_translate_return_types_and_attention(decoder):
    model = decoder
    pre = model.preprocessor
    single = model.translate("jesus wept", beam_width=2, max_length=6)
    assert isinstance(single, str)
    many = model.translate(SOURCES[:2], beam_width=2, max_length=6)
    assert isinstance(many, list) and len(many) == 2 and many[0] == single
    assert model.translate([], max_length=6) == []

    texts, alignments = model.translate(
        SOURCES, beam_width=2, max_length=6, return_attention=True
    )
    assert len(texts) == len(alignments) == len(SOURCES)
    source_vocab, target_vocab = vocabularies()
    for text, source, alignment in zip(texts, SOURCES, alignments):
        weights = alignment["weights"]
        target_tokens = alignment["target_tokens"]
        # Source labels: the sentence's pieces and [END].
        pieces = pre.source_tokenizer(tf.constant([source]))[0]
        assert alignment["source_tokens"] == [source_vocab[int(i)] for i in pieces] + [
            "[END]"
        ]
        assert weights.shape == (len(target_tokens), len(alignment["source_tokens"]))
        assert (weights >= 0).all()
        np.testing.assert_allclose(weights.sum(axis=1), 1.0, atol=1e-5)
        # The labels are the translation's own tokens.
        ids = np.array([[target_vocab.index(t) for t in target_tokens]])
        assert pre.detokenize(ids) == [text]
    text, alignment = model.translate("light", max_length=6, return_attention=True)
    assert isinstance(text, str) and isinstance(alignment, dict)


def test_translate_with_coverage_penalty(decoder):
    model = decoder
    plain = model.translate(SOURCES, beam_width=3, max_length=5)
    covered = model.translate(SOURCES, beam_width=3, max_length=5, coverage_penalty=1)
    assert all(isinstance(t, str) for t in plain + covered)


def test_translate_needs_a_preprocessor():
    source_vocab, target_vocab = vocabularies()
    model = Seq2Seq(len(source_vocab), len(target_vocab), 8, 8)
    with pytest.raises(ValueError, match="needs a preprocessor"):
        model.translate("jesus wept")


@pytest.mark.parametrize(
    "kwargs, name, error",
    [
        ({"source_vocabulary_size": 0}, "source_vocabulary_size", ValueError),
        ({"target_vocabulary_size": 2.5}, "target_vocabulary_size", TypeError),
        ({"embedding_dim": True}, "embedding_dim", TypeError),
        ({"units": -3}, "units", ValueError),
        ({"encoder_layers": 0}, "encoder_layers", ValueError),
        ({"cell": "rnn"}, "cell", ValueError),
        ({"style": "transformer"}, "style", ValueError),
        ({"score": "nope"}, "score", ValueError),
        ({"dropout": 1.5}, "dropout", ValueError),
        ({"window": 0}, "window", ValueError),
        ({"window": 2, "local": "x"}, "local", ValueError),
    ],
)
def test_bad_arguments(kwargs, name, error):
    config = dict(
        source_vocabulary_size=10, target_vocabulary_size=10, embedding_dim=4, units=4
    )
    config.update(kwargs)
    with pytest.raises(error, match=f"{name}"):
        Seq2Seq(**config)


# === The task's Keras surface and the generation front end ===


def test_is_a_translation_task_built_on_its_backbone(fresh):
    model = fresh
    assert isinstance(model, TranslationTask)
    assert model.backbone.target_vocabulary_size == model.target_vocabulary_size
    rebuilt = Seq2Seq(backbone=model.backbone, preprocessor=model.preprocessor)
    config = {k: v for k, v in rebuilt.get_config().items() if k != "name"}
    assert config == {k: v for k, v in model.get_config().items() if k != "name"}
    with pytest.raises(TypeError, match="backbone="):
        Seq2Seq(backbone="lstm")


def test_mixed_bfloat16_comes_back_from_config():
    model = tiny(dtype="mixed_bfloat16")
    assert model.dtype_policy.name == "mixed_bfloat16"
    rebuilt = Seq2Seq.from_config(model.get_config())
    assert rebuilt.dtype_policy.name == "mixed_bfloat16"
    assert rebuilt.backbone.dtype_policy.name == "mixed_bfloat16"
    assert rebuilt.projection.dtype_policy.name == "mixed_bfloat16"
    # float32 attention and finite logits for the search.
    x, _, _ = prepared(model)  # (a config holds no vocabulary)
    _, attention, _ = rebuilt.next(
        x["decoder_token_ids"], rebuilt.encode(x["encoder_token_ids"], 4), 1
    )
    assert keras.backend.standardize_dtype(attention.dtype) == "float32"


@pytest.mark.parametrize(
    "raw",
    [
        "jesus wept",
        SOURCES,
        tuple(SOURCES),
        np.array(SOURCES),
        tf.constant(SOURCES),
        tf.data.Dataset.from_tensor_slices(SOURCES),
    ],
    ids=["str", "list", "tuple", "numpy", "tensor", "dataset"],
)
def test_predict_on_source_sentences_says_to_call_translate(fresh, raw):
    model = fresh
    weights = model.get_weights()
    with pytest.raises(ValueError, match=r"call `model.translate\(texts\)`"):
        model.predict(raw)
    # The model is untouched and still predicts prepared inputs.
    for a, b in zip(weights, model.get_weights()):
        np.testing.assert_array_equal(a, b)
    x, y, _ = prepared(model)
    logits = model.predict(x, verbose=0)
    assert logits.shape == (*y.shape, model.target_vocabulary_size)


def test_generate_returns_start_token_and_the_attention_of_its_tokens(decoder):
    model = decoder
    ids = np.array(model.preprocessor(tf.constant(SOURCES))["encoder_token_ids"])
    tokens, attention = model.generate(
        ids, beam_width=2, max_length=5, return_attention=True
    )
    assert tokens.shape == (len(SOURCES), 6) and (tokens[:, 0] == START).all()
    assert attention.shape == (len(SOURCES), 5, ids.shape[1])
    # Independent reference: `next` stepped by hand over the same tokens.
    cache = model.encode(ids, 5)
    for t in range(1, 6):
        _, expected, cache = model.next(tokens, cache, t)
        np.testing.assert_allclose(attention[:, t - 1], np.asarray(expected), atol=1e-6)
    np.testing.assert_allclose(attention.sum(-1), 1.0, atol=1e-5)
    assert (attention[ids[:, None, :].repeat(5, 1) == PAD] == 0).all()


def test_translate_keeps_the_input_order_across_length_sorted_batches(decoder):
    model = decoder
    one_by_one = [model.translate(s, beam_width=1, max_length=6) for s in SOURCES]
    assert model.translate(SOURCES, beam_width=1, max_length=6, batch_size=3) == (
        one_by_one
    )
