"""The preset format: its files, its metadata, and the limits a reader holds
it to.

The layout and the checks are described in `keras_attention.presets`.
"""

import json
import os
import re

import keras

FORMAT_VERSION = "1.0"
CONFIG_FILE = "config.json"
PREPROCESSOR_FILE = "preprocessor.json"
WEIGHTS_FILE = "model.weights.h5"
METADATA_FILE = "metadata.json"
ASSETS_DIR = "assets"
_MIB = 1 << 20
_GIB = 1 << 30

#: The largest `config.json`, `preprocessor.json` or `metadata.json` a preset
#: may hold (the shipped presets' largest is 24 KB: a RAM preset's metadata).
MAX_JSON_BYTES = 4 * _MIB

#: The largest `model.weights.h5` (the shipped presets' largest is 33 MB, the
#: Transformer's; 2 GiB holds 500 million float32 weights).
MAX_WEIGHTS_BYTES = 2 * _GIB

#: The largest file under `assets/` (the shipped presets' largest is 80 KB, a
#: 10,824-word vocabulary; 8 MiB holds a vocabulary of half a million words).
MAX_ASSET_BYTES = 8 * _MIB

#: The largest sum of a preset's files, `metadata.json` included.
MAX_TOTAL_BYTES = MAX_WEIGHTS_BYTES + 64 * _MIB

_DIGEST = re.compile(r"[0-9a-f]{64}")


class PresetError(ValueError):
    """A preset directory is missing, incomplete, corrupt, unsafe or too new.

    A `ValueError`; its message names the preset and the file at fault.

    Example:
    >>> import tempfile
    >>> from keras_attention.presets import verify_preset
    >>> try:
    ...     verify_preset(os.path.join(tempfile.mkdtemp(), "missing"))
    ... except PresetError as e:
    ...     print(isinstance(e, ValueError), str(e).startswith("Preset directory"))
    True True
    """


def shown(name):
    """A file name fit for a message (odd bytes escaped)."""
    return name if name.isprintable() else ascii(name)


def size_limit(name):
    """`(limit in bytes, what the file is)` for a file of a preset."""
    if name in (CONFIG_FILE, PREPROCESSOR_FILE, METADATA_FILE):
        return MAX_JSON_BYTES, "a JSON file"
    if name == WEIGHTS_FILE:
        return MAX_WEIGHTS_BYTES, "a weights file"
    return MAX_ASSET_BYTES, "an asset"


def amount(size):
    """`size` bytes in words: `'3221225472 bytes (3.0 GiB)'`."""
    for unit, scale in (("GiB", _GIB), ("MiB", _MIB), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size} bytes ({size / scale:.1f} {unit})"
    return f"{size} bytes"


def parse_json(data, path):
    """Decodes UTF-8 JSON bytes, or raises a `PresetError` naming `path`."""
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise PresetError(f"Corrupt preset file {path}: not UTF-8 ({e})") from e
    except json.JSONDecodeError as e:
        raise PresetError(f"Corrupt preset file {path}: {e}") from e
    except RecursionError as e:
        raise PresetError(f"Corrupt preset file {path}: nested too deeply") from e


def check_metadata(meta, directory, path):
    """Returns the parsed `metadata.json`, refused when it is not an object or
    is from a newer major version of the format or of a package."""
    if not isinstance(meta, dict):
        raise PresetError(f"Corrupt preset file {path}: not a JSON object")
    version = meta.get("format_version", "0")
    if not isinstance(version, (str, int, float)) or isinstance(version, bool):
        raise PresetError(f"Corrupt preset file {path}: format_version={version!r}")
    major = str(version).split(".")[0]
    if not major.isdigit():
        raise PresetError(
            f"Corrupt preset file {path}: format_version={str(version)!r}"
        )
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


def listed_files(meta, directory):
    """The `files` of the metadata, each name checked before anything is opened."""
    path = os.path.join(directory, METADATA_FILE)
    listed = meta.get("files")
    if not isinstance(listed, dict):
        raise PresetError(
            f"Corrupt preset file {path}: files={listed!r:.80} is not a JSON object"
        )
    for name, digest in listed.items():
        parts = name.split("/")
        if (
            not name
            or name == METADATA_FILE
            or any(part in ("", ".", "..") for part in parts)
            or any(c in name for c in "\\\0")
            or not name.isprintable()
        ):
            raise PresetError(
                f"Unsafe file name {name!r} in {path}: a preset lists only "
                "relative paths inside its directory (no '..', no absolute "
                "path)."
            )
        if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
            raise PresetError(
                f"Corrupt preset file {path}: the sha256 of {name} is "
                f"{digest!r:.80}, not 64 hex digits"
            )
    for name in (CONFIG_FILE, WEIGHTS_FILE):
        if name not in listed:
            raise PresetError(f"Preset {directory} lists no {name} in its metadata")
    return listed
