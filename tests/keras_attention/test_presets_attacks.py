"""Tampered presets: every edit an attacker can make is refused, safely.

An attacker who can edit a preset can rewrite its `metadata.json` too, so
each case below re-signs what it changed (the checksums match) and the load
must still refuse, with a `PresetError` naming the problem, without opening
anything outside the directory, hanging or running code. Backend-agnostic.
"""

import hashlib
import importlib.util
import json
import os

import keras
import numpy as np
import pytest
from keras.src.backend.common import global_state

from keras_attention import presets
from keras_attention.presets import PresetError, rebuild

_spec = importlib.util.spec_from_file_location(
    "tampered_presets", os.path.join(os.path.dirname(__file__), "tampered_presets.py")
)
tampered = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tampered)
_model, _save, _sign = tampered.model, tampered.save, tampered.sign


def _edit_meta(directory, change):
    path = directory / presets.METADATA_FILE
    meta = json.loads(path.read_text())
    change(meta)
    path.write_text(json.dumps(meta))


def _write_signed(name, data):
    def tamper(d, outside):
        (d / name).write_bytes(data)
        _sign(d, name)

    return tamper


def _list(name, digest="0" * 64):
    def tamper(d, outside):
        _edit_meta(d, lambda m: m["files"].__setitem__(name, digest))

    return tamper


def _secret(outside):
    secret = outside / "secret.txt"
    secret.write_text("password\n")
    return secret


def _link_file(d, outside):
    # A symlink to a copy of the real asset outside: the checksum matches.
    target = outside / "tokens.txt"
    target.write_bytes((d / "assets" / "tokens.txt").read_bytes())
    os.remove(d / "assets" / "tokens.txt")
    os.symlink(target, d / "assets" / "tokens.txt")


def _link_directory(d, outside):
    (outside / "assets").mkdir()
    (outside / "assets" / "tokens.txt").write_bytes(
        (d / "assets" / "tokens.txt").read_bytes()
    )
    os.remove(d / "assets" / "tokens.txt")
    os.rmdir(d / "assets")
    os.symlink(outside / "assets", d / "assets")


def _fifo(d, outside):
    os.mkfifo(d / "pipe")
    _edit_meta(d, lambda m: m["files"].__setitem__("pipe", "0" * 64))


def _replace_meta(text):
    def tamper(d, outside):
        (d / presets.METADATA_FILE).write_bytes(text)

    return tamper


# case id -> (tamper(directory, outside), pattern the PresetError must match)
CASES = {
    # Item 3: listed names outside the directory, refused before any open.
    "dotdot-name": (_list("../../../../../../etc/passwd"), "Unsafe file name"),
    "absolute-name": (_list("/etc/passwd"), "Unsafe file name"),
    "dotdot-inside": (_list("assets/../config.json"), "Unsafe file name"),
    "backslash-name": (_list("..\\x"), "Unsafe file name"),
    "digest-not-hex": (_list("config.json", "x" * 64), "not 64 hex digits"),
    # Item 4: links, empty folders, special files.
    "symlinked-file": (_link_file, "symbolic link, assets/tokens.txt"),
    "symlinked-dir": (_link_directory, "symbolic link, assets"),
    "empty-dir": (lambda d, o: (d / "extra").mkdir(), "empty folder, extra"),
    "fifo": (_fifo, "pipe, which is not a regular file"),
    # Item 5: malformed metadata.
    "meta-list": (_replace_meta(b'["a"]'), "metadata.json: not a JSON object"),
    "meta-null": (_replace_meta(b"null"), "metadata.json: not a JSON object"),
    "meta-not-utf8": (_replace_meta(b'{"a": "\xff"}'), "metadata.json: not UTF-8"),
    "meta-files-list": (
        lambda d, o: _edit_meta(d, lambda m: m.__setitem__("files", ["x"])),
        "files=.* is not a JSON object",
    ),
    "meta-version-list": (
        lambda d, o: _edit_meta(d, lambda m: m.__setitem__("format_version", [1])),
        r"format_version=\[1\]",
    ),
    "meta-deep": (_replace_meta(b"[" * 100_000), "metadata.json"),
    # Item 5: malformed configs, re-signed.
    "config-list": (_write_signed("config.json", b"[1]"), "config.json: not a"),
    "config-null": (_write_signed("config.json", b"null"), "config.json: not a"),
    "config-not-utf8": (
        _write_signed("config.json", b'{"class_name": "\xfe"}'),
        "config.json: not UTF-8",
    ),
    "config-config-list": (
        _write_signed("config.json", b'{"class_name": "Functional", "config": []}'),
        "config.json: its config is not an object",
    ),
    "preprocessor-list": (
        _write_signed("preprocessor.json", b"[]"),
        "preprocessor.json: not a",
    ),
    "preprocessor-unknown-class": (
        _write_signed("preprocessor.json", b'{"class_name": "Nope", "config": {}}'),
        "Cannot rebuild the object in .*preprocessor.json",
    ),
    "asset-not-utf8": (
        _write_signed("assets/tokens.txt", b"\xff\xfe\n"),
        "Cannot read the assets of preset",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_tampered_preset_is_refused(tmp_path, case):
    tamper, pattern = CASES[case]
    directory = _save(tmp_path / "preset")
    outside = tmp_path / "outside"
    outside.mkdir()
    tamper(directory, outside)
    with pytest.raises(PresetError, match=pattern):
        presets.load_preset(str(directory))
    if not case.startswith(("config", "preprocessor", "asset")):  # Re-signed.
        with pytest.raises(PresetError, match=pattern):
            presets.verify_preset(str(directory))


@pytest.mark.parametrize("exists", [True, False])
def test_outside_name_error_does_not_tell_whether_it_exists(tmp_path, exists):
    directory = _save(tmp_path / "preset")
    outside = tmp_path / "outside"
    outside.mkdir()
    target = _secret(outside) if exists else outside / "nothing.txt"
    name = os.path.relpath(target, directory).replace(os.sep, "/")
    digest = hashlib.sha256(b"password\n").hexdigest()  # The right one.
    _edit_meta(directory, lambda m: m["files"].__setitem__(name, digest))
    with pytest.raises(PresetError) as info:
        presets.load_preset(str(directory))
    # Same message whether or not the file exists: nothing was opened.
    assert str(info.value).startswith(f"Unsafe file name {name!r} in ")
    assert "missing" not in str(info.value) and "mismatch" not in str(info.value)


def _lambda_model(marker):
    code = keras.layers.Lambda(
        lambda x, path: (__import__("pathlib").Path(path).touch(), x)[1],
        arguments={"path": str(marker)},
        name="code",
    )
    return keras.Sequential([keras.Input((4,)), code])


@pytest.fixture
def unsafe_deserialization():
    """`keras.config.enable_unsafe_deserialization()` for one test."""
    before = global_state.get_global_attribute("safe_mode_saving")
    keras.config.enable_unsafe_deserialization()
    yield
    global_state.set_global_attribute("safe_mode_saving", before)


@pytest.mark.parametrize("where", ["model", "preprocessor"])
def test_lambda_refused_even_with_unsafe_deserialization_on(
    tmp_path, unsafe_deserialization, where
):
    marker = tmp_path / "code_ran"
    model, pre = _model(), _lambda_model(marker)
    if where == "model":
        model, pre = _lambda_model(marker), None
    presets.save_preset(model, str(tmp_path / "p"), preprocessor=pre)
    marker.unlink(missing_ok=True)
    with pytest.raises(PresetError, match="'(Lambda|__lambda__)' payload"):
        presets.load_preset(str(tmp_path / "p"))
    assert not marker.exists()


def test_forced_safe_mode_without_the_scan(tmp_path, unsafe_deserialization):
    # Even a payload the scan does not know is rebuilt in safe mode: Keras's
    # own check refuses the lambda (the scan is bypassed here on purpose).
    marker = tmp_path / "code_ran"
    config = keras.saving.serialize_keras_object(_lambda_model(marker))
    marker.unlink(missing_ok=True)
    with pytest.raises(PresetError, match="Cannot rebuild the model"):
        rebuild.deserialize(config, "config.json", "model")
    assert not marker.exists()


def test_nan_weights_are_refused(tmp_path):
    model = _model()
    kernel = model.get_layer("out").kernel
    kernel.assign(np.full(kernel.shape, np.nan, "float32"))
    presets.save_preset(model, str(tmp_path / "p"))
    with pytest.raises(PresetError, match="NaN or infinite values .*out/kernel"):
        presets.load_preset(str(tmp_path / "p"))
    loaded, _, _ = presets.load_preset(str(tmp_path / "p"), load_weights=False)
    assert np.isfinite(keras.ops.convert_to_numpy(loaded.weights[0])).all()


def test_saving_over_an_older_preset_keeps_nothing_stale(tmp_path):
    # Item 10: the old preset has a preprocessor and assets; the new one has
    # none. Nothing of the old one is hashed into, or read back from, the new.
    directory = _save(tmp_path / "p")
    (directory / "notes.txt").write_text("stale\n")
    _edit_meta(directory, lambda m: m["files"].__setitem__("notes.txt", "0" * 64))
    meta = presets.save_preset(_model(), str(directory))
    assert sorted(meta["files"]) == ["config.json", "model.weights.h5"]
    assert sorted(os.listdir(directory)) == [
        "config.json",
        "metadata.json",
        "model.weights.h5",
    ]
    _, preprocessor, _ = presets.load_preset(str(directory))
    assert preprocessor is None
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".p.saving-")]


def test_saving_never_replaces_a_folder_that_is_not_a_preset(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.tex").write_text("keep me\n")
    with pytest.raises(PresetError, match="is not a preset to replace"):
        presets.save_preset(_model(), str(tmp_path / "mine"))
    assert (tmp_path / "mine" / "thesis.tex").read_text() == "keep me\n"
    assert sorted(os.listdir(tmp_path)) == ["mine"]  # No temporary left.


def test_saved_preset_has_ordinary_permissions(tmp_path):
    mask = os.umask(0o022)
    try:
        _save(tmp_path / "p")
    finally:
        os.umask(mask)
    assert oct(os.stat(tmp_path / "p").st_mode & 0o777) == oct(0o755)
