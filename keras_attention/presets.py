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

A checksum is not a signature: whoever can edit a preset can edit its
`metadata.json` too. So loading trusts nothing in the directory:

- `metadata.json` may list only plain relative names inside the directory
  (no `..`, no absolute path), checked before any file is opened; the
  directory must hold exactly the listed files, as regular files in real
  folders (a symbolic link, a device, a FIFO or an empty folder is refused).
- Every listed file's size, apparent (`st_size`) and allocated on disk
  (`st_blocks`, which a sparse file keeps small), is checked against a cap
  for its kind (`MAX_JSON_BYTES`, `MAX_WEIGHTS_BYTES`, `MAX_ASSET_BYTES`)
  and their sum against `MAX_TOTAL_BYTES`, before any file is copied or
  parsed; each read stops at its cap too, should a file grow meanwhile.
- Each file is read once, through the directory's open handle, hashed and
  copied into a private temporary folder, and everything is then parsed from
  that copy: a preset being rewritten while it loads gives the old preset
  or the new one (the read is retried when the directory was swapped),
  never a mix.
- JSON must be UTF-8 objects of the expected shape; configs are rebuilt in
  Keras safe mode, forced even after
  `keras.config.enable_unsafe_deserialization()`, and a config holding a
  Python lambda or another code or file payload (`Lambda`, `TFSMLayer`,
  `TorchModuleWrapper`), or an array of a dtype Keras never writes
  (`{"class_name": "__numpy__", ... "dtype": "U100000000"}`: 400 MB an
  element), is refused before anything is rebuilt; float weights must be
  finite.

Every problem is a `PresetError` (a `ValueError`) naming the file. A preset
saved by a newer major version of the format, of keras-attention-zoo or of
Keras is refused with a message saying so.

Saving is atomic: the preset is written into a hidden sibling folder,
flushed to disk, and swapped into place (Linux `renameat2` with
`RENAME_EXCHANGE`), so a reader, or a process killed at any point of the
save, finds the old preset or the new one. Stale files of an older preset
are never carried over. Saves into one parent folder are serialized with a
lock (`flock`).
"""

import contextlib
import ctypes
import datetime
import errno
import hashlib
import json
import os
import platform
import re
import secrets
import shutil
import stat
import tempfile
import warnings

import keras

try:
    import fcntl
except ImportError:  # Windows: no flock; saves are not serialized.
    fcntl = None

FORMAT_VERSION = "1.0"
CONFIG_FILE = "config.json"
PREPROCESSOR_FILE = "preprocessor.json"
WEIGHTS_FILE = "model.weights.h5"
METADATA_FILE = "metadata.json"
ASSETS_DIR = "assets"

# Configs that run code or read files outside the preset: refused even where
# Keras's safe mode has been switched off for the whole process.
CODE_CLASSES = frozenset({"__lambda__", "Lambda", "TFSMLayer", "TorchModuleWrapper"})
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
_MAX_DEPTH = 16
_MAX_FILES = 10_000
_READ_ATTEMPTS = 5
_DIGEST = re.compile(r"[0-9a-f]{64}")
_SAVING = ".saving-"
_BLOCK = 1 << 20


class PresetError(ValueError):
    """A preset directory is missing, incomplete, corrupt, unsafe or too new.

    A `ValueError`; its message names the preset and the file at fault.

    Example:
    >>> import tempfile
    >>> try:
    ...     verify_preset(os.path.join(tempfile.mkdtemp(), "missing"))
    ... except PresetError as e:
    ...     print(isinstance(e, ValueError), str(e).startswith("Preset directory"))
    True True
    """


class _Swapped(Exception):
    """The directory was replaced (by a save) while it was being read."""


def sha256(path):
    """Returns the hex sha256 of a file (what `metadata.json` records).

    Args:
        path: str or path-like. The file, read in blocks of 1 MiB.

    Returns:
        str. 64 lowercase hex digits.

    Example:
    >>> import tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "empty.txt")
    >>> open(path, "wb").close()
    >>> sha256(path)[:16]
    'e3b0c44298fc1c14'
    """
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(_BLOCK), b""):
            digest.update(block)
    return digest.hexdigest()


def _shown(name):
    """A file name fit for a message (odd bytes escaped)."""
    return name if name.isprintable() else ascii(name)


# Saving ------------------------------------------------------------------


def _write_json(path, value):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, indent=2, sort_keys=True)
        f.write("\n")


def _files(directory):
    for root, _, names in os.walk(directory):
        for name in sorted(names):
            path = os.path.join(root, name)
            relative = os.path.relpath(path, directory).replace(os.sep, "/")
            if relative != METADATA_FILE:
                yield relative


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
    work = _new_sibling(parent, name)
    try:
        meta = _write_preset(model, work, preprocessor, metadata)
        _sync_tree(work)
        with _locked(parent):
            _check_replaceable(directory)
            old = _swap_into_place(work, directory)
            _sync_directory(parent)
            _remove_abandoned(parent, name)
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


def _new_sibling(parent, name):
    """A new hidden folder beside the preset: `.<name>.saving-<pid>-<random>`."""
    while True:
        path = os.path.join(
            parent, f".{name}{_SAVING}{os.getpid()}-{secrets.token_hex(4)}"
        )
        try:
            os.mkdir(path)  # Default permissions, unlike mkdtemp's 0700.
            return path
        except FileExistsError:
            continue


def _write_preset(model, directory, preprocessor, metadata):
    _write_json(
        os.path.join(directory, CONFIG_FILE),
        keras.saving.serialize_keras_object(model),
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


def _sync_directory(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError:  # Some file systems cannot sync a folder.
        pass
    finally:
        os.close(fd)


def _sync_tree(directory):
    """Flushes every file, then every folder, of a tree to disk."""
    for root, _, names in os.walk(directory, topdown=False):
        for name in names:
            fd = os.open(os.path.join(root, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        _sync_directory(root)


@contextlib.contextmanager
def _locked(parent):
    """Holds an exclusive `flock` on the parent folder (one save at a time)."""
    if fcntl is None:
        yield
        return
    fd = os.open(parent, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # Releases the lock.


def _swap_into_place(work, directory):
    """Moves `work` to `directory`; returns the folder now holding the old one."""
    if not os.path.lexists(directory):
        os.rename(work, directory)
        return None
    if _exchange(work, directory):
        return work
    # No atomic exchange here: two renames, with a moment without `directory`.
    old = work + ".old"
    os.rename(directory, old)
    os.rename(work, directory)
    return old


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def _exchange(first, second):
    """Atomically swaps two paths (Linux `renameat2`); False where unsupported."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_uint,
    ]
    renameat2.restype = ctypes.c_int
    result = renameat2(
        _AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second), _RENAME_EXCHANGE
    )
    if result == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), second)


def _remove_abandoned(parent, name):
    """Deletes hidden save folders of `name` left by killed processes."""
    prefix = f".{name}{_SAVING}"
    for entry in os.listdir(parent):
        if not entry.startswith(prefix):
            continue
        pid = entry[len(prefix) :].split("-")[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(os.path.join(parent, entry), ignore_errors=True)


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # Another user's process, or no way to tell.
        return True
    return True


# Reading -----------------------------------------------------------------


def _parse_json(data, path):
    """Decodes UTF-8 JSON bytes, or raises a `PresetError` naming `path`."""
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise PresetError(f"Corrupt preset file {path}: not UTF-8 ({e})") from e
    except json.JSONDecodeError as e:
        raise PresetError(f"Corrupt preset file {path}: {e}") from e
    except RecursionError as e:
        raise PresetError(f"Corrupt preset file {path}: nested too deeply") from e


def _open_in(dir_fd, name):
    """Opens `name` (slash-separated) under a folder handle, following no link."""
    parts = name.split("/")
    opened = []
    fd = dir_fd
    try:
        for part in parts[:-1]:
            fd = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            opened.append(fd)
        # Non-blocking, so that a FIFO put there in a race cannot hang us.
        fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
    finally:
        for handle in opened:
            os.close(handle)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise PresetError(f"{_shown(name)} is not a regular file")
    return fd


def _size_limit(name):
    """`(limit in bytes, what the file is)` for a file of a preset."""
    if name in (CONFIG_FILE, PREPROCESSOR_FILE, METADATA_FILE):
        return MAX_JSON_BYTES, "a JSON file"
    if name == WEIGHTS_FILE:
        return MAX_WEIGHTS_BYTES, "a weights file"
    return MAX_ASSET_BYTES, "an asset"


def _amount(size):
    """`size` bytes in words: `'3221225472 bytes (3.0 GiB)'`."""
    for unit, scale in (("GiB", _GIB), ("MiB", _MIB), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size} bytes ({size / scale:.1f} {unit})"
    return f"{size} bytes"


def _check_size(fd, name, path):
    """The apparent size of an open preset file, refused above its limit.

    Both sizes count: the apparent one (what a read returns, and what a
    sparse file makes large without using the disk) and the one allocated
    on disk (`st_blocks`, large for a preallocated file), which may exceed
    the limit by `1/8` for the file system's blocks and preallocation.
    """
    info = os.fstat(fd)
    allocated = getattr(info, "st_blocks", 0) * 512
    limit, kind = _size_limit(name)
    if info.st_size > limit or allocated > limit + limit // 8:
        size = info.st_size if info.st_size > limit else allocated
        raise PresetError(
            f"Preset file {path} is too large: {_amount(size)} (apparent size "
            f"{info.st_size} bytes, allocated {allocated} bytes), over the "
            f"{_amount(limit)} limit for {kind}. It was not read."
        )
    return info.st_size


def _read_bounded(source, name, path):
    """Yields the blocks of an open file, refusing it past its size limit
    (a file that grew after its size was checked)."""
    limit, kind = _size_limit(name)
    left = limit + 1
    while block := source.read(min(_BLOCK, left)):
        left -= len(block)
        if not left:
            raise PresetError(
                f"Preset file {path} grew past the {_amount(limit)} limit for "
                f"{kind} while it was read."
            )
        yield block


def _read_small(dir_fd, name, path):
    """The bytes of a JSON file of the preset (at most `MAX_JSON_BYTES`)."""
    try:
        fd = _open_in(dir_fd, name)
    except FileNotFoundError:
        raise
    except OSError as e:  # ELOOP: a symbolic link.
        raise PresetError(f"Cannot open preset file {path}: {e}") from e
    with os.fdopen(fd, "rb") as f:
        _check_size(f.fileno(), name, path)
        return b"".join(_read_bounded(f, name, path))


def _check_metadata(meta, directory, path):
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
    >>> import tempfile
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


def _open_directory(directory):
    """A handle on the preset folder (the folder itself may be a link)."""
    try:
        return os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except (FileNotFoundError, NotADirectoryError):
        raise PresetError(f"Preset directory not found: {directory}") from None
    except OSError as e:
        raise PresetError(f"Cannot open preset directory {directory}: {e}") from e


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


def _listed_files(meta, directory):
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
                f"Preset {directory} holds a symbolic link, {_shown(name)}: a "
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
                    f"Preset {directory} holds an empty folder, {_shown(name)}, "
                    "that its metadata does not list. Remove it."
                )
            found += inner
        elif entry.is_file(follow_symlinks=False):
            found.append(name)
        else:
            raise PresetError(
                f"Preset {directory} holds {_shown(name)}, which is not a "
                "regular file (a device, FIFO or socket)."
            )
        if len(found) > _MAX_FILES:
            raise PresetError(f"Preset {directory} holds too many files")
    return found


def _open_listed(top, name, directory):
    """A handle on a listed file of the preset, with errors naming it."""
    path = os.path.join(directory, name)
    try:
        return _open_in(top, name)
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
            total += _check_size(fd, name, os.path.join(directory, name))
        finally:
            os.close(fd)
    if total > MAX_TOTAL_BYTES:
        raise PresetError(
            f"Preset {directory} is too large: its files hold {_amount(total)}, "
            f"over the {_amount(MAX_TOTAL_BYTES)} limit for a preset. No file "
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
        for block in _read_bounded(source, name, path):
            hasher.update(block)
            if target is not None:
                target.write(block)
    if hasher.hexdigest() != digest:
        raise PresetError(
            f"Checksum mismatch for {path}: the file is corrupt, truncated "
            "or was changed after the preset was saved."
        )


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
    return _check_metadata(_parse_json(data, path), directory, path)


def _verify_once(top, directory, destination):
    meta = _read_metadata_file(top, directory)
    listed = _listed_files(meta, directory)
    present = set(_tree(top, "", directory)) - {METADATA_FILE}
    unlisted = sorted(present - set(listed))
    if unlisted:
        raise PresetError(
            f"Preset {directory} holds files its {METADATA_FILE} does not list "
            f"(added after it was saved?): {', '.join(map(_shown, unlisted))}. "
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


def _verified(directory, destination=None):
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


def verify_preset(directory):
    """Checks the directory holds exactly the listed files, with their sha256.

    Returns:
        The metadata dict.

    Raises:
        PresetError: naming an unsafe listed name, a symbolic link, special
            file or empty folder, the unlisted files, or the first missing or
            changed file; or when the preset is from a newer major version.

    Example:
    >>> import tempfile
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
    return _verified(os.fspath(directory))


def _code_payload(value):
    """The first code or file payload (`CODE_CLASSES`) in a JSON config, or None."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            name = item.get("class_name")
            if isinstance(name, str) and name in CODE_CLASSES:
                return name
            if "__lambda__" in item:
                return "__lambda__"
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif item == "__lambda__":
            return item
    return None


# The arrays Keras writes into a config (`serialize_keras_object` of a NumPy
# array or a tensor) and the dtypes it writes them with; another dtype, such
# as NumPy's `"U100000000"` (400 MB an element), would let a few bytes of
# JSON allocate GiBs when Keras rebuilds the array.
ARRAY_CLASSES = frozenset({"__numpy__", "__tensor__"})
ARRAY_DTYPES = frozenset(
    "bool int8 int16 int32 int64 uint8 uint16 uint32 uint64 bfloat16 float16 "
    "float32 float64 float8_e4m3fn float8_e5m2 complex64 complex128".split()
)


def _array_payload(value):
    """`(class_name, dtype)` of the first array in a JSON config whose dtype
    is not in `ARRAY_DTYPES`, or None."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if item.get("class_name") in ARRAY_CLASSES:
                inner = item.get("config")
                dtype = inner.get("dtype") if isinstance(inner, dict) else None
                if not isinstance(dtype, str) or dtype not in ARRAY_DTYPES:
                    return item["class_name"], dtype
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


@contextlib.contextmanager
def _forced_safe_mode():
    """Keras safe mode for this block, even if the process switched it off.

    Keras offers `keras.config.enable_unsafe_deserialization()` to switch
    safe mode off for the process, and no public call to switch it back on;
    its `SafeModeScope` (what `keras.saving` uses) does that for a block.
    The scan of `_code_payload` does not depend on it.
    """
    try:
        from keras.src.saving.serialization_lib import SafeModeScope
    except ImportError:  # pragma: no cover - a Keras without it.
        yield
        return
    with SafeModeScope(True):
        yield


def _rebuild(config, path, what):
    if not isinstance(config, dict) or not isinstance(config.get("class_name"), str):
        raise PresetError(
            f"Corrupt preset file {path}: not a serialized Keras object "
            "(a JSON object with a class_name)"
        )
    if not isinstance(config.get("config", {}), dict):
        raise PresetError(f"Corrupt preset file {path}: its config is not an object")
    payload = _code_payload(config)
    if payload is not None:
        raise PresetError(
            f"Cannot rebuild the {what} in {path}: it holds a {payload!r} "
            "payload (code, or a file outside the preset), which a preset "
            "may not hold."
        )
    array = _array_payload(config)
    if array is not None:
        raise PresetError(
            f"Cannot rebuild the {what} in {path}: it holds a {array[0]!r} "
            f"array of dtype {array[1]!r:.80}; Keras writes arrays only of "
            f"the dtypes {', '.join(sorted(ARRAY_DTYPES))}."
        )
    return config


_MAX_MESSAGE = 4000


def _cause(error):
    """The message of an error and of the errors that caused it, on one line.

    Keras's own messages span lines and put the cause in the middle (a
    failed weights load says "Example error message for object <Dense>:
    Not allowed: H5 file with external Dataset ..." and ends with the list
    of objects), so the whole chain is kept: each message with its lines
    joined, outermost first, those already quoted by an outer one left out.
    A message over 4,000 characters (Keras quotes whole configs in the
    middle of its own) keeps its first 1,000 and last 3,000 and says how
    much of the middle was cut.
    """
    parts, seen = [], set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        text = " ".join(str(error).split()) or type(error).__name__
        if not any(text in part for part in parts):
            parts.append(text)
        error = error.__cause__ or (
            None if error.__suppress_context__ else error.__context__
        )
    message = " Caused by: ".join(parts)
    if len(message) > _MAX_MESSAGE:
        head, tail = _MAX_MESSAGE // 4, _MAX_MESSAGE - _MAX_MESSAGE // 4
        cut = len(message) - _MAX_MESSAGE
        message = f"{message[:head]} [... {cut} characters cut ...] {message[-tail:]}"
    return message


def _deserialize(config, path, what):
    try:
        with _forced_safe_mode():
            return keras.saving.deserialize_keras_object(config, safe_mode=True)
    except Exception as e:  # Keras raises several types here.
        raise PresetError(f"Cannot rebuild the {what} in {path}: {_cause(e)}") from e


def _read_config(copy, name, directory, what):
    path = os.path.join(directory, name)
    with open(os.path.join(copy, name), "rb") as f:
        return _rebuild(_parse_json(f.read(), path), path, what), path


def _check_finite(model, path):
    import numpy as np

    for variable in model.weights:
        if not keras.backend.is_float_dtype(variable.dtype):
            continue
        value = np.asarray(keras.ops.convert_to_numpy(variable), "float32")
        if not np.isfinite(value).all():
            raise PresetError(
                f"Weights file {path} holds NaN or infinite values "
                f"(in {variable.path})."
            )


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
    (see the module docstring), and everything is read from that copy.

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
    >>> import tempfile
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
        meta = _verified(directory, copy)
        preprocessor = None
        if PREPROCESSOR_FILE in meta["files"]:
            config, path = _read_config(copy, PREPROCESSOR_FILE, directory, "object")
            preprocessor = _deserialize(config, path, "object")
            if hasattr(preprocessor, "load_assets"):
                assets = os.path.join(copy, ASSETS_DIR)
                try:
                    preprocessor.load_assets(assets)
                except Exception as e:
                    raise PresetError(
                        f"Cannot read the assets of preset {directory} "
                        f"({os.path.join(directory, ASSETS_DIR)}): {_cause(e)}"
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
        model = _deserialize(config, config_path, "model")
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
                    f"Cannot read weights file {weights}: {_cause(e)}"
                ) from e
            _check_finite(model, weights)
    return model, preprocessor, meta
