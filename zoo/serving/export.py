"""SavedModel exports of zoo tasks: write, load, and run without the zoo.

`export(task, path)` writes a task as a TensorFlow SavedModel whose serving
signatures take raw inputs and return finished outputs: it asks the task
(`task.export(path)`), whose kind holds the exporter
(`zoo.translation.export`, `zoo.captioning.export`, a classifier's own);
this module knows the format only. `export_preset(preset, directory)` does
it for a preset
(`python -m zoo export PRESET DIR`). The artefact needs only `tensorflow`
(and `tensorflow_text` for a translator's tokenizers).

A SavedModel written to `BASE/1` (a numbered version folder) is what
`tensorflow_model_server --model_base_path=BASE` serves, and `python -m zoo
serve BASE` serves the same folder (`zoo.serving.server`: TF Serving's REST API).

`load(path)` reads an export back as an `Exported` callable (strings or
arrays in, NumPy out), and `run_without_zoo(code)` runs Python in a
subprocess where `zoo`, `keras_attention`, `keras_hub` and `keras` cannot be
imported: the proof that an export stands alone.
"""

import json
import os
import subprocess
import sys
import tempfile
import textwrap

from zoo.base import backends
from zoo.base.task import Task

#: Packages `run_without_zoo` hides from its subprocess.
HIDDEN_PACKAGES = ("zoo", "keras_attention", "keras_hub", "keras", "tf_keras")

#: The kinds as exports written before #41 named them -> today's names.
KINDS_BEFORE = {
    "translator": "translation",
    "captioner": "captioning",
    "classifier": "classification",
}

#: The export's description, beside the SavedModel (written by the exporters).
METADATA_FILE = os.path.join("assets.extra", "zoo_export.json")


def export(task, path, **options):
    """Writes `task` as a SavedModel with its preprocessing and search inside.

    The same as `task.export(path, **options)`: the task's kind writes it
    (`zoo.base.task.Task.export`), and a task of no kind refuses.

    Args:
        task: a zoo task.
        path: str or path-like. The SavedModel directory to write.
        **options: the kind's export settings (e.g. `beam_width`).

    Returns:
        The export's description (`read_metadata`).
    """
    return task.export(path, **options)


def export_preset(
    preset, directory, beam_width=None, dtype=None, quantize=None, **options
):
    """Loads a preset (name or directory) and exports it to `directory`.

    This is `python -m zoo export PRESET DIR [--beam N] [--dtype D]`, and
    writes what the loaded model's `export(directory)` writes.

    Args:
        preset: str. A shipped preset name or a preset directory.
        directory: str. The SavedModel directory to write.
        beam_width: optional int. The beam of `serving_default` for the
            generative tasks; defaults to their kind's (`4` for
            translation, as `translate`). A classifier refuses one.
        dtype: optional dtype policy the graph computes in (e.g.
            `"mixed_bfloat16"`); defaults to the preset's. The signatures'
            inputs and outputs keep their dtypes.
        quantize: optional quantization mode of the weights (`"int8"`,
            see `Task.quantize`). Defaults to `None` (as saved).
        **options: other export settings.

    Returns:
        The export's description, with the `preset` added.
    """
    backends.require_tensorflow("`export` (the serving SavedModel)")
    task = Task.from_preset(preset, **({"dtype": dtype} if dtype else {}))
    if quantize:
        task.quantize(quantize)
    if beam_width is not None:
        options["beam_width"] = beam_width
    metadata = task.export(directory, **options)
    metadata["preset"] = str(preset)
    write_metadata(directory, metadata)
    return metadata


def read_metadata(path):
    """The description an exporter wrote beside the SavedModel (a dict).

    The `kind` of an export written before the kinds had one vocabulary
    (`translator`, `captioner`, `classifier`) is read as today's.
    """
    with open(os.path.join(path, METADATA_FILE), encoding="utf-8") as f:
        metadata = json.load(f)
    if metadata.get("kind") in KINDS_BEFORE:
        metadata["kind"] = KINDS_BEFORE[metadata["kind"]]
    return metadata


def write_metadata(path, metadata):
    """Writes an export's description to `assets.extra/zoo_export.json`."""
    os.makedirs(os.path.join(path, "assets.extra"), exist_ok=True)
    with open(os.path.join(path, METADATA_FILE), "w", encoding="utf-8") as f:
        json.dump(metadata, f, indent=2, sort_keys=True)


def register_text_ops():
    """Registers tensorflow-text's ops without importing its Python package.

    A translator's graph holds tensorflow-text ops (WordPiece, regex
    split, Unicode normalization), which TensorFlow knows only once their
    libraries are loaded. `import tensorflow_text` loads them, but it also
    imports Keras (its Keras layers); this loads the op libraries alone,
    with TensorFlow and the standard library, so it runs where Keras is
    absent or hidden (and its source runs as is in such a process).

    Raises:
        ModuleNotFoundError: tensorflow-text is not installed.
    """
    import importlib.util
    import os

    import tensorflow as tf

    spec = importlib.util.find_spec("tensorflow_text")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            "A translator export needs tensorflow-text's ops: "
            "pip install tensorflow-text",
            name="tensorflow_text",
        )
    folder = os.path.join(spec.submodule_search_locations[0], "python", "ops")
    for name in sorted(os.listdir(folder)):
        if name.endswith(".so"):
            tf.load_op_library(os.path.join(folder, name))


class Exported:
    """A loaded export: call a signature with Python values, get NumPy back.

    Args:
        path: str. A SavedModel directory written by `export`.

    Call arguments:
        signature: str. The signature to run. Defaults to
            `"serving_default"`.
        **inputs: the signature's inputs (e.g. `text=["Jesus wept."]`,
            `beam_width=3`), converted to tensors of the signature's dtypes.

    Returns:
        A dict of NumPy arrays (`bytes` objects for strings).

    Example (a hand-made SavedModel with an export's description; a zoo
    export, e.g. `model.export(path)`, loads the same way):
    >>> import tempfile
    >>> import tensorflow as tf
    >>> class Doubler(tf.Module):
    ...     @tf.function(input_signature=[tf.TensorSpec((None,), tf.float32)])
    ...     def double(self, x):
    ...         return {"y": 2 * x}
    >>> module = Doubler()
    >>> with tempfile.TemporaryDirectory() as directory:
    ...     tf.saved_model.save(module, directory, signatures=module.double)
    ...     write_metadata(directory, {"kind": "doubler"})
    ...     exported = Exported(directory)
    >>> exported.metadata, sorted(exported.signatures)
    ({'kind': 'doubler'}, ['serving_default'])
    >>> exported(x=[1, 2])  # Python ints in, as the signature's float32
    {'y': array([2., 4.], dtype=float32)}
    >>> exported(y=[1])
    Traceback (most recent call last):
    ...
    ValueError: Signature 'serving_default' takes ['x']. Received: inputs=['y']
    """

    def __init__(self, path):
        import tensorflow as tf

        self.path = path
        self.metadata = read_metadata(path)
        if self.metadata.get("kind") == "translation":
            register_text_ops()
        self.saved_model = tf.saved_model.load(path)
        self.signatures = dict(self.saved_model.signatures)

    def __call__(self, signature="serving_default", **inputs):
        import tensorflow as tf

        if signature not in self.signatures:
            raise ValueError(
                f"`signature` must be one of {sorted(self.signatures)}. "
                f"Received: signature={signature!r}"
            )
        function = self.signatures[signature]
        specs = function.structured_input_signature[1]
        unknown = set(inputs) - set(specs)
        missing = set(specs) - set(inputs)
        if unknown or missing:
            raise ValueError(
                f"Signature {signature!r} takes {sorted(specs)}. "
                f"Received: inputs={sorted(inputs)}"
            )
        tensors = {
            name: tf.constant(value, dtype=specs[name].dtype)
            for name, value in inputs.items()
        }
        return {name: value.numpy() for name, value in function(**tensors).items()}


def load(path):
    """Loads an export as an `Exported` callable.

    Args:
        path: str. A SavedModel directory written by `export`.
    """
    return Exported(path)


# A first `sys.meta_path` finder that answers for the hidden packages with a
# spec without origin whose loader refuses to load: `import keras` raises
# `ModuleNotFoundError`, while `importlib.util.find_spec("keras")` (which
# TensorFlow's `__init__` calls to place `tf.keras`) sees no files, as when
# the package is not installed. (Raising in `find_spec` would break
# `import tensorflow`.)
_BLOCKER = textwrap.dedent(
    """
    import importlib.abc
    import importlib.machinery
    import sys

    HIDDEN = {hidden!r}

    class _Refused(importlib.abc.Loader):
        def create_module(self, spec):
            raise ModuleNotFoundError(
                f"No module named {{spec.name!r}} (hidden by zoo.serving.export)",
                name=spec.name,
            )

        def exec_module(self, module):
            raise ModuleNotFoundError(module.__name__)

    class _Hidden(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in HIDDEN:
                return importlib.machinery.ModuleSpec(name, _Refused())
            return None

    sys.meta_path.insert(0, _Hidden())
    """
)


def run_without_zoo(code, timeout=600, hidden=HIDDEN_PACKAGES):
    """Runs Python `code` in a subprocess that cannot import the zoo.

    The subprocess uses this interpreter, starts in an empty temporary
    directory (so the repository is not on `sys.path`), and a first
    `sys.meta_path` finder makes every import of the `hidden` packages
    (`zoo`, `keras_attention`, `keras_hub`, `keras`, `tf_keras`) raise
    `ModuleNotFoundError`: only TensorFlow, tensorflow-text and the
    standard library remain.

    Args:
        code: str. The Python source to run.
        timeout: float. Seconds before the subprocess is killed. Defaults
            to `600`.
        hidden: tuple of str. Top-level packages to hide. Defaults to
            `HIDDEN_PACKAGES`.

    Returns:
        The subprocess's standard output (str).

    Raises:
        RuntimeError: the code failed (the message holds its stderr).

    Example:
    >>> print(run_without_zoo('''
    ... try:
    ...     import zoo
    ... except ImportError as e:
    ...     print(type(e).__name__)
    ... '''), end="")
    ModuleNotFoundError
    """
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME")
    }
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    with tempfile.TemporaryDirectory() as directory:
        main = os.path.join(directory, "main.py")
        with open(main, "w", encoding="utf-8") as f:
            f.write(code)
        bootstrap = _BLOCKER.format(hidden=tuple(hidden)) + textwrap.dedent(
            f"""
            import runpy
            sys.path = [p for p in sys.path if p not in ("", {directory!r})]
            sys.argv = [{main!r}]
            runpy.run_path({main!r}, run_name="__main__")
            """
        )
        result = subprocess.run(
            [sys.executable, "-c", bootstrap],
            cwd=directory,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    if result.returncode != 0:
        raise RuntimeError(
            f"The code failed without the zoo (exit {result.returncode}):\n"
            f"{result.stderr[-4000:]}"
        )
    return result.stdout
