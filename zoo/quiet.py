"""TensorFlow imported without its start-up logs on the terminal.

Importing TensorFlow writes 6 to 10 lines to standard error from its C++
libraries (oneDNN, the CUDA stubs, the CPU features it was not built for;
on a machine with a CUDA build and no GPU an E-level `failed call to
cuInit`), before anything can set its log level: neither
`TF_CPP_MIN_LOG_LEVEL` nor Python's `logging` holds them. A user reads an
`E` line as a failure. So `import zoo` calls `hold_tensorflow_logs()`
first, and imports no TensorFlow itself (the model code runs without it):
whatever imports TensorFlow first (Keras on its TensorFlow backend, a
`tf.data` pipeline, a `LazyModule` of this module) sets
`TF_CPP_MIN_LOG_LEVEL=3` (only fatal C++ logs from then on; a value of the
user's own is kept) and imports it with file descriptor 2 pointed at a
temporary file. Of
what was written there it drops TensorFlow's own log records and writes
back everything else (a Python warning, a message nobody expected); an
import that fails writes back all of it before the error propagates.

Nothing is silenced when the user asks for the logs: `--verbose` on the
command line (`python -m zoo ... --verbose`, `keras-attention ...
--verbose`) or `ZOO_VERBOSE=1` in the environment. (`train`'s `--verbose N`,
with a number, is Keras's `fit` verbosity, as before: there `ZOO_VERBOSE=1`
shows the logs.) A `TF_CPP_MIN_LOG_LEVEL`
of the user's own is kept. Where TensorFlow was imported before the zoo,
its logs are already out and nothing changes.

This module imports nothing of the zoo, so `zoo/__init__.py` can call it
before anything imports TensorFlow.

Example:
>>> is_tensorflow_log("I0000 00:00:1795891229.082904    6553 port.cc:153] "
...                   "oneDNN custom operations are on.")
True
>>> is_tensorflow_log("warning: item.png: images of 28x28 are far from ...")
False
>>> drop_tensorflow_logs(
...     "WARNING: All log messages before absl::InitializeLog() is called "
...     "are written to STDERR\\n"
...     "W0000 00:00:17.5 8192 graph_view.cc:850] No registered kernel\\n"
...     "\\t.  Registered:  <no registered kernels>\\n"
...     "\\n"
...     "UserWarning: a warning of the user's own\\n")
"UserWarning: a warning of the user's own\\n"
"""

import importlib.abc
import importlib.util
import os
import re
import sys
import tempfile

#: The prefix of a record of absl's (and TensorFlow's) C++ logging:
#: severity and date, time, thread, file and line, e.g.
#: `E0000 00:00:1795891289.386033    8192 cuda_platform.cc:52] ...`.
_RECORD = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:[\d.]+\s+\d+ [\w.\-/]+:\d+\] ")

#: Lines TensorFlow writes at import without a record prefix.
_BARE_LINES = (
    "WARNING: All log messages before absl::InitializeLog() is called",
    "To enable the following instructions:",
)

#: What `--verbose` is, on either command (`python -m zoo`, `keras-attention`).
VERBOSE_FLAG = "--verbose"


def is_tensorflow_log(line):
    """Whether `line` is a record of TensorFlow's C++ logs, or its start-up text."""
    return bool(_RECORD.match(line)) or line.startswith(_BARE_LINES)


def drop_tensorflow_logs(text):
    """`text` without TensorFlow's log records, their indented or blank
    continuation lines and its bare start-up lines."""
    kept = []
    in_record = False
    for line in text.splitlines(keepends=True):
        if is_tensorflow_log(line):
            in_record = True
        elif in_record and (not line.strip() or line[0] in " \t"):
            continue
        else:
            in_record = False
            kept.append(line)
    return "".join(kept)


def verbose_requested(argv=None, environ=None):
    """Whether the user asked for TensorFlow's logs.

    Example:
    >>> verbose_requested(["-m", "translate", "p", "x", "--verbose"], {})
    True
    >>> verbose_requested(["-m", "presets"], {"ZOO_VERBOSE": "1"})
    True
    >>> verbose_requested(["-m", "presets"], {"ZOO_VERBOSE": "0"})
    False
    >>> verbose_requested(["-m", "train", "seq2seq", "--verbose", "2"], {})
    False
    """
    argv = sys.argv if argv is None else argv
    environ = os.environ if environ is None else environ
    flagged = any(
        arg == VERBOSE_FLAG and not following.isdigit()
        for arg, following in zip(argv[1:], [*argv[2:], ""])
    )
    return flagged or environ.get("ZOO_VERBOSE", "") not in ("", "0")


def import_tensorflow():
    """Imports TensorFlow (when installed), its start-up logs held back.

    Returns the module, or None where TensorFlow is not installed.
    """
    if sys.modules.get("tensorflow") is not None:
        return sys.modules["tensorflow"]
    if "tensorflow" in sys.modules or importlib.util.find_spec("tensorflow") is None:
        return None
    hold_tensorflow_logs()
    import tensorflow

    return tensorflow


def hold_tensorflow_logs():
    """Holds back TensorFlow's start-up logs whenever it is first imported.

    `import zoo` calls it and imports no TensorFlow itself: whatever imports
    it first (Keras on its TensorFlow backend, a `tf.data` pipeline, an
    export) imports it with descriptor 2 held, as the module docstring
    says. Nothing is held when the user asked for the logs, or once
    TensorFlow is imported.
    """
    if "tensorflow" in sys.modules or verbose_requested():
        return
    if not any(isinstance(f, _HeldImportFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _HeldImportFinder())


class _HeldImportFinder(importlib.abc.MetaPathFinder):
    """Finds `tensorflow` as the other finders do, with a loader that holds
    descriptor 2 while the package runs; then steps aside."""

    def find_spec(self, name, path=None, target=None):
        if name != "tensorflow":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            spec.loader = _HeldLoader(spec.loader)
        return spec


class _HeldLoader(importlib.abc.Loader):
    """Runs a module's loader with descriptor 2 pointed at a temporary file."""

    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        module.__spec__.loader = module.__loader__ = self.loader
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        sys.stderr.flush()
        with tempfile.TemporaryFile(mode="w+b") as held:
            saved = os.dup(2)
            os.dup2(held.fileno(), 2)
            try:
                self.loader.exec_module(module)
            except BaseException:
                _restore(saved, held, keep_all=True)
                raise
            _restore(saved, held, keep_all=False)


class LazyModule:
    """A module imported on first use, or an ImportError naming what needs it.

    The zoo's model code runs on JAX and PyTorch without TensorFlow; the
    parts that need TensorFlow (`tf.data` pipelines, tokenizers, exports,
    `tf.distribute`) name it at the top as `tf = LazyModule("tensorflow",
    "...")` and import it when first used. TensorFlow itself is imported
    through `import_tensorflow` (its logs held back).

    Args:
        name: str. The module.
        needed_for: str. What needs it, for the error: "<needed_for> needs
            <name>: pip install <package>".
        package: str. What pip installs. Defaults to `name`.

    Example:
    >>> json = LazyModule("json", "reading presets")
    >>> json.dumps([1])
    '[1]'
    >>> LazyModule("no_such_module", "this doctest").anything
    Traceback (most recent call last):
    ...
    ImportError: this doctest needs no_such_module, which is not installed: pip install no_such_module
    """

    def __init__(self, name, needed_for, package=None):
        self._name = name
        self._needed_for = needed_for
        self._package = package or name

    def _load(self):
        if self._name == "tensorflow":
            module = import_tensorflow()
        else:
            try:
                module = importlib.import_module(self._name)
            except ImportError:
                module = None
        if module is None:
            raise ImportError(
                f"{self._needed_for} needs {self._name}, which is not "
                f"installed: pip install {self._package}"
            )
        return module

    def __getattr__(self, attribute):
        if attribute.startswith("_"):
            raise AttributeError(attribute)
        return getattr(self._load(), attribute)


def tensorflow_installed():
    """Whether TensorFlow can be imported (it is not imported here).

    Example:
    >>> tensorflow_installed() == (importlib.util.find_spec("tensorflow") is not None)
    True
    """
    if "tensorflow" in sys.modules:
        return sys.modules["tensorflow"] is not None
    return importlib.util.find_spec("tensorflow") is not None


def tensorflow_imported():
    """Whether TensorFlow is imported: no object is TensorFlow's before.

    So `isinstance(x, tf.data.Dataset)` is asked only once it can be true.
    """
    return sys.modules.get("tensorflow") is not None


def _restore(saved, held, keep_all):
    """Points descriptor 2 back at the terminal and writes back what it kept."""
    sys.stderr.flush()
    os.dup2(saved, 2)
    os.close(saved)
    held.seek(0)
    text = held.read().decode("utf-8", "replace")
    text = text if keep_all else drop_tensorflow_logs(text)
    if text:
        sys.stderr.write(text)
        sys.stderr.flush()
