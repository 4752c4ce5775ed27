"""Preset directories: save, verify and load a model without running code.

A preset is a directory:

```
config.json          the model, as `keras.saving.serialize_keras_object`
preprocessor.json    optional: the preprocessor the same way
model.weights.h5     weights (`model.save_weights`)
assets/<layer>/...   optional: vocabularies and other files of layers
metadata.json        format version, library versions, metrics, the command
                     that trained it, and the sha256 of every other file
```

Loading verifies every checksum first (and refuses files the metadata does
not list), deserializes in Keras safe mode (no lambdas, no pickle) and only
then reads the weights, so a corrupt, edited, missing or added file gives a
clear error naming it. A preset saved by a newer major version of the format,
of keras-attention-zoo or of Keras is refused with a message saying so.
"""

import datetime
import hashlib
import json
import os
import platform
import warnings

import keras

FORMAT_VERSION = "1.0"
CONFIG_FILE = "config.json"
PREPROCESSOR_FILE = "preprocessor.json"
WEIGHTS_FILE = "model.weights.h5"
METADATA_FILE = "metadata.json"
ASSETS_DIR = "assets"


class PresetError(ValueError):
    """A preset directory is missing, incomplete, corrupt or too new."""


def sha256(path):
    """Returns the hex sha256 of a file."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _files(directory):
    for root, _, names in os.walk(directory):
        for name in sorted(names):
            path = os.path.join(root, name)
            relative = os.path.relpath(path, directory).replace(os.sep, "/")
            if relative != METADATA_FILE:
                yield relative


def _write_json(path, value):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, indent=2, sort_keys=True)
        f.write("\n")


def save_preset(model, directory, preprocessor=None, metadata=None):
    """Writes `model` (and its preprocessor) as a preset directory.

    Args:
        model: a built `keras.Model` whose class is registered serializable.
        directory: str. Created if missing; existing preset files are
            overwritten.
        preprocessor: optional `keras.layers.Layer` saved beside the model;
            its assets (e.g. vocabularies) go to `assets/`.
        metadata: optional dict merged into `metadata.json` (e.g. metrics,
            the training command, the data split).

    Returns:
        The metadata dict that was written.

    Example:
    >>> save_preset(model, "presets/my_model", metadata={"metrics": {"bleu": 12.3}})
    """
    os.makedirs(directory, exist_ok=True)
    _write_json(
        os.path.join(directory, CONFIG_FILE), keras.saving.serialize_keras_object(model)
    )
    weights_path = os.path.join(directory, WEIGHTS_FILE)
    model.save_weights(weights_path)
    _drop_optimizer_state(weights_path)
    if preprocessor is not None:
        _write_json(
            os.path.join(directory, PREPROCESSOR_FILE),
            keras.saving.serialize_keras_object(preprocessor),
        )
        assets = os.path.join(directory, ASSETS_DIR)
        os.makedirs(assets, exist_ok=True)
        if hasattr(preprocessor, "save_assets"):  # Keras layers may have none.
            preprocessor.save_assets(assets)
    import keras_attention

    meta = {
        "format_version": FORMAT_VERSION,
        "class_name": type(model).__name__,
        "registered_name": keras.saving.get_registered_name(type(model)),
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(
            timespec="seconds"
        ),
        "versions": {
            "keras_attention": keras_attention.__version__,
            "keras": keras.__version__,
            "backend": keras.backend.backend(),
            "python": platform.python_version(),
        },
        "parameters": int(model.count_params()),
    }
    meta.update(metadata or {})
    meta["files"] = {
        name: sha256(os.path.join(directory, name)) for name in _files(directory)
    }
    _write_json(os.path.join(directory, METADATA_FILE), meta)
    return meta


def _drop_optimizer_state(path):
    """Rewrites a weights file without a compiled model's optimizer state.

    A preset holds the model, not a training run: whoever fine-tunes it
    compiles their own optimizer. (Keras writes the optimizer variables of
    a compiled model into `.weights.h5`, which tripled the Seq2Seq preset.)
    The file is copied rather than edited, because HDF5 does not give back
    the space of deleted groups.
    """
    import h5py

    with h5py.File(path, "r") as f:
        if "optimizer" not in f:
            return
    temporary = path + ".tmp"
    with h5py.File(path, "r") as source, h5py.File(temporary, "w") as target:
        for key, value in source.attrs.items():
            target.attrs[key] = value
        for name in source:
            if name != "optimizer":
                source.copy(source[name], target, name=name)
    os.replace(temporary, path)


def read_metadata(directory):
    """Reads `metadata.json` of a preset, with clear errors."""
    if not os.path.isdir(directory):
        raise PresetError(f"Preset directory not found: {directory}")
    path = os.path.join(directory, METADATA_FILE)
    if not os.path.isfile(path):
        raise PresetError(
            f"Preset {directory} has no {METADATA_FILE}: missing file {path}"
        )
    try:
        with open(path, encoding="utf-8") as f:
            meta = json.load(f)
    except json.JSONDecodeError as e:
        raise PresetError(f"Corrupt preset file {path}: {e}") from e
    if not isinstance(meta, dict):
        raise PresetError(f"Corrupt preset file {path}: not a JSON object")
    version = str(meta.get("format_version", "0"))
    major = version.split(".")[0]
    if not major.isdigit():
        raise PresetError(f"Corrupt preset file {path}: format_version={version!r}")
    if int(major) > int(FORMAT_VERSION.split(".")[0]):
        raise PresetError(
            f"Preset {directory} has format version {version}, newer than this "
            f"library's {FORMAT_VERSION}: upgrade keras-attention-zoo to load it."
        )
    _check_versions(directory, meta.get("versions", {}))
    return meta


def _major(version):
    """The leading integer of a version string (`"3.15.1"` -> 3), or None."""
    head = str(version).split(".")[0]
    return int(head) if head.isdigit() else None


def _check_versions(directory, saved):
    """Refuses a preset saved by a newer major version of a package."""
    import keras_attention

    if not isinstance(saved, dict):
        raise PresetError(
            f"Corrupt preset file {os.path.join(directory, METADATA_FILE)}: "
            f"versions={saved!r} is not a JSON object"
        )
    running = {
        "keras_attention": ("keras-attention-zoo", keras_attention.__version__),
        "keras": ("Keras", keras.__version__),
    }
    for key, (package, version) in running.items():
        if key not in saved:
            continue
        major, running_major = _major(saved[key]), _major(version)
        if None not in (major, running_major) and major > running_major:
            raise PresetError(
                f"Preset {directory} was saved by {package} {saved[key]}, a "
                f"newer major version than the running {version}: upgrade "
                f"{package} to load it."
            )


def verify_preset(directory):
    """Checks the directory holds exactly the listed files, with their sha256.

    Returns:
        The metadata dict.

    Raises:
        PresetError: naming the unlisted files, or the first missing or
            changed file; or when the preset is from a newer major version.
    """
    meta = read_metadata(directory)
    listed = meta.get("files", {})
    for name in (CONFIG_FILE, WEIGHTS_FILE):
        if name not in listed:
            raise PresetError(f"Preset {directory} lists no {name} in its metadata")
    unlisted = sorted(set(_files(directory)) - set(listed))
    if unlisted:
        raise PresetError(
            f"Preset {directory} holds files its {METADATA_FILE} does not list "
            f"(added after it was saved?): {', '.join(unlisted)}. Remove them, "
            "or save the preset again."
        )
    for name, digest in sorted(listed.items()):
        path = os.path.join(directory, name)
        if not os.path.isfile(path):
            raise PresetError(f"Preset {directory} is missing file {name} ({path})")
        if sha256(path) != digest:
            raise PresetError(
                f"Checksum mismatch for {path}: the file is corrupt, truncated "
                "or was changed after the preset was saved."
            )
    return meta


def _read_object(path):
    try:
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
    except json.JSONDecodeError as e:
        raise PresetError(f"Corrupt preset file {path}: {e}") from e
    try:
        return keras.saving.deserialize_keras_object(config, safe_mode=True)
    except Exception as e:  # Keras raises several types here.
        raise PresetError(f"Cannot rebuild the object in {path}: {e}") from e


def load_preset(directory, expected_class=None, load_weights=True, **overrides):
    """Verifies and loads a preset directory written by `save_preset`.

    Args:
        directory: str. The preset directory.
        expected_class: optional class; the preset must hold an instance of
            it (or of a subclass).
        load_weights: bool. Defaults to `True`.
        **overrides: config entries replaced before the model is rebuilt
            (e.g. `dropout=0.0`).

    Returns:
        `(model, preprocessor, metadata)`; `preprocessor` is `None` when the
        preset has none.
    """
    meta = verify_preset(directory)
    preprocessor = None
    pre_path = os.path.join(directory, PREPROCESSOR_FILE)
    if os.path.isfile(pre_path):
        preprocessor = _read_object(pre_path)
        if hasattr(preprocessor, "load_assets"):
            preprocessor.load_assets(os.path.join(directory, ASSETS_DIR))
    config_path = os.path.join(directory, CONFIG_FILE)
    try:
        with open(config_path, encoding="utf-8") as f:
            config = json.load(f)
    except json.JSONDecodeError as e:
        raise PresetError(f"Corrupt preset file {config_path}: {e}") from e
    config.setdefault("config", {}).update(overrides)
    if preprocessor is not None:
        config["config"]["preprocessor"] = preprocessor
    try:
        model = keras.saving.deserialize_keras_object(config, safe_mode=True)
    except Exception as e:
        raise PresetError(f"Cannot rebuild the model in {config_path}: {e}") from e
    if expected_class is not None and not isinstance(model, expected_class):
        raise PresetError(
            f"Preset {directory} holds a {type(model).__name__}, not a "
            f"{expected_class.__name__}."
        )
    if load_weights:
        weights = os.path.join(directory, WEIGHTS_FILE)
        try:
            with warnings.catch_warnings():
                # Presets store no optimizer state (see `save_preset`), so
                # Keras's notice that it skipped the optimizer is expected.
                warnings.filterwarnings(
                    "ignore", message="Skipping variable loading for optimizer"
                )
                model.load_weights(weights)
        except Exception as e:
            raise PresetError(f"Cannot read weights file {weights}: {e}") from e
    return model, preprocessor, meta
