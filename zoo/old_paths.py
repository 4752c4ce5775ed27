"""The import paths of modules that moved, still importable.

The zoo's modules were sorted into folders by role (`zoo.base`,
`zoo.training`, `zoo.serving`, `zoo.captioning`, issue #41). Code written
against the old paths keeps working: `import zoo.task` gives the module
`zoo.base.task` itself (the same object, so its functions, classes and
patched attributes are shared), and `python -m zoo.show_attend_tell.evaluation`
runs `zoo.captioning.evaluation`. New code imports the new paths.

Example:
>>> import zoo.task
>>> import zoo.base.task
>>> zoo.task is zoo.base.task
True
>>> from zoo.show_attend_tell.preprocessor import CaptionPreprocessor
>>> CaptionPreprocessor.__module__
'zoo.captioning.preprocessor'
"""

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys

#: Old module path -> the module that holds its code now.
MOVED = {
    "zoo.arguments": "zoo.training.flags",
    "zoo.backbone": "zoo.base.backbone",
    "zoo.backbone_arguments": "zoo.base.constructor_arguments",
    "zoo.callbacks": "zoo.training.callbacks",
    "zoo.distributed_loss": "zoo.base.distributed_loss",
    "zoo.export": "zoo.serving.export",
    "zoo.generation": "zoo.base.generation",
    "zoo.image_export": "zoo.serving.image_export",
    "zoo.inputs": "zoo.base.raw_inputs",
    "zoo.run_directory": "zoo.training.run_directory",
    "zoo.serve": "zoo.serving.server",
    "zoo.serving_batcher": "zoo.serving.batcher",
    "zoo.serving_inputs": "zoo.serving.requests",
    "zoo.serving_v2": "zoo.serving.v2_protocol",
    "zoo.show_attend_tell.evaluation": "zoo.captioning.evaluation",
    "zoo.show_attend_tell.export": "zoo.captioning.export",
    "zoo.show_attend_tell.plotting": "zoo.captioning.plotting",
    "zoo.show_attend_tell.preprocessor": "zoo.captioning.preprocessor",
    "zoo.task": "zoo.base.task",
    "zoo.teacher_forcing": "zoo.base.teacher_forcing",
    "zoo.translation.training": "zoo.translation.recipe",
    "zoo.truncation": "zoo.base.truncation",
}


class _Moved(importlib.abc.Loader):
    """Loads an old path as the module at its new path."""

    def create_module(self, spec):
        return importlib.import_module(MOVED[spec.name])

    def exec_module(self, module):
        pass  # Already run under its new name.

    def get_code(self, fullname):
        """The new module's code, so `python -m <old path>` runs it."""
        new = MOVED[fullname]
        return importlib.util.find_spec(new).loader.get_code(new)


class _OldPaths(importlib.abc.MetaPathFinder):
    """Finds the old paths of `MOVED` (and nothing else)."""

    def find_spec(self, name, path=None, target=None):
        if name not in MOVED:
            return None
        # The new module's file as origin: `python -m` puts it in argv[0].
        origin = importlib.util.find_spec(MOVED[name]).origin
        return importlib.machinery.ModuleSpec(name, _Moved(), origin=origin)


def install():
    """Makes the old paths importable (once; `import zoo` calls it)."""
    if not any(isinstance(finder, _OldPaths) for finder in sys.meta_path):
        sys.meta_path.insert(0, _OldPaths())
