"""`export_translator`: a translation SavedModel that runs without the zoo.

Tiny `Seq2Seq` and `Transformer` models (random weights, so that they stop
at different lengths) and the shipped Transformer preset are exported; a
fresh process where `zoo`, `keras_attention`, keras-hub and Keras cannot be
imported (`zoo.serving.export.run_without_zoo`) loads each export and calls its
signatures. The translations must equal `translate`'s exactly, for greedy
and beam search, on a batch with an empty sentence and one longer than the
preprocessor's source length (cut the same way, and flagged
`input_truncated`); the scores must equal those of the same search run
eagerly in this process, to float rounding, and `output_truncated` flag
the outputs the search stopped at `max_length`.
"""

import inspect
import json
import os
import sys
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

from zoo import registry
from zoo.base.generation import make_search
from zoo.data import bible, parallel_text
from zoo.serving import export as zoo_export
from zoo.translation import glue_punctuation
from zoo.translation.export import export_translator, glue_punctuation_graph

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import tiny_models  # noqa: E402

pytestmark = pytest.mark.tensorflow_only

SOURCE_LENGTH = 16
MAX_LENGTH = 12
WIDTHS = (1, 3)
PRESET = "transformer_bible_en_es"
#: The translation families (the registry's), each with a tiny model here.
TRANSLATORS = [family.name for family in registry.families("translation")]

# Loads exports in the zoo-less process, calls their signatures and prints
# one JSON line: `{name: {label: {"translation": [...], "score": [...],
# "input_truncated": [...], "output_truncated": [...]}}}`.
CHILD = """
import json
import sys

import tensorflow as tf

{register_text_ops}

register_text_ops()
paths, texts, widths, max_length = json.loads({arguments!r})
hidden = []
for name in ("zoo", "keras_attention", "keras_hub", "keras"):
    try:
        __import__(name)
    except ImportError:
        hidden.append(name)


def plain(outputs):
    return {{
        "translation": [t.decode("utf-8") for t in outputs["translation"].numpy()],
        "score": outputs["score"].numpy().tolist(),
        "input_truncated": outputs["input_truncated"].numpy().tolist(),
        "output_truncated": outputs["output_truncated"].numpy().tolist(),
    }}


answers = {{"hidden": hidden}}
for name, path in paths.items():
    model = tf.saved_model.load(path)
    text = tf.constant(texts)
    answer = {{"signatures": sorted(model.signatures)}}
    answer["serving_default"] = plain(model.signatures["serving_default"](text=text))
    for width in widths:
        answer[f"beam{{width}}"] = plain(
            model.signatures["translate"](
                text=text,
                beam_width=tf.constant(width),
                max_length=tf.constant(max_length),
            )
        )
    answer["empty"] = plain(
        model.signatures["serving_default"](text=tf.constant([], tf.string))
    )
    answers[name] = answer
loaded = sorted(
    n for n in sys.modules if n.split(".")[0] in ("zoo", "keras_attention", "keras_hub", "keras")
)
answers["loaded"] = loaded
print(json.dumps(answers))
"""


def run_exports(paths, texts, widths=(), max_length=MAX_LENGTH):
    """The answers of the exports at `paths` ({name: dir}), from a zoo-less process."""
    arguments = json.dumps(
        [{k: os.fspath(v) for k, v in paths.items()}, texts, list(widths), max_length]
    )
    code = CHILD.format(
        arguments=arguments,
        register_text_ops=inspect.getsource(zoo_export.register_text_ops),
    )
    out = zoo_export.run_without_zoo(code)
    return json.loads(out.strip().splitlines()[-1])


def texts():
    """Four real verses, an empty sentence and one longer than SOURCE_LENGTH."""
    sources = [pair[0] for pair in tiny_models.bible_pairs()]
    return sources[:4] + ["", " ".join(sources[4:8])]


def randomize(task, seed=1, scale=0.3, end_scale=3.0):
    """Random weights far from initialization: varied translations.

    Layer norms keep their initialization; the `[END]` slices of the
    weights with a target-vocabulary axis are scaled by `end_scale`, so
    that sentences stop at different lengths (the tiny `Seq2Seq` does; the
    tiny `Transformer`, whose output embedding is also its input one, still
    writes up to `MAX_LENGTH`).
    """
    pre = task.preprocessor
    vocabulary_size, end = pre.target_tokenizer.vocabulary_size(), pre.end_id
    rng = np.random.default_rng(seed)
    for variable in task.weights:
        if "norm" in variable.path:
            continue
        value = rng.normal(0, scale, variable.shape).astype("float32")
        for axis, size in enumerate(variable.shape):
            if size == vocabulary_size:
                index = [slice(None)] * len(variable.shape)
                index[axis] = end
                value[tuple(index)] *= end_scale
        variable.assign(value)


def tiny(name):
    task = {"seq2seq": tiny_models.seq2seq, "transformer": tiny_models.transformer}[
        name
    ](seed=0)
    task.preprocessor.source_sequence_length = SOURCE_LENGTH
    randomize(task)
    return task


def translate(task, sentences, beam_width):
    """`task.translate`, which must warn that the long sentence was cut."""
    with pytest.warns(UserWarning, match="longer than source_sequence_length"):
        return task.translate(sentences, beam_width=beam_width, max_length=MAX_LENGTH)


def search(task, sentences, beam_width):
    """Tokens and scores of `translate`'s search, run eagerly on the same ids."""
    pre = task.preprocessor
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        source = pre(tf.constant(sentences))["encoder_token_ids"]
    prompt = np.full((len(sentences), MAX_LENGTH + 1), pre.pad_id, "int32")
    prompt[:, 0] = pre.start_id
    search = make_search(beam_width, length_penalty=0.6, coverage_penalty=0.0)
    tokens, scores = search(
        task.next,
        prompt,
        cache=task.encode(source, MAX_LENGTH),
        index=1,
        stop_token_ids=[pre.end_id],
        pad_token_id=pre.pad_id,
        return_scores=True,
    )
    return keras.ops.convert_to_numpy(tokens), keras.ops.convert_to_numpy(scores)


@pytest.fixture(scope="module")
def tiny_exports(tmp_path_factory):
    folder = tmp_path_factory.mktemp("translators")
    tasks = {name: tiny(name) for name in TRANSLATORS}
    paths = {}
    for name, task in tasks.items():
        paths[name] = export_translator(
            task, folder / name, beam_width=3, max_length=MAX_LENGTH
        )
    return tasks, paths, run_exports(paths, texts(), WIDTHS)


def test_the_zoo_keras_and_keras_hub_are_hidden_from_the_export(tiny_exports):
    _, _, answers = tiny_exports
    assert answers["hidden"] == ["zoo", "keras_attention", "keras_hub", "keras"]
    assert answers["loaded"] == []
    for name in TRANSLATORS:
        assert answers[name]["signatures"] == [
            "sample",
            "serve",
            "serving_default",
            "translate",
        ]


@pytest.mark.parametrize("name", TRANSLATORS)
@pytest.mark.parametrize("beam_width", WIDTHS)
def test_translations_equal_translate_and_scores_the_search(
    tiny_exports, name, beam_width
):
    tasks, _, answers = tiny_exports
    task, answer = tasks[name], answers[name][f"beam{beam_width}"]
    wanted = translate(task, texts(), beam_width)
    assert answer["translation"] == wanted
    # Random weights still write something, and not one sentence for all.
    assert len(set(wanted)) > 2
    tokens, scores = search(task, texts(), beam_width)
    np.testing.assert_allclose(answer["score"], scores, rtol=1e-5)
    end = task.preprocessor.end_id
    if name == "seq2seq":  # Sentences that stop, at different lengths.
        stops = {row.tolist().index(end) if end in row else -1 for row in tokens}
        assert len(stops) > 2
    # Nothing cut silently: the long sentence is flagged, and every output
    # that reached MAX_LENGTH without `[END]`.
    lengths = [len(row) for row in task.preprocessor.source_tokenizer(texts())]
    cut = [length + 1 > SOURCE_LENGTH for length in lengths]
    assert not cut[4] and cut[5] and answer["input_truncated"][5]  # "", the long one
    assert answer["input_truncated"] == cut
    assert answer["output_truncated"] == [end not in row[1:] for row in tokens]


@pytest.mark.parametrize("name", TRANSLATORS)
def test_serving_default_is_the_exported_beam(tiny_exports, name):
    tasks, paths, answers = tiny_exports
    answer = answers[name]
    assert answer["serving_default"] == answer["beam3"]
    assert answer["empty"] == {
        "translation": [],
        "score": [],
        "input_truncated": [],
        "output_truncated": [],
    }
    description = zoo_export.read_metadata(paths[name])
    assert description["kind"] == "translation"
    assert description["model"] == type(tasks[name]).__name__
    assert (description["beam_width"], description["max_length"]) == (3, MAX_LENGTH)


def test_exported_search_settings_are_checked_when_called(tiny_exports):
    _, paths, _ = tiny_exports
    exported = zoo_export.load(paths["seq2seq"])
    out = exported("translate", text=["light"], beam_width=2, max_length=3)
    assert out["translation"].shape == out["score"].shape == (1,)
    with pytest.raises(tf.errors.InvalidArgumentError, match="beam_width"):
        exported("translate", text=["light"], beam_width=0, max_length=3)
    with pytest.raises(tf.errors.InvalidArgumentError, match="max_length"):
        exported("translate", text=["light"], beam_width=2, max_length=0)
    with pytest.raises(ValueError, match="takes"):
        exported("translate", text=["light"])
    with pytest.raises(ValueError, match="signature"):
        exported("caption", text=["light"])


def draw(exported, **options):
    """The `sample` signature on `texts()`: 2 per sentence, seed 3, no cut."""
    options = {
        "text": texts(),
        "max_length": MAX_LENGTH,
        "top_k": 0,
        "top_p": 1.0,
        "temperature": 1.0,
        "seed": 3,
        "num_return_sequences": 2,
        **options,
    }
    return exported("sample", **options)


@pytest.mark.parametrize("name", TRANSLATORS)
def test_the_sample_signature_draws_reproducibly_per_seed(tiny_exports, name):
    _, paths, answers = tiny_exports
    exported = zoo_export.load(paths[name])
    out = draw(exported, top_k=3, top_p=0.9, temperature=1.5)
    assert out["translation"].shape == out["score"].shape == (2 * len(texts()),)
    again = draw(exported, top_k=3, top_p=0.9, temperature=1.5)
    np.testing.assert_array_equal(again["translation"], out["translation"])
    assert (
        draw(exported, seed=4)["translation"] != draw(exported)["translation"]
    ).any()
    # A top-1 draw is the greedy search.
    greedy = [t.encode("utf-8") for t in answers[name]["beam1"]["translation"]]
    assert draw(exported, top_k=1, num_return_sequences=1)["translation"].tolist() == (
        greedy
    )
    assert list(out["input_truncated"]) == [
        cut for cut in answers[name]["beam1"]["input_truncated"] for _ in range(2)
    ]


@pytest.mark.parametrize(
    "field, value",
    [
        ("top_k", -1),
        ("top_p", 0.0),
        ("top_p", 1.5),
        ("temperature", 0.0),
        ("temperature", float("inf")),
        ("seed", -1),
        ("num_return_sequences", 0),
        ("num_return_sequences", 17),
        ("max_length", 0),
    ],
)
def test_the_sample_signature_checks_its_arguments_when_called(
    tiny_exports, field, value
):
    _, paths, _ = tiny_exports
    exported = zoo_export.load(paths["seq2seq"])
    with pytest.raises(tf.errors.InvalidArgumentError, match=field):
        draw(exported, **{field: value})
    description = zoo_export.read_metadata(paths["seq2seq"])
    assert description["sample_limits"] == {"num_return_sequences": 16}


def test_export_refuses_bad_settings(tmp_path):
    task = tiny_models.seq2seq()
    with pytest.raises(ValueError, match="beam_width"):
        export_translator(task, tmp_path / "a", beam_width=0)
    with pytest.raises(ValueError, match="length_penalty"):
        export_translator(task, tmp_path / "b", length_penalty=-1.0)
    with pytest.raises(TypeError, match="TranslationTask"):
        export_translator(keras.Sequential([keras.layers.Dense(2)]), tmp_path / "c")


def test_graph_punctuation_glue_equals_glue_punctuation():
    texts = [
        "¿ quién fue a Beth - lehem ?",
        "a - b - c - d - e",
        "Señor - Dios ( el Dios de Israel ) , dijo : « ven » .",
        "año 12 - 15 ; niño _ x - ñ",
        "- inicio y fin -",
        "“ dijo ” ’ él ¡ sí !",
        "",
    ]
    got = glue_punctuation_graph(tf.constant(texts)).numpy().tolist()
    assert [t.decode("utf-8") for t in got] == [glue_punctuation(t) for t in texts]


@pytest.mark.slow
def test_shipped_preset_export_equals_translate(tmp_path):
    """`export_preset` of the shipped Transformer: beam 4 as `translate`."""
    import zoo

    path = tmp_path / "transformer"
    description = zoo_export.export_preset(PRESET, path)
    assert description["preset"] == PRESET
    assert description["beam_width"] == 4
    verses = [p[0] for p in parallel_text.read_tsv(bible.sample_path("test"))[:6]]
    answers = run_exports({"preset": path}, verses)
    model = zoo.Transformer.from_preset(PRESET)
    assert answers["preset"]["serving_default"]["translation"] == model.translate(
        verses
    )
