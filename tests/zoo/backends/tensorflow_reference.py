"""TensorFlow's answers for the backend comparisons, computed once per version.

`make test` runs `test_backends.py` and `test_backends_cli.py` twice, under
JAX and under PyTorch, and each compares with what a worker script gives
under TensorFlow: the same run, 25-30 s of CPU each. The first pass runs it
and keeps its answer (and the files it wrote) in pytest's cache folder; the
second reads it there. The key is a digest of everything the answer depends
on: every file of `keras_attention/` and `zoo/` (code, presets, samples),
the worker scripts, the Python version and the version of every installed
distribution. A changed file or package gives a new key, so an answer is
never one of other code; the older answers are deleted when a new one is
kept. Without the cache (`-p no:cacheprovider`) each run computes its own.
"""

import hashlib
import importlib.metadata
import json
import os
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
)
SOURCES = ("keras_attention", "zoo")
ANSWER = "answer.json"
# An unfinished run older than this failed: its folder is deleted.
STALE_SECONDS = 3600


def fingerprint(*scripts):
    """A digest of the sources, `scripts`, Python and the installed packages."""
    digest = hashlib.sha256(sys.version.encode())
    versions = sorted(
        f"{d.metadata['Name']}=={d.version}" for d in importlib.metadata.distributions()
    )
    digest.update("\n".join(versions).encode())
    paths = list(scripts)
    for source in SOURCES:
        for folder, folders, names in os.walk(os.path.join(ROOT, source)):
            folders[:] = sorted(f for f in folders if f != "__pycache__")
            paths += [os.path.join(folder, n) for n in sorted(names)]
    for path in paths:
        digest.update(os.path.relpath(path, ROOT).encode() + b"\0")
        with open(path, "rb") as f:
            digest.update(hashlib.sha256(f.read()).digest())
    return digest.hexdigest()[:20]


class Reference:
    """TensorFlow's answer to one worker, cached under `name`.

    `answer` is the cached answer, or None: then run the worker with its
    files in `folder` and hand its answer to `keep`. Either way `folder`
    holds the files of the answer afterwards.
    """

    def __init__(self, config, name, *scripts):
        self.answer, self._final = None, None
        try:
            parent = config.cache.mkdir(name)
        except (AttributeError, OSError):  # No cache, or none to write.
            self.folder = tempfile.mkdtemp(prefix=f"{name}-tensorflow-")
            return
        self._final = os.path.join(parent, fingerprint(*scripts))
        try:
            with open(os.path.join(self._final, ANSWER)) as f:
                self.answer = json.load(f)
            self.folder = self._final
        except (OSError, ValueError):  # Not kept yet (or a torn file).
            self.folder = tempfile.mkdtemp(prefix=".partial-", dir=parent)

    def keep(self, answer):
        """Stores `answer` (JSON) with the files in `folder`; returns it."""
        self.answer = answer
        if self._final is None:
            return answer
        with open(os.path.join(self.folder, ANSWER), "w") as f:
            json.dump(answer, f)
        parent = os.path.dirname(self._final)
        for old in os.listdir(parent):  # Other versions', and runs that failed.
            path = os.path.join(parent, old)
            stale = time.time() - os.path.getmtime(path) > STALE_SECONDS
            if path != self.folder and (not old.startswith(".partial-") or stale):
                shutil.rmtree(path, ignore_errors=True)
        try:
            os.rename(self.folder, self._final)
            self.folder = self._final
        except OSError:  # Kept meanwhile by another run: keep this one's files.
            pass
        return answer
