"""Durable files: locks, atomic writes and swaps, fsync, bounded reads.

What `keras_attention.presets` stands on, and the training run directory
(`zoo.training.run_directory`) too: a file or folder is written beside its
destination, flushed to disk and renamed into place, so a reader, or a
process killed at any point, finds the old one or the new one; a read goes
through a folder's open handle, follows no symbolic link and stops at a size
limit.
"""

import contextlib
import ctypes
import errno
import hashlib
import json
import os
import secrets
import shutil
import stat
import tempfile

from keras_attention.presets.format import PresetError, amount, shown, size_limit

try:
    import fcntl
except ImportError:  # Windows: no flock; saves are not serialized.
    fcntl = None

BLOCK = 1 << 20
_SAVING = ".saving-"


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
        for block in iter(lambda: f.read(BLOCK), b""):
            digest.update(block)
    return digest.hexdigest()


def write_json(path, value, *, indent=2, sort_keys=False, newline=False, atomic=True):
    """Writes `value` as JSON to `path`, atomically unless told otherwise.

    Args:
        path: str. The file; its folder must exist.
        value: a JSON-serializable value. It is serialized before any file
            is opened, so a value that cannot be leaves no file behind.
        indent: int. Spaces per level. Defaults to `2`.
        sort_keys: bool. Whether object keys are sorted. Defaults to `False`.
        newline: bool. Whether the text ends with a newline. Defaults to
            `False`.
        atomic: bool. When `True`, the text goes to a hidden sibling
            (`.<name>.<random>`, made by `tempfile.mkstemp`, so readable by
            its owner only: mode 0600), is flushed to disk (`fsync`) and
            renamed over `path` (`os.replace`): a reader, or a kill at any
            point, finds the old file or the new one. The folder is not
            synced (`sync_directory` does that). When `False`, `path` is
            written in place with default permissions, as a file of a
            folder that is synced and swapped into place whole. Defaults to
            `True`.

    Example:
    >>> folder = tempfile.mkdtemp()
    >>> path = os.path.join(folder, "results.json")
    >>> write_json(path, {"b": 1, "a": [2]}, indent=1, sort_keys=True)
    >>> print(open(path).read())
    {
     "a": [
      2
     ],
     "b": 1
    }
    >>> oct(os.stat(path).st_mode & 0o777), os.listdir(folder)
    ('0o600', ['results.json'])
    """
    text = json.dumps(value, indent=indent, sort_keys=sort_keys)
    if newline:
        text += "\n"
    if not atomic:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return
    folder, name = os.path.split(path)
    fd, work = tempfile.mkstemp(prefix=f".{name}.", dir=folder)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(work, path)


def sync_directory(path):
    """Flushes a folder's entries (new names, renames) to disk, where the file
    system can."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError:  # Some file systems cannot sync a folder.
        pass
    finally:
        os.close(fd)


def sync_tree(directory):
    """Flushes every file, then every folder, of a tree to disk."""
    for root, _, names in os.walk(directory, topdown=False):
        for name in names:
            fd = os.open(os.path.join(root, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        sync_directory(root)


@contextlib.contextmanager
def locked(parent):
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


def new_sibling(parent, name):
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


def swap_into_place(work, directory):
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


def remove_abandoned(parent, name):
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


def open_in(dir_fd, name):
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
        raise PresetError(f"{shown(name)} is not a regular file")
    return fd


def check_size(fd, name, path):
    """The apparent size of an open preset file, refused above its limit.

    Both sizes count: the apparent one (what a read returns, and what a
    sparse file makes large without using the disk) and the one allocated
    on disk (`st_blocks`, large for a preallocated file), which may exceed
    the limit by `1/8` for the file system's blocks and preallocation.
    """
    info = os.fstat(fd)
    allocated = getattr(info, "st_blocks", 0) * 512
    limit, kind = size_limit(name)
    if info.st_size > limit or allocated > limit + limit // 8:
        size = info.st_size if info.st_size > limit else allocated
        raise PresetError(
            f"Preset file {path} is too large: {amount(size)} (apparent size "
            f"{info.st_size} bytes, allocated {allocated} bytes), over the "
            f"{amount(limit)} limit for {kind}. It was not read."
        )
    return info.st_size


def read_bounded(source, name, path):
    """Yields the blocks of an open file, refusing it past its size limit
    (a file that grew after its size was checked)."""
    limit, kind = size_limit(name)
    left = limit + 1
    while block := source.read(min(BLOCK, left)):
        left -= len(block)
        if not left:
            raise PresetError(
                f"Preset file {path} grew past the {amount(limit)} limit for "
                f"{kind} while it was read."
            )
        yield block
