"""The family registry: every zoo family, registered by its own package.

A family's `family.py` (keras-free: names, presets, the task as a
`"module:Class"` reference) calls `register(__package__, "module:Class",
PRESETS, summary, kind=..., metrics_summary=...)`; the registry finds those
modules by discovery (`zoo/<name>/family.py`) the first time it is asked,
so listing the families imports no model code (and no Keras). The CLI (`train MODEL`, `presets`), `examples/demo.py` and the
cross-family tests read the registry instead of lists of their own. A
family is named after its folder (`zoo/<name>/`), which holds its presets
(`presets/<preset>/`), its model card (`README.md`) and its training script
(`train.py`, run by `python -m zoo train <name>`). Its kind is its task's
(`TaskClass.kind`: `"translation"`, `"captioning"` or `"classification"`).

The shipped presets are found here too: `list_presets` (each family's
presets, in its folder) and `resolve_preset` (a preset name or a directory,
as `Task.from_preset` takes it).

This module imports nothing of the zoo, so a family of any layer may
register.  It reads a preset's `metadata.json` itself (`read_metadata`,
bounded as `keras_attention.presets.read_metadata` bounds it), so the
listing needs no Keras.

Example:
>>> import zoo
>>> family = get("seq2seq")
>>> family.task.__name__, family.kind, list(family.presets)
('Seq2Seq', 'translation', ['seq2seq_bahdanau_bible_en_es'])
>>> family.card.endswith(os.path.join("zoo", "seq2seq", "README.md"))
True
>>> for_class_name("Seq2Seq") is family, for_class_name("Task")
(True, None)
"""

import dataclasses
import importlib
import json
import os
import pkgutil
import re
import stat
import sys
import warnings

#: The file of a preset folder that holds its metadata, as
#: `keras_attention.presets.METADATA_FILE` (a test checks they agree).
METADATA_FILE = "metadata.json"

#: The largest `metadata.json` read, as `keras_attention.presets.MAX_JSON_BYTES`.
MAX_METADATA_BYTES = 4 * 1024 * 1024

#: What a preset of no kind (or an unknown class) reports as its metrics.
NO_METRICS = "(no metrics recorded)"


@dataclasses.dataclass(frozen=True)
class Family:
    """One registered family.

    Attributes:
        name: str. The family's folder, and `train NAME`'s name.
        module: str. The family's package (e.g. `"zoo.seq2seq"`).
        task_path: str. The task class as `"module:Class"`; `task` imports
            it.
        kind: str. Its task's kind (`"translation"`, ...).
        presets: dict `{preset name: one-line description}` of the presets
            it ships, in `zoo/<name>/presets/`.
        summary: str. One line for `train --help`.
        folder: str. The family's folder.
        metrics_summary: callable `(metrics) -> str`: the line of quality
            its presets record (its kind's; `Task.metrics_summary` is the
            same function).
        preset_note: callable `(metadata) -> str or None`, or `None`: a
            line on what a preset is good for (`Task.preset_note`).

    Example:
    >>> import zoo
    >>> family = get("ram")
    >>> family.name, family.module, family.task.__name__
    ('ram', 'zoo.ram', 'RecurrentAttentionModel')
    """

    name: str
    module: str
    task_path: str
    kind: str
    presets: dict
    summary: str
    folder: str
    metrics_summary: object
    preset_note: object = None

    @property
    def task(self):
        """The task class (a subclass of a kind), imported on first use.

        Example:
        >>> get("seq2seq").task.kind
        'translation'
        """
        module, _, name = self.task_path.partition(":")
        return getattr(importlib.import_module(module), name)

    @property
    def task_name(self):
        """The task class's name, without importing it.

        Example:
        >>> get("show_attend_tell").task_name
        'ShowAttendTell'
        """
        return self.task_path.partition(":")[2]

    def note(self, metadata):
        """The line on what a preset (its `metadata`) is good for, or `None`.

        Example:
        >>> get("ram").note({"data": {"variant": "cluttered", "canvas_size": 100}})
        'trained on 100x100 canvases: good for image sides 50 to 125'
        >>> get("seq2seq").note({}) is None
        True
        """
        return None if self.preset_note is None else self.preset_note(metadata)

    @property
    def card(self):
        """The path of the family's model card (`README.md`).

        Example:
        >>> import zoo
        >>> os.path.isfile(get("ram").card)
        True
        """
        return os.path.join(self.folder, "README.md")

    @property
    def train_module(self):
        """The module `python -m zoo train NAME` runs (`<module>.train`).

        Example:
        >>> import zoo
        >>> get("transformer").train_module
        'zoo.transformer.train'
        """
        return f"{self.module}.train"

    def preset_folder(self, preset):
        """The folder of one of its presets.

        Example:
        >>> import zoo
        >>> family = get("seq2seq")
        >>> os.path.isdir(family.preset_folder("seq2seq_bahdanau_bible_en_es"))
        True
        """
        return os.path.join(self.folder, "presets", preset)


_FAMILIES = {}


def register(
    module, task, presets, summary, kind=None, metrics_summary=None, preset_note=None
):
    """Registers the family whose package is `module` (its `__package__`).

    Args:
        module: str. The family package's name; its last part is the
            family's name.
        task: the family's task class, or `"module:Class"` (imported when
            first used: then `kind` and `metrics_summary` are required).
        presets: dict `{name: description}` of its shipped presets.
        summary: str. One line for `train --help`.
        kind: str. The task's kind. Defaults to `task.kind` for a class.
        metrics_summary: callable `(metrics) -> str`. Defaults to the
            class's `metrics_summary`.
        preset_note: callable `(metadata) -> str or None`, or `None`.
            Defaults to the class's `preset_note`.

    Returns:
        The `Family`.

    Raises:
        ValueError: another family has this name, or a preset name is
            already another family's.
    """
    name = module.rsplit(".", 1)[-1]
    if not isinstance(task, str):
        kind = task.kind if kind is None else kind
        metrics_summary = metrics_summary or task.metrics_summary
        preset_note = preset_note or task.preset_note
        task = f"{task.__module__}:{task.__qualname__}"
    family = Family(
        name=name,
        module=module,
        task_path=task,
        kind=kind,
        presets=dict(presets),
        summary=summary,
        folder=os.path.dirname(os.path.abspath(sys.modules[module].__file__)),
        metrics_summary=metrics_summary,
        preset_note=preset_note,
    )
    if name in _FAMILIES and _FAMILIES[name].task_path != task:
        raise ValueError(f"A family named {name!r} is already registered.")
    taken = {p: f.name for f in _FAMILIES.values() if f.name != name for p in f.presets}
    clashes = sorted(set(family.presets) & set(taken))
    if clashes:
        raise ValueError(
            f"Family {name!r}: presets {clashes} are already registered by "
            f"{sorted({taken[p] for p in clashes})}."
        )
    _FAMILIES[name] = family
    return family


_DISCOVERED = []


def _discover():
    """Imports every `zoo/<name>/family.py` once (each registers its family).

    Only the `family` modules are imported (with their packages, whose
    public names load lazily), never the model code.
    """
    if _DISCOVERED:
        return
    _DISCOVERED.append(True)
    zoo = sys.modules.get("zoo") or importlib.import_module("zoo")
    for info in pkgutil.iter_modules(zoo.__path__):
        folder = os.path.join(info.module_finder.path, info.name)
        if info.ispkg and os.path.isfile(os.path.join(folder, "family.py")):
            importlib.import_module(f"zoo.{info.name}.family")


def families(kind=None):
    """The registered families, by name; only those of `kind` if given."""
    _discover()
    return [
        _FAMILIES[name]
        for name in sorted(_FAMILIES)
        if kind is None or _FAMILIES[name].kind == kind
    ]


def names():
    """The registered families' names, sorted."""
    _discover()
    return sorted(_FAMILIES)


def get(name):
    """The family called `name`, or a `ValueError` naming the choices."""
    _discover()
    if name not in _FAMILIES:
        raise ValueError(
            f"Unknown family {name!r}. Choose one of: {', '.join(names())}."
        )
    return _FAMILIES[name]


def for_class_name(class_name):
    """The family whose task class is called `class_name`, or `None`."""
    for family in families():
        if family.task_name == class_name:
            return family
    return None


def presets():
    """`{preset name: family}` of every registered preset."""
    return {p: f for f in families() for p in f.presets}


def list_presets():
    """Returns `{name: directory}` of every preset shipped with the zoo.

    A shipped preset is a preset of a registered family (`Family.presets`)
    whose folder (`Family.preset_folder`) holds a `metadata.json`;
    `Task.from_preset` (and each model's) takes its name. Families come in
    the order of their names, each one's presets sorted.

    Example:
    >>> import zoo
    >>> found = list_presets()
    >>> "seq2seq_bahdanau_bible_en_es" in found
    True
    >>> name = "ram_fashion_mnist_cluttered_100_long"
    >>> found[name].endswith(os.path.join("zoo", "ram", "presets", name))
    True
    """
    found = {}
    for family in families():
        for name in sorted(family.presets):
            directory = family.preset_folder(name)
            if os.path.isfile(os.path.join(directory, METADATA_FILE)):
                found[name] = directory
    return found


def _is_path(preset):
    """A path-like object, or a str with a separator or a leading `.` or `~`."""
    if not isinstance(preset, str):
        return True
    separators = [s for s in (os.sep, os.altsep) if s]
    return preset.startswith((".", "~")) or any(s in preset for s in separators)


def resolve_preset(preset):
    """Maps a preset name or directory to its directory, with clear errors.

    A path (path-like, or a str that holds a separator or starts with `.`
    or `~`) is a directory. A bare name is a shipped preset
    (`list_presets`), never a folder of the current directory: a folder
    named like a shipped preset cannot stand in for it (a warning says
    which one is loaded); write `./name` to load the folder.

    Args:
        preset: str or path-like.

    Returns:
        The directory (str).

    Raises:
        TypeError: `preset` is neither a str nor path-like.
        ValueError: a name that is no shipped preset (the message lists
            them), or a hub handle or URL (`hf://...`, `kaggle://...`,
            `https://...`), which this offline loader does not fetch.

    Example:
    >>> import zoo
    >>> resolve_preset("./my_preset")
    './my_preset'
    >>> resolve_preset("hf://keras/bert_base_en")
    Traceback (most recent call last):
    ...
    ValueError: `preset` 'hf://keras/bert_base_en' is a hf:// handle: this loader reads no hub or URL (it works offline). Pass a shipped preset's name (`python -m zoo presets` lists them) or a local preset folder (download it first).
    >>> resolve_preset("seq2seq_bahdanau_bible_en_es") == get(
    ...     "seq2seq").preset_folder("seq2seq_bahdanau_bible_en_es")
    True
    """
    if not isinstance(preset, (str, os.PathLike)):
        raise TypeError(
            f"`preset` must be a name or a path. Received: preset={preset!r:.80}"
        )
    scheme = re.match(r"([a-zA-Z][a-zA-Z0-9+.\-]*)://", str(preset))
    if isinstance(preset, str) and scheme:
        raise ValueError(
            f"`preset` {preset!r:.120} is a {scheme.group(1)}:// handle: this "
            "loader reads no hub or URL (it works offline). Pass a shipped "
            "preset's name (`python -m zoo presets` lists them) or a local "
            "preset folder (download it first)."
        )
    if _is_path(preset):
        return os.path.expanduser(os.fspath(preset))
    available = list_presets()
    local = os.path.isdir(preset)
    if preset in available:
        if local:
            warnings.warn(
                f"Loading the shipped preset {preset!r} ({available[preset]}), "
                f"not the folder {preset!r} of the current directory: pass "
                f"'./{preset}' to load that folder.",
                stacklevel=3,
            )
        return available[preset]
    names = ", ".join(available) or "(none shipped yet)"
    hint = f" To load the folder {preset!r} here, pass './{preset}'." if local else ""
    raise ValueError(
        f"Unknown preset {preset!r}: not a path, and not one of the "
        f"shipped presets: {names}.{hint}"
    )


def read_metadata(directory):
    """The `metadata.json` of a preset folder, read without Keras.

    As `keras_attention.presets.read_metadata` reads it, the file is
    bounded before it is read: a regular file (no link) of at most
    `MAX_METADATA_BYTES`, UTF-8 JSON of an object. It checks no versions
    (loading the preset does); `python -m zoo presets` lists with it.

    Raises:
        ValueError: the file is missing, a link, too large or not a JSON
            object.

    Example:
    >>> read_metadata(get("ram").preset_folder(
    ...     "ram_fashion_mnist_cluttered_100_long"))["class_name"]
    'RecurrentAttentionModel'
    """
    path = os.path.join(os.fspath(directory), METADATA_FILE)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError as e:
        raise ValueError(f"Cannot read preset file {path}: {e}") from e
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_METADATA_BYTES:
            raise ValueError(
                f"Preset file {path} is not a regular file of at most "
                f"{MAX_METADATA_BYTES} bytes"
            )
        data = f.read(MAX_METADATA_BYTES + 1)
    try:
        if len(data) > MAX_METADATA_BYTES:
            raise ValueError(f"grew past {MAX_METADATA_BYTES} bytes while read")
        meta = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError) as e:  # UnicodeDecodeError, JSONDecodeError
        raise ValueError(f"Corrupt preset file {path}: {e}") from e
    if not isinstance(meta, dict):
        raise ValueError(f"Corrupt preset file {path}: not a JSON object")
    return meta
