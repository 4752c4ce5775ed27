"""`verify_preset` and `read_metadata`: a preset read through its folder's
handle, every file checked against its metadata and the limits."""

import contextlib
import hashlib
import os
import shutil

from keras_attention.presets.durable import check_size, open_in, read_bounded
from keras_attention.presets.format import (
    ASSETS_DIR,
    MAX_TOTAL_BYTES,
    METADATA_FILE,
    PresetError,
    amount,
    check_metadata,
    listed_files,
    parse_json,
    shown,
)

_MAX_DEPTH = 16
_MAX_FILES = 10_000
_READ_ATTEMPTS = 5


def verify_preset(directory):
    """Checks the directory holds exactly the listed files, with their sha256.

    Returns:
        The metadata dict.

    Raises:
        PresetError: naming an unsafe listed name, a symbolic link, special
            file or empty folder, the unlisted files, or the first missing or
            changed file; or when the preset is from a newer major version.

    Example:
    >>> import keras, tempfile
    >>> from keras_attention.presets import save_preset
    >>> inputs = keras.Input((2,))
    >>> model = keras.Model(inputs, keras.layers.Dense(1)(inputs))
    >>> directory = tempfile.mkdtemp()
    >>> _ = save_preset(model, directory)
    >>> sorted(verify_preset(directory)["files"])
    ['config.json', 'model.weights.h5']
    >>> with open(os.path.join(directory, "config.json"), "a") as f:
    ...     _ = f.write(" ")  # An edit the checksum catches.
    >>> try:
    ...     verify_preset(directory)
    ... except PresetError as e:
    ...     print("config.json" in str(e))
    True
    """
    return verified(os.fspath(directory))


def read_metadata(directory):
    """Reads `metadata.json` of a preset, with clear errors.

    Args:
        directory: str or path-like. The preset directory.

    Returns:
        The metadata dict (its file list is checked by `verify_preset`).

    Raises:
        PresetError: the directory or its `metadata.json` is missing, not
            UTF-8 JSON of the expected shape, or from a newer major version.

    Example:
    >>> import keras, tempfile
    >>> from keras_attention.presets import save_preset
    >>> inputs = keras.Input((2,))
    >>> model = keras.Model(inputs, keras.layers.Dense(1)(inputs))
    >>> directory = tempfile.mkdtemp()
    >>> _ = save_preset(model, directory, metadata={"command": "python train.py"})
    >>> meta = read_metadata(directory)
    >>> meta["command"], meta["format_version"]
    ('python train.py', '1.0')
    """
    directory = os.fspath(directory)
    top = _open_directory(directory)
    try:
        return _read_metadata_file(top, directory)
    finally:
        os.close(top)


def verified(directory, destination=None):
    """Verifies a preset; copies its files into `destination` when given.

    Retries when a save swapped the directory while it was being read, so a
    concurrent save never turns into a spurious error or a mixed read.
    """
    for _ in range(_READ_ATTEMPTS):
        top = _open_directory(directory)
        try:
            if destination is not None:
                shutil.rmtree(destination, ignore_errors=True)
                os.makedirs(destination)
            try:
                return _verify_once(top, directory, destination)
            except (PresetError, OSError) as e:
                if _swapped(top, directory):
                    continue
                if isinstance(e, PresetError):
                    raise
                raise PresetError(f"Cannot read preset {directory}: {e}") from e
        finally:
            os.close(top)
    raise PresetError(
        f"Preset {directory} was replaced {_READ_ATTEMPTS} times while it was "
        "read (is a process saving it in a loop?)."
    )


def _verify_once(top, directory, destination):
    meta = _read_metadata_file(top, directory)
    listed = listed_files(meta, directory)
    present = set(_tree(top, "", directory)) - {METADATA_FILE}
    unlisted = sorted(present - set(listed))
    if unlisted:
        raise PresetError(
            f"Preset {directory} holds files its {METADATA_FILE} does not list "
            f"(added after it was saved?): {', '.join(map(shown, unlisted))}. "
            "Remove them, or save the preset again."
        )
    for name in sorted(listed):
        if name not in present:
            raise PresetError(
                f"Preset {directory} is missing file {name} "
                f"({os.path.join(directory, name)})"
            )
    _check_sizes(top, listed, directory)
    for name, digest in sorted(listed.items()):
        _copy_verified(top, name, digest, directory, destination)
    return meta


def _swapped(top, directory):
    """Whether `directory` no longer names the folder `top` was opened on."""
    try:
        now = os.stat(directory)
    except OSError:
        return True
    then = os.fstat(top)
    return (now.st_dev, now.st_ino) != (then.st_dev, then.st_ino)


def _open_directory(directory):
    """A handle on the preset folder (the folder itself may be a link)."""
    try:
        return os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except (FileNotFoundError, NotADirectoryError):
        raise PresetError(f"Preset directory not found: {directory}") from None
    except OSError as e:
        raise PresetError(f"Cannot open preset directory {directory}: {e}") from e


def _read_metadata_file(top, directory):
    """The checked metadata dict of the preset open as the handle `top`."""
    path = os.path.join(directory, METADATA_FILE)
    try:
        data = _read_small(top, METADATA_FILE, path)
    except FileNotFoundError:
        raise PresetError(
            f"Preset {directory} has no {METADATA_FILE}: missing file {path}"
        ) from None
    except PresetError as e:
        raise PresetError(f"Preset {directory}: {e}") from e
    return check_metadata(parse_json(data, path), directory, path)


def _read_small(dir_fd, name, path):
    """The bytes of a JSON file of the preset (at most `MAX_JSON_BYTES`)."""
    try:
        fd = open_in(dir_fd, name)
    except FileNotFoundError:
        raise
    except OSError as e:  # ELOOP: a symbolic link.
        raise PresetError(f"Cannot open preset file {path}: {e}") from e
    with os.fdopen(fd, "rb") as f:
        check_size(f.fileno(), name, path)
        return b"".join(read_bounded(f, name, path))


def _tree(dir_fd, prefix, directory, depth=0):
    """The regular files under a folder handle; refuses anything else."""
    if depth > _MAX_DEPTH:
        raise PresetError(f"Preset {directory} nests folders too deeply: {prefix}")
    with os.scandir(dir_fd) as scan:
        entries = sorted(scan, key=lambda e: e.name)
    found = []
    for entry in entries:
        name = prefix + entry.name
        if entry.is_symlink():
            raise PresetError(
                f"Preset {directory} holds a symbolic link, {shown(name)}: a "
                "preset holds only regular files and folders."
            )
        if entry.is_dir(follow_symlinks=False):
            sub = os.open(
                entry.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd
            )
            try:
                inner = _tree(sub, name + "/", directory, depth + 1)
            finally:
                os.close(sub)
            if not inner and name != ASSETS_DIR:  # Old saves left it empty.
                raise PresetError(
                    f"Preset {directory} holds an empty folder, {shown(name)}, "
                    "that its metadata does not list. Remove it."
                )
            found += inner
        elif entry.is_file(follow_symlinks=False):
            found.append(name)
        else:
            raise PresetError(
                f"Preset {directory} holds {shown(name)}, which is not a "
                "regular file (a device, FIFO or socket)."
            )
        if len(found) > _MAX_FILES:
            raise PresetError(f"Preset {directory} holds too many files")
    return found


def _open_listed(top, name, directory):
    """A handle on a listed file of the preset, with errors naming it."""
    path = os.path.join(directory, name)
    try:
        return open_in(top, name)
    except FileNotFoundError:
        raise PresetError(
            f"Preset {directory} is missing file {name} ({path})"
        ) from None
    except OSError as e:
        raise PresetError(f"Cannot open preset file {path}: {e}") from e
    except PresetError as e:
        raise PresetError(f"Preset {directory}: {e}") from e


def _check_sizes(top, listed, directory):
    """Refuses a file over its kind's limit, or files over `MAX_TOTAL_BYTES`
    in all, before any is read."""
    total = 0
    for name in [METADATA_FILE, *sorted(listed)]:
        fd = _open_listed(top, name, directory)
        try:
            total += check_size(fd, name, os.path.join(directory, name))
        finally:
            os.close(fd)
    if total > MAX_TOTAL_BYTES:
        raise PresetError(
            f"Preset {directory} is too large: its files hold {amount(total)}, "
            f"over the {amount(MAX_TOTAL_BYTES)} limit for a preset. No file "
            "was copied."
        )


def _copy_verified(top, name, digest, directory, destination):
    """Reads a listed file once: hashes it and (optionally) copies the bytes."""
    path = os.path.join(directory, name)
    fd = _open_listed(top, name, directory)
    hasher = hashlib.sha256()
    with contextlib.ExitStack() as stack:
        source = stack.enter_context(os.fdopen(fd, "rb"))
        target = None
        if destination is not None:
            copy = os.path.join(destination, *name.split("/"))
            os.makedirs(os.path.dirname(copy), exist_ok=True)
            target = stack.enter_context(open(copy, "wb"))
        for block in read_bounded(source, name, path):
            hasher.update(block)
            if target is not None:
                target.write(block)
    if hasher.hexdigest() != digest:
        raise PresetError(
            f"Checksum mismatch for {path}: the file is corrupt, truncated "
            "or was changed after the preset was saved."
        )
