"""`zoo.base.task.Task`: raw-data fit/evaluate/predict and presets, on a tiny task.

Every data form of `zoo.base.raw_inputs.FORMS` x `fit` / `evaluate` / `predict` is
checked against the same call on prepared features computed in NumPy.
"""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_attention.presets import PresetError
from zoo import registry
from zoo.base import raw_inputs as inputs
from zoo.base.task import Task, list_presets, resolve_preset

pytestmark = pytest.mark.tensorflow_only

TEXTS = ["a", "bb cc", "in the beginning", "jesus wept", "x y z w", "hello there"]
TARGETS = np.array([0.1, 0.5, 1.6, 1.0, 0.7, 1.1], "float32")


@keras.saving.register_keras_serializable(package="tests_task")
class LengthFeatures(keras.layers.Layer):
    """Raw strings -> `{"features": [characters / 10, words / 10]}`."""

    def input_form(self, spec):
        return inputs.text_form(spec)

    def call(self, x, y=None, sample_weight=None):
        x = tf.convert_to_tensor(x)
        chars = tf.cast(tf.strings.length(x), "float32") / 10
        words = tf.cast(tf.strings.split(x).row_lengths(), "float32") / 10
        features = {"features": tf.stack([chars, words], axis=-1)}
        return keras.utils.pack_x_y_sample_weight(features, y, sample_weight)


@keras.saving.register_keras_serializable(package="tests_task")
class TinyTask(Task):
    """`features (2,) -> Dense(units, tanh) -> Dense(1)`."""

    def __init__(self, units=4, preprocessor=None, **kwargs):
        features = keras.Input((2,), name="features")
        hidden = keras.layers.Dense(units, activation="tanh", name="hidden")(features)
        outputs = keras.layers.Dense(1, name="out")(hidden)
        super().__init__(inputs={"features": features}, outputs=outputs, **kwargs)
        self.units = units
        self.preprocessor = preprocessor

    def get_config(self):
        pre = self.preprocessor
        return {
            "name": self.name,
            "trainable": self.trainable,
            "units": self.units,
            "preprocessor": None
            if pre is None
            else keras.saving.serialize_keras_object(pre),
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config.get("preprocessor"), dict):
            config["preprocessor"] = keras.saving.deserialize_keras_object(
                config["preprocessor"]
            )
        return cls(**config)


def features(texts):
    """The preprocessor's output, computed independently in Python."""
    return {
        "features": np.array(
            [[len(t) / 10, len(t.split()) / 10] for t in texts], "float32"
        )
    }


def make(seed=0, preprocessor=True):
    keras.utils.set_random_seed(seed)
    model = TinyTask(4, preprocessor=LengthFeatures() if preprocessor else None)
    model.compile(keras.optimizers.SGD(0.1), "mse")
    return model


def weights_of(model):
    return [np.array(w) for w in model.get_weights()]


def assert_same_weights(a, b):
    for x, y in zip(weights_of(a), weights_of(b)):
        np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-7)


def test_predict_raw_equals_prepared():
    model = make()
    raw = model.predict(TEXTS, batch_size=4, verbose=0)
    prepared = model.predict(features(TEXTS), batch_size=4, verbose=0)
    assert raw.shape == (6, 1)
    np.testing.assert_allclose(raw, prepared, rtol=1e-6)
    unbatched = tf.data.Dataset.from_tensor_slices(TEXTS)
    np.testing.assert_allclose(model.predict(unbatched, verbose=0), raw, rtol=1e-6)


def test_evaluate_raw_equals_numpy_mse():
    model = make()
    predictions = np.asarray(model(features(TEXTS)))[:, 0]
    expected = float(np.mean((predictions - TARGETS) ** 2))
    assert model.evaluate(TEXTS, TARGETS, verbose=0) == pytest.approx(expected, 1e-5)
    pairs = tf.data.Dataset.from_tensor_slices((TEXTS, TARGETS))
    assert model.evaluate(pairs, verbose=0) == pytest.approx(expected, 1e-5)
    assert model.evaluate(pairs.batch(4), verbose=0) == pytest.approx(expected, 1e-5)
    # Sample weights travel through the preprocessor.
    weights = np.array([1, 1, 1, 0, 0, 0], "float32")
    weighted = model.evaluate(TEXTS, TARGETS, sample_weight=weights, verbose=0)
    reference = model.evaluate(
        features(TEXTS), TARGETS, sample_weight=weights, verbose=0
    )
    assert weighted == pytest.approx(reference, 1e-6)
    assert weighted != pytest.approx(expected, 1e-3)


@pytest.mark.parametrize("source", ["lists", "unbatched", "batched"])
def test_fit_raw_equals_fit_prepared(source):
    reference = make()
    reference.fit(
        features(TEXTS), TARGETS, batch_size=4, epochs=2, shuffle=False, verbose=0
    )
    model = make()
    if source == "lists":
        model.fit(TEXTS, TARGETS, batch_size=4, epochs=2, shuffle=False, verbose=0)
    elif source == "unbatched":
        dataset = tf.data.Dataset.from_tensor_slices((TEXTS, TARGETS))
        model.fit(dataset, batch_size=4, epochs=2, verbose=0)
    else:
        dataset = tf.data.Dataset.from_tensor_slices((TEXTS, TARGETS)).batch(4)
        model.fit(dataset, epochs=2, verbose=0)
    assert_same_weights(model, reference)
    assert not np.allclose(weights_of(model)[0], weights_of(make())[0])


def test_fit_shuffles_raw_lists_and_validates():
    model = make()
    history = model.fit(
        TEXTS,
        TARGETS,
        batch_size=2,
        epochs=1,
        validation_data=(TEXTS[:3], TARGETS[:3]),
        verbose=0,
    )
    val = model.evaluate(TEXTS[:3], TARGETS[:3], verbose=0)
    assert history.history["val_loss"][-1] == pytest.approx(val, 1e-5)
    dataset_val = tf.data.Dataset.from_tensor_slices((TEXTS[:3], TARGETS[:3]))
    history = model.fit(
        TEXTS, TARGETS, epochs=1, validation_data=dataset_val, verbose=0
    )
    val = model.evaluate(TEXTS[:3], TARGETS[:3], verbose=0)
    assert history.history["val_loss"][-1] == pytest.approx(val, 1e-5)


def test_dataset_argument_errors():
    model = make()
    pairs = tf.data.Dataset.from_tensor_slices((TEXTS, TARGETS))
    with pytest.raises(ValueError, match="pass labels inside it"):
        model.fit(pairs, TARGETS, verbose=0)
    # Keras ignores `batch_size` for a dataset; so do we, with a warning.
    reference = make()
    reference.fit(pairs.batch(3), epochs=1, verbose=0)
    with pytest.warns(UserWarning, match="batch_size=2 is ignored.*already batched"):
        model.fit(pairs.batch(3), batch_size=2, epochs=1, verbose=0)
    assert_same_weights(model, reference)


def test_without_preprocessor():
    model = make(preprocessor=False)
    x = features(TEXTS)
    model.fit(x, TARGETS, batch_size=3, epochs=1, verbose=0)
    predictions = model.predict(x, verbose=0)
    np.testing.assert_allclose(predictions, np.asarray(model(x)), rtol=1e-6)
    packed = model.preprocess_samples(x, TARGETS)
    assert packed[0] is x and packed[1] is TARGETS


def test_preset_round_trip(tmp_path):
    model = make()
    model.fit(TEXTS, TARGETS, batch_size=3, epochs=1, verbose=0)
    directory = str(tmp_path / "tiny")
    meta = model.save_to_preset(directory, metadata={"metrics": {"mse": 0.5}})
    assert meta["class_name"] == "TinyTask"
    expected = model.predict(TEXTS, verbose=0)
    for cls in (TinyTask, Task):  # `Task.from_preset` loads any task class.
        loaded = cls.from_preset(directory)
        assert type(loaded) is TinyTask
        assert isinstance(loaded.preprocessor, LengthFeatures)
        assert loaded.preset_metadata["metrics"] == {"mse": 0.5}
        np.testing.assert_array_equal(loaded.predict(TEXTS, verbose=0), expected)
    fresh = TinyTask.from_preset(directory, load_weights=False)
    assert not np.array_equal(fresh.predict(TEXTS, verbose=0), expected)
    renamed = TinyTask.from_preset(directory, name="renamed")
    assert renamed.name == "renamed"


def test_from_preset_checks_the_class(tmp_path):
    from zoo.seq2seq import Seq2Seq

    make().save_to_preset(str(tmp_path))
    with pytest.raises(PresetError, match="holds a TinyTask, not a Seq2Seq"):
        Seq2Seq.from_preset(str(tmp_path))


@pytest.fixture
def shipped(tmp_path, monkeypatch):
    """A fake zoo tree: `<root>/<model>/presets/<name>/metadata.json`.

    Its families `tiny` and `other` are the registered ones; a preset
    folder without `metadata.json` is not shipped.
    """
    root = tmp_path / "zoo"
    root.mkdir()
    families = {
        name: registry.Family(
            name=name,
            module=f"zoo.{name}",
            task_path="zoo.base.task:Task",
            kind=None,
            presets={preset: "" for preset in presets},
            summary="",
            folder=str(root / name),
            metrics_summary=Task.metrics_summary,
        )
        for name, presets in (
            ("tiny", ("tiny_small", "not_a_preset")),
            ("other", ("other_base",)),
        )
    }
    monkeypatch.setattr(registry, "_FAMILIES", families)
    monkeypatch.setattr(registry, "_DISCOVERED", [True])  # no zoo/*/family.py
    return root


def test_list_and_resolve_shipped_presets(shipped):
    make().save_to_preset(str(shipped / "tiny" / "presets" / "tiny_small"))
    (shipped / "tiny" / "presets" / "not_a_preset").mkdir()  # No metadata.
    (shipped / "other" / "presets" / "other_base").mkdir(parents=True)
    (shipped / "other" / "presets" / "other_base" / "metadata.json").write_text(
        json.dumps({"format_version": "1.0"})
    )
    (shipped / "data").mkdir()  # A folder without presets.
    found = list_presets()
    assert found == {
        "other_base": str(shipped / "other" / "presets" / "other_base"),
        "tiny_small": str(shipped / "tiny" / "presets" / "tiny_small"),
    }
    assert resolve_preset("tiny_small") == found["tiny_small"]
    assert resolve_preset(str(shipped)) == str(shipped)  # A directory.
    with pytest.raises(
        ValueError, match="Unknown preset 'nope'.*other_base, tiny_small"
    ):
        resolve_preset("nope")
    loaded = TinyTask.from_preset("tiny_small")
    np.testing.assert_array_equal(
        loaded.predict(TEXTS, verbose=0), make().predict(TEXTS, verbose=0)
    )


def test_unknown_preset_without_shipped_ones(shipped):
    with pytest.raises(ValueError, match=r"Unknown preset 'x'.*\(none shipped yet\)"):
        Task.from_preset("x")


def test_real_shipped_presets_are_complete():
    for name, directory in list_presets().items():
        assert os.path.basename(directory) == name
        assert os.path.isfile(os.path.join(directory, "metadata.json"))


# Every form x fit / evaluate / predict ----------------------------------------

PAIRS = list(zip(TEXTS, TARGETS.tolist()))


def forms(with_labels=True):
    """name -> (args, kwargs) of one data form; all hold TEXTS (and TARGETS)."""
    sliced = tf.data.Dataset.from_tensor_slices((TEXTS, TARGETS))
    only_x = tf.data.Dataset.from_tensor_slices(TEXTS)
    return {
        "pairs": ((PAIRS,), {}),
        "pairs_batch_size": ((PAIRS,), {"batch_size": 4}),
        "tuple": (((TEXTS, TARGETS),), {}),
        "x_and_y_lists": ((TEXTS, list(TARGETS)), {"batch_size": 4}),
        "numpy": ((np.array(TEXTS), TARGETS), {}),
        "dataset": ((sliced if with_labels else only_x,), {}),
        "dataset_batch_size": ((sliced if with_labels else only_x,), {"batch_size": 4}),
        "dataset_batched": (((sliced if with_labels else only_x).batch(4),), {}),
    }


@pytest.mark.parametrize("form", sorted(forms()))
def test_every_form_evaluates_as_prepared_data(form):
    model = make()
    args, kwargs = forms()[form]
    expected = model.evaluate(features(TEXTS), TARGETS, verbose=0)
    assert model.evaluate(*args, **kwargs, verbose=0) == pytest.approx(expected, 1e-5)


@pytest.mark.parametrize("form", sorted(forms()))
def test_every_form_predicts_as_prepared_data(form):
    model = make()
    expected = np.asarray(model(features(TEXTS)))
    for labels in (True, False):  # Labels in the data are ignored.
        args, kwargs = forms(with_labels=labels)[form]
        if not labels and form in ("pairs", "pairs_batch_size", "tuple"):
            continue
        if not labels and form in ("x_and_y_lists", "numpy"):
            args = args[:1]
        if labels and form in ("x_and_y_lists", "numpy"):
            continue  # predict takes no `y`.
        got = model.predict(*args, **kwargs, verbose=0)
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("form", sorted(forms()))
def test_every_form_fits_as_prepared_data(form):
    args, kwargs = forms()[form]
    model = make()
    history = model.fit(*args, **kwargs, epochs=2, shuffle=False, verbose=0)
    assert len(history.history["loss"]) == 2
    # The same samples in the same batches, prepared in NumPy.
    batch = kwargs.get("batch_size") or (4 if form == "dataset_batched" else 32)
    reference = make()
    reference.fit(
        features(TEXTS), TARGETS, batch_size=batch, epochs=2, shuffle=False, verbose=0
    )
    assert_same_weights(model, reference)


def test_dataset_of_prepared_dicts_and_of_raw_dicts():
    model = make()
    expected = model.evaluate(features(TEXTS), TARGETS, verbose=0)
    prepared = tf.data.Dataset.from_tensor_slices((features(TEXTS), TARGETS))
    assert model.evaluate(prepared.batch(4), verbose=0) == pytest.approx(expected, 1e-6)

    class DictText(LengthFeatures):
        """Takes `{"text": strings}` (a raw dict, as it declares)."""

        def input_form(self, spec):
            return inputs.text_form((spec[0]["text"],)) if "text" in spec[0] else None

        def call(self, x, y=None, sample_weight=None):
            return super().call(x["text"], y, sample_weight)

    model.preprocessor = DictText()
    raw = tf.data.Dataset.from_tensor_slices(({"text": TEXTS}, TARGETS))
    assert model.evaluate(raw, verbose=0) == pytest.approx(expected, 1e-5)
    assert model.evaluate({"text": TEXTS}, TARGETS, verbose=0) == pytest.approx(
        expected, 1e-5
    )
    assert model.evaluate(prepared.batch(2), verbose=0) == pytest.approx(expected, 1e-6)


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.fit(42, verbose=0),
        lambda m: m.fit("in the beginning", verbose=0),
        lambda m: m.evaluate({1, 2}, verbose=0),
        lambda m: m.predict(None, verbose=0),
        lambda m: m.fit(PAIRS, TARGETS, verbose=0),
        lambda m: m.fit([], verbose=0),
        lambda m: m.predict(TEXTS, TARGETS, verbose=0),  # y as batch_size
    ],
)
def test_other_forms_are_refused_with_the_accepted_ones(call):
    model = make()
    with pytest.raises(
        ValueError, match="pass the labels inside|Accepted forms|batch_size"
    ):
        call(model)


class TwoInputs(keras.layers.Layer):
    """`(text, label)` -> `{"features", "label_in"}`: the label is an input too."""

    def input_form(self, spec):
        return inputs.text_form(spec)

    def call(self, x, y=None, sample_weight=None):
        chars = tf.cast(tf.strings.length(x), "float32")[:, None] / 10
        features = {"features": tf.concat([chars, chars], axis=-1)}
        if y is None:
            return features
        features["label_in"] = tf.reshape(tf.cast(y, "float32"), (-1, 1))
        return features, y, sample_weight


def two_input_task():
    keras.utils.set_random_seed(0)
    features_in = keras.Input((2,), name="features")
    label_in = keras.Input((1,), name="label_in")
    outputs = keras.layers.Dense(1)(keras.layers.Concatenate()([features_in, label_in]))
    model = Task(
        {"features": features_in, "label_in": label_in},
        outputs,
        preprocessor=TwoInputs(),
    )
    model.compile(keras.optimizers.SGD(0.1), "mse")
    return model


def test_raw_data_missing_a_model_input_fails_before_keras():
    model = two_input_task()
    before = [v.path for v in model.variables]
    with pytest.raises(ValueError, match=r"also needs \['label_in'\].*`translate`"):
        model.fit(TEXTS, verbose=0)
    with pytest.raises(ValueError, match=r"also needs \['label_in'\]"):
        model.predict(TEXTS, verbose=0)
    assert [v.path for v in model.variables] == before
    assert not model.optimizer.built  # Nothing was traced or built.
    history = model.fit(PAIRS, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])


def test_model_is_usable_after_a_call_that_fails_inside_keras(monkeypatch):
    # Without the early check, the missing input fails inside Keras's first
    # step, which leaves a traced step function behind: before the fix the
    # next, correct `fit` failed ("Creating variables on a non-first call").
    monkeypatch.setattr(Task, "_check_prepared", lambda self, spec: None)
    model = two_input_task()
    with pytest.raises(ValueError, match="Missing data for input"):
        model.fit(TEXTS, epochs=1, verbose=0)
    reference = two_input_task()
    reference.fit(PAIRS, batch_size=4, epochs=2, shuffle=False, verbose=0)
    model.fit(PAIRS, batch_size=4, epochs=2, shuffle=False, verbose=0)
    assert_same_weights(model, reference)
    assert model.evaluate(PAIRS, verbose=0) == pytest.approx(
        reference.evaluate(PAIRS, verbose=0), 1e-6
    )


def test_functional_task_with_a_feature_preprocessor_round_trips(tmp_path):
    keras.utils.set_random_seed(0)
    words = keras.layers.StringLookup(vocabulary=["in", "the", "beginning"])
    ids = keras.Input((), dtype="int64", name="ids")
    outputs = keras.layers.Dense(1)(keras.layers.Embedding(4, 3)(ids))
    model = Task(ids, outputs, preprocessor=inputs.FeaturePreprocessor(words))
    model.compile(keras.optimizers.SGD(0.5), "mse")
    model.fit([("in", 1.0), ("the", -1.0)], epochs=3, verbose=0)
    expected = model.predict(["in", "the", "end"], verbose=0)
    # The lookup's ids feed the embedding: rows 1 and 2 were trained.
    assert expected[0, 0] > expected[1, 0]
    model.save_to_preset(str(tmp_path / "p"))
    loaded = Task.from_preset(str(tmp_path / "p"))
    assert type(loaded) is Task
    assert isinstance(loaded.preprocessor, inputs.FeaturePreprocessor)
    np.testing.assert_array_equal(
        loaded.predict(["in", "the", "end"], verbose=0), expected
    )


def test_preprocessor_reaches_the_model_through_configure(tmp_path, monkeypatch):
    """`keras_attention.presets` knows no `preprocessor` key: the zoo passes it."""
    from keras_attention import presets

    make().save_to_preset(str(tmp_path))
    seen = {}
    load = presets.load_preset

    def spy(directory, **kwargs):
        seen.update(kwargs)
        return load(directory, **kwargs)

    monkeypatch.setattr(presets, "load_preset", spy)
    loaded = TinyTask.from_preset(str(tmp_path))
    assert "preprocessor_key" not in seen and callable(seen["configure"])
    assert isinstance(loaded.preprocessor, LengthFeatures)


def test_a_copy_of_a_shipped_preset_loads_with_its_preprocessor(tmp_path):
    import shutil

    name = "seq2seq_bahdanau_bible_en_es"
    copy = tmp_path / name
    shutil.copytree(list_presets()[name], copy)
    loaded = Task.from_preset(str(copy))
    assert type(loaded).__name__ == "Seq2Seq"
    pre = loaded.preprocessor
    assert (
        pre.source_tokenizer.vocabulary_size()
        == loaded.get_config()["source_vocabulary_size"]
    )
