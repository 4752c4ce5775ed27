"""Preset directories: contents, exact round trip, and clear errors.

Backend-agnostic: a tiny registered functional model and a vocabulary layer
with assets stand in for the zoo models (which are TensorFlow-side and are
round-tripped in `tests/zoo`).
"""

import hashlib
import json
import os

import keras
import numpy as np
import pytest

import keras_attention
from keras_attention import presets
from keras_attention.presets import PresetError


@keras.saving.register_keras_serializable(package="tests_presets")
class Vocab(keras.layers.Layer):
    """A preprocessor-like layer whose state lives in an asset file."""

    def __init__(self, tokens=None, **kwargs):
        super().__init__(**kwargs)
        self.tokens = list(tokens) if tokens is not None else None

    def save_assets(self, dir_path):
        with open(os.path.join(dir_path, "tokens.txt"), "w", encoding="utf-8") as f:
            f.write("\n".join(self.tokens) + "\n")

    def load_assets(self, dir_path):
        with open(os.path.join(dir_path, "tokens.txt"), encoding="utf-8") as f:
            self.tokens = f.read().split()

    def get_config(self):
        return {**super().get_config(), "tokens": None}  # Saved as an asset.


@keras.saving.register_keras_serializable(package="tests_presets")
class Tiny(keras.Model):
    """Functional `Dense -> Dense` model that takes a `preprocessor`."""

    def __init__(self, units=3, dropout=0.0, preprocessor=None, **kwargs):
        inputs = keras.Input((4,), name="features")
        hidden = keras.layers.Dense(units, activation="tanh", name="hidden")(inputs)
        hidden = keras.layers.Dropout(dropout)(hidden)
        outputs = keras.layers.Dense(2, name="out")(hidden)
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)
        self.units = units
        self.dropout = dropout
        self.preprocessor = preprocessor

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "units": self.units,
            "dropout": self.dropout,
        }

    @classmethod
    def from_config(cls, config):
        return cls(**config)


def _model(seed=0):
    keras.utils.set_random_seed(seed)
    return Tiny(units=3, name="tiny")


def _inputs():
    return np.random.default_rng(1).normal(size=(5, 4)).astype("float32")


def _save(directory, metadata=None):
    model = _model()
    vocab = Vocab(["[PAD]", "hello", "wörld"], name="vocab")
    presets.save_preset(model, str(directory), preprocessor=vocab, metadata=metadata)
    return model, vocab


def _sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _rewrite_checksum(directory, name):
    """Records the current sha256 of `name` in the metadata (a re-signed edit)."""
    meta_path = directory / presets.METADATA_FILE
    meta = json.loads(meta_path.read_text())
    meta["files"][name] = _sha(directory / name)
    meta_path.write_text(json.dumps(meta))


def test_directory_contents_and_metadata(tmp_path):
    model, _ = _save(tmp_path, metadata={"metrics": {"bleu": 12.5}, "command": "x"})
    meta = json.loads((tmp_path / "metadata.json").read_text())
    assert sorted(meta["files"]) == [
        "assets/tokens.txt",
        "config.json",
        "model.weights.h5",
        "preprocessor.json",
    ]
    # Every checksum is the file's sha256, recomputed here with hashlib.
    for name, digest in meta["files"].items():
        assert digest == _sha(tmp_path / name)
    assert meta["format_version"] == presets.FORMAT_VERSION
    assert meta["class_name"] == "Tiny"
    assert meta["registered_name"] == "tests_presets>Tiny"
    assert meta["parameters"] == 4 * 3 + 3 + 3 * 2 + 2
    assert meta["versions"]["keras"] == keras.__version__
    assert meta["versions"]["keras_attention"] == keras_attention.__version__
    assert meta["versions"]["backend"] == keras.backend.backend()
    assert meta["metrics"] == {"bleu": 12.5} and meta["command"] == "x"
    assert (tmp_path / "assets" / "tokens.txt").read_text().split() == [
        "[PAD]",
        "hello",
        "wörld",
    ]


def test_round_trip_is_exact(tmp_path):
    model, _ = _save(tmp_path)
    x = _inputs()

    def configure(config, preprocessor):  # How `Tiny` takes its preprocessor.
        config["preprocessor"] = preprocessor

    loaded, vocab, meta = presets.load_preset(
        str(tmp_path), expected_class=Tiny, configure=configure
    )
    assert isinstance(loaded, Tiny) and isinstance(vocab, Vocab)
    assert vocab.tokens == ["[PAD]", "hello", "wörld"]  # From the asset.
    assert loaded.preprocessor is vocab
    assert meta["class_name"] == "Tiny"
    for a, b in zip(model.weights, loaded.weights):
        np.testing.assert_array_equal(
            keras.ops.convert_to_numpy(a), keras.ops.convert_to_numpy(b)
        )
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(model(x)), keras.ops.convert_to_numpy(loaded(x))
    )


def test_the_deprecated_preprocessor_key_still_works_with_a_warning(tmp_path):
    _save(tmp_path)
    with pytest.warns(DeprecationWarning, match="configure"):
        loaded, vocab, _ = presets.load_preset(
            str(tmp_path), preprocessor_key="preprocessor"
        )
    assert loaded.preprocessor is vocab and vocab.tokens[1] == "hello"


def test_overrides_and_load_weights_false(tmp_path):
    model, _ = _save(tmp_path)
    loaded, _, _ = presets.load_preset(str(tmp_path), name="renamed", dropout=0.5)
    assert loaded.name == "renamed" and loaded.dropout == 0.5
    keras.utils.set_random_seed(123)
    fresh, _, _ = presets.load_preset(str(tmp_path), load_weights=False)
    kernel = keras.ops.convert_to_numpy(model.get_layer("hidden").kernel)
    assert not np.array_equal(
        kernel, keras.ops.convert_to_numpy(fresh.get_layer("hidden").kernel)
    )


def test_preset_without_preprocessor(tmp_path):
    model = _model()
    presets.save_preset(model, str(tmp_path))
    assert not (tmp_path / "preprocessor.json").exists()
    loaded, preprocessor, _ = presets.load_preset(str(tmp_path))
    assert preprocessor is None
    x = _inputs()
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(model(x)), keras.ops.convert_to_numpy(loaded(x))
    )


def test_preprocessor_without_assets_methods(tmp_path):
    # A plain Keras layer has no save_assets/load_assets: nothing to store.
    presets.save_preset(
        _model(), str(tmp_path), preprocessor=keras.layers.Identity(name="ident")
    )
    _, preprocessor, meta = presets.load_preset(str(tmp_path))
    assert isinstance(preprocessor, keras.layers.Identity)
    assert not any(name.startswith("assets/") for name in meta["files"])


def test_wrong_class(tmp_path):
    _save(tmp_path)
    with pytest.raises(PresetError, match="holds a Tiny, not a Sequential"):
        presets.load_preset(str(tmp_path), expected_class=keras.Sequential)


def test_missing_directory_and_metadata(tmp_path):
    with pytest.raises(PresetError, match="not found"):
        presets.load_preset(str(tmp_path / "nope"))
    _save(tmp_path)
    os.remove(tmp_path / "metadata.json")
    with pytest.raises(PresetError, match="no metadata.json"):
        presets.load_preset(str(tmp_path))


@pytest.mark.parametrize("name", ["model.weights.h5", "config.json"])
def test_edited_byte_fails_checksum(tmp_path, name):
    _save(tmp_path)
    path = tmp_path / name
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(PresetError, match=f"Checksum mismatch for .*{name}"):
        presets.load_preset(str(tmp_path))
    with pytest.raises(PresetError, match="Checksum mismatch"):
        presets.verify_preset(str(tmp_path))


def test_missing_file(tmp_path):
    _save(tmp_path)
    os.remove(tmp_path / "assets" / "tokens.txt")
    with pytest.raises(PresetError, match="missing file assets/tokens.txt"):
        presets.load_preset(str(tmp_path))


def test_truncated_weights(tmp_path):
    _save(tmp_path)
    path = tmp_path / "model.weights.h5"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(PresetError, match="Checksum mismatch for .*model.weights.h5"):
        presets.load_preset(str(tmp_path))
    # Even when the checksum was recomputed on the truncated file, reading it
    # fails with an error naming the file.
    _rewrite_checksum(tmp_path, "model.weights.h5")
    presets.verify_preset(str(tmp_path))
    with pytest.raises(
        PresetError, match="Cannot read weights file .*model.weights.h5"
    ):
        presets.load_preset(str(tmp_path))


@pytest.mark.parametrize("name", ["config.json", "preprocessor.json"])
def test_corrupt_json(tmp_path, name):
    _save(tmp_path)
    (tmp_path / name).write_text('{"class_name": "Tiny", "config": ')
    _rewrite_checksum(tmp_path, name)
    with pytest.raises(PresetError, match=f"Corrupt preset file .*{name}"):
        presets.load_preset(str(tmp_path))


def test_corrupt_metadata(tmp_path):
    _save(tmp_path)
    meta_path = tmp_path / "metadata.json"
    meta_path.write_text("{not json")
    with pytest.raises(PresetError, match="Corrupt preset file .*metadata.json"):
        presets.load_preset(str(tmp_path))
    meta_path.write_text('["a list"]')
    with pytest.raises(PresetError, match="metadata.json: not a JSON object"):
        presets.read_metadata(str(tmp_path))
    meta_path.write_text('{"format_version": "one"}')
    with pytest.raises(PresetError, match="format_version='one'"):
        presets.read_metadata(str(tmp_path))


def test_metadata_must_list_config_and_weights(tmp_path):
    _save(tmp_path)
    meta_path = tmp_path / "metadata.json"
    meta = json.loads(meta_path.read_text())
    del meta["files"]["model.weights.h5"]
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(PresetError, match="lists no model.weights.h5"):
        presets.load_preset(str(tmp_path))


@pytest.mark.parametrize("version, loads", [("2.0", False), ("1.7", True)])
def test_format_version(tmp_path, version, loads):
    _save(tmp_path)
    meta_path = tmp_path / "metadata.json"
    meta = json.loads(meta_path.read_text())
    meta["format_version"] = version
    meta_path.write_text(json.dumps(meta))
    if loads:  # A newer minor version stays readable.
        model, _, meta = presets.load_preset(str(tmp_path))
        assert meta["format_version"] == version
    else:
        with pytest.raises(PresetError, match="format version 2.0, newer than"):
            presets.load_preset(str(tmp_path))


def _lambda_model(marker):
    # A Python lambda is stored as bytecode; rebuilding the model would run it
    # (Keras calls the layer on symbolic inputs), which touches `marker`.
    code = keras.layers.Lambda(
        lambda x, path: (__import__("pathlib").Path(path).touch(), x)[1],
        arguments={"path": str(marker)},
        name="code",
    )
    return keras.Sequential([keras.Input((4,)), code])


def test_lambda_layer_is_refused(tmp_path):
    marker = tmp_path / "code_ran"
    presets.save_preset(_lambda_model(marker), str(tmp_path / "p"))
    marker.unlink(missing_ok=True)
    with pytest.raises(PresetError, match="Cannot rebuild the model in .*config.json"):
        presets.load_preset(str(tmp_path / "p"))
    assert not marker.exists()
    # The marker works: Keras outside safe mode would have run the code.
    config = json.loads((tmp_path / "p" / "config.json").read_text())
    keras.saving.deserialize_keras_object(config, safe_mode=False)
    assert marker.exists()


def test_lambda_preprocessor_is_refused(tmp_path):
    marker = tmp_path / "code_ran"
    presets.save_preset(
        _model(), str(tmp_path / "p"), preprocessor=_lambda_model(marker)
    )
    marker.unlink(missing_ok=True)
    with pytest.raises(
        PresetError, match="Cannot rebuild the object in .*preprocessor.json"
    ):
        presets.load_preset(str(tmp_path / "p"))
    assert not marker.exists()


def _edit_metadata(directory, **changes):
    meta_path = directory / presets.METADATA_FILE
    meta = json.loads(meta_path.read_text())
    meta.update(changes)
    meta_path.write_text(json.dumps(meta))
    return meta


@pytest.mark.parametrize(
    "package, saved, running, loads",
    [
        ("keras_attention", "1.0.0", "0.1.0", False),
        ("keras_attention", "0.9.3", "0.1.0", True),  # Newer minor: fine.
        ("keras_attention", "0.0.1", "0.1.0", True),  # Older: fine.
        ("keras", "4.0.0", "3.15.1", False),
        ("keras", "3.99.0", "3.15.1", True),
    ],
)
def test_newer_major_package_version(
    tmp_path, monkeypatch, package, saved, running, loads
):
    _save(tmp_path)
    meta = json.loads((tmp_path / presets.METADATA_FILE).read_text())
    _edit_metadata(tmp_path, versions={**meta["versions"], package: saved})
    module = keras_attention if package == "keras_attention" else keras
    monkeypatch.setattr(module, "__version__", running)
    if loads:
        presets.load_preset(str(tmp_path))
        return
    name = "keras-attention-zoo" if package == "keras_attention" else "Keras"
    message = (
        f"saved by {name} {saved}, a newer major version than the running "
        f"{running}: upgrade {name}"
    )
    with pytest.raises(PresetError, match=message.replace(".", r"\.")):
        presets.load_preset(str(tmp_path))
    with pytest.raises(PresetError, match="newer major version"):
        presets.read_metadata(str(tmp_path))


def test_versions_must_be_an_object(tmp_path):
    _save(tmp_path)
    _edit_metadata(tmp_path, versions="0.1.0")
    with pytest.raises(PresetError, match="metadata.json: versions='0.1.0'"):
        presets.load_preset(str(tmp_path))


@pytest.mark.parametrize("name", ["notes.txt", "assets/extra_tokens.txt"])
def test_unlisted_file_is_refused(tmp_path, name):
    _save(tmp_path)
    presets.verify_preset(str(tmp_path))
    (tmp_path / name).write_text("not part of the preset\n")
    with pytest.raises(
        PresetError, match=f"does not list .*: {name}. Remove them"
    ) as info:
        presets.load_preset(str(tmp_path))
    assert str(tmp_path) in str(info.value)
    # Saving again replaces the directory whole: the stray file is gone.
    _save(tmp_path)
    assert not (tmp_path / name).exists()
    assert name not in presets.verify_preset(str(tmp_path))["files"]
