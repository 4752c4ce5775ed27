"""`save_preset`: a model (and its preprocessor) written as a preset, atomically."""

import datetime
import os
import platform
import shutil

import keras

from keras_attention.presets.durable import (
    locked,
    new_sibling,
    remove_abandoned,
    sha256,
    swap_into_place,
    sync_directory,
    sync_tree,
    write_json,
)
from keras_attention.presets.format import (
    ASSETS_DIR,
    CONFIG_FILE,
    FORMAT_VERSION,
    METADATA_FILE,
    PREPROCESSOR_FILE,
    WEIGHTS_FILE,
    PresetError,
)

# A preset's JSON files: keys sorted, a final newline; written in place, as
# the whole folder is flushed and swapped into place (`save_preset`).
_JSON = {"sort_keys": True, "newline": True, "atomic": False}


def save_preset(model, directory, preprocessor=None, metadata=None):
    """Writes `model` (and its preprocessor) as a preset directory, atomically.

    The preset is written to a hidden sibling folder and swapped into place,
    so the directory holds the old preset or the new one at every moment,
    even when the process is killed. An existing directory is replaced
    whole: files of an older preset there are not kept.

    Args:
        model: a built `keras.Model` whose class is registered serializable.
        directory: str or path-like. Created if missing; it may exist when it
            is empty or holds a preset (it is then replaced). A symbolic link
            is followed.
        preprocessor: optional `keras.layers.Layer` saved beside the model;
            its assets (e.g. vocabularies) go to `assets/`.
        metadata: optional dict merged into `metadata.json` (e.g. metrics,
            the training command, the data split).

    Returns:
        The metadata dict that was written.

    Raises:
        PresetError: `directory` exists and is a file, or a folder that
            holds files but no preset.

    Example:
    >>> import tempfile
    >>> from keras_attention.presets import load_preset
    >>> inputs = keras.Input((2,))
    >>> model = keras.Model(inputs, keras.layers.Dense(1)(inputs))
    >>> directory = tempfile.mkdtemp()
    >>> meta = save_preset(model, directory, metadata={"metrics": {"bleu": 12.3}})
    >>> sorted(meta["files"])
    ['config.json', 'model.weights.h5']
    >>> loaded, preprocessor, meta = load_preset(directory)
    >>> loaded.count_params(), preprocessor, meta["metrics"]
    (3, None, {'bleu': 12.3})
    """
    directory = os.path.realpath(os.fspath(directory))
    parent, name = os.path.split(directory)
    os.makedirs(parent, exist_ok=True)
    _check_replaceable(directory)
    work = new_sibling(parent, name)
    try:
        meta = _write_preset(model, work, preprocessor, metadata)
        sync_tree(work)
        with locked(parent):
            _check_replaceable(directory)
            old = swap_into_place(work, directory)
            sync_directory(parent)
            remove_abandoned(parent, name)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if old is not None and old != work:
        shutil.rmtree(old, ignore_errors=True)
    return meta


def _check_replaceable(directory):
    if not os.path.lexists(directory):
        return
    if not os.path.isdir(directory):
        raise PresetError(f"Cannot save a preset to {directory}: it is not a folder.")
    names = os.listdir(directory)
    if names and METADATA_FILE not in names:
        raise PresetError(
            f"Cannot save a preset to {directory}: the folder holds files and "
            f"no {METADATA_FILE}, so it is not a preset to replace. Choose a "
            "new or empty folder."
        )


def _files(directory):
    for root, _, names in os.walk(directory):
        for name in sorted(names):
            path = os.path.join(root, name)
            relative = os.path.relpath(path, directory).replace(os.sep, "/")
            if relative != METADATA_FILE:
                yield relative


def _write_preset(model, directory, preprocessor, metadata):
    write_json(
        os.path.join(directory, CONFIG_FILE),
        keras.saving.serialize_keras_object(model),
        **_JSON,
    )
    weights_path = os.path.join(directory, WEIGHTS_FILE)
    model.save_weights(weights_path)
    _drop_optimizer_state(weights_path)
    if preprocessor is not None:
        write_json(
            os.path.join(directory, PREPROCESSOR_FILE),
            keras.saving.serialize_keras_object(preprocessor),
            **_JSON,
        )
        assets = os.path.join(directory, ASSETS_DIR)
        os.makedirs(assets, exist_ok=True)
        if hasattr(preprocessor, "save_assets"):  # Keras layers may have none.
            preprocessor.save_assets(assets)
        if not os.listdir(assets):
            os.rmdir(assets)  # A preset holds no empty folder.
    import keras_attention

    meta = {
        "format_version": FORMAT_VERSION,
        "class_name": type(model).__name__,
        "registered_name": keras.saving.get_registered_name(type(model)),
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
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
    write_json(os.path.join(directory, METADATA_FILE), meta, **_JSON)
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
