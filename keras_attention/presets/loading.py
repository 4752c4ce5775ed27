"""`load_preset`: a verified copy of a preset, rebuilt in safe mode."""

import os
import tempfile
import warnings

from keras_attention.presets.format import (
    ASSETS_DIR,
    CONFIG_FILE,
    PREPROCESSOR_FILE,
    WEIGHTS_FILE,
    PresetError,
    parse_json,
)
from keras_attention.presets.rebuild import (
    cause,
    check_config,
    check_finite,
    deserialize,
)
from keras_attention.presets.verification import verified


def load_preset(
    directory,
    expected_class=None,
    load_weights=True,
    configure=None,
    preprocessor_key=None,
    **overrides,
):
    """Verifies and loads a preset directory written by `save_preset`.

    The files are verified and copied into a private temporary folder first
    (see `keras_attention.presets`), and everything is read from that copy.

    Args:
        directory: str or path-like. The preset directory.
        expected_class: optional class; the preset must hold an instance of
            it (or of a subclass).
        load_weights: bool. Defaults to `True`.
        configure: optional callable `configure(config, preprocessor)`
            that edits the model's config dict (its constructor arguments,
            after `overrides`) in place before the model is rebuilt, e.g. to
            hand the model the loaded preprocessor (with its assets); the
            caller knows how its models take one. Defaults to `None`.
        preprocessor_key: deprecated; use `configure`. The config entry
            that receives the loaded preprocessor. Defaults to `None`.
        **overrides: config entries replaced before the model is rebuilt
            (e.g. `dropout=0.0`).

    Returns:
        `(model, preprocessor, metadata)`; `preprocessor` is `None` when the
        preset has none.

    Raises:
        PresetError: the directory is missing, incomplete, corrupt, unsafe
            or too new; the message names the file.

    Example:
    >>> import keras, tempfile
    >>> from keras_attention.presets import save_preset
    >>> inputs = keras.Input((2,))
    >>> model = keras.Model(inputs, keras.layers.Dense(1)(inputs), name="small")
    >>> directory = tempfile.mkdtemp()
    >>> _ = save_preset(model, directory, preprocessor=keras.layers.Rescaling(0.5))
    >>> def configure(config, preprocessor):  # The caller's convention.
    ...     config["name"] = f"small_{type(preprocessor).__name__.lower()}"
    >>> loaded, preprocessor, _ = load_preset(directory, configure=configure)
    >>> loaded.name, preprocessor.scale
    ('small_rescaling', 0.5)
    """
    directory = os.fspath(directory)
    with tempfile.TemporaryDirectory(prefix="preset-") as private:
        copy = os.path.join(private, "preset")
        meta = verified(directory, copy)
        preprocessor = None
        if PREPROCESSOR_FILE in meta["files"]:
            config, path = _read_config(copy, PREPROCESSOR_FILE, directory, "object")
            preprocessor = deserialize(config, path, "object")
            if hasattr(preprocessor, "load_assets"):
                assets = os.path.join(copy, ASSETS_DIR)
                try:
                    preprocessor.load_assets(assets)
                except Exception as e:
                    raise PresetError(
                        f"Cannot read the assets of preset {directory} "
                        f"({os.path.join(directory, ASSETS_DIR)}): {cause(e)}"
                    ) from e
        config, config_path = _read_config(copy, CONFIG_FILE, directory, "model")
        config.setdefault("config", {}).update(overrides)
        if preprocessor is not None and preprocessor_key is not None:
            warnings.warn(
                "`preprocessor_key` is deprecated: pass `configure`.",
                DeprecationWarning,
                stacklevel=2,
            )
            config["config"][preprocessor_key] = preprocessor
        if configure is not None:
            configure(config["config"], preprocessor)
        model = deserialize(config, config_path, "model")
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
                    model.load_weights(os.path.join(copy, WEIGHTS_FILE))
            except Exception as e:
                raise PresetError(
                    f"Cannot read weights file {weights}: {cause(e)}"
                ) from e
            check_finite(model, weights)
    return model, preprocessor, meta


def _read_config(copy, name, directory, what):
    path = os.path.join(directory, name)
    with open(os.path.join(copy, name), "rb") as f:
        return check_config(parse_json(f.read(), path), path, what), path
