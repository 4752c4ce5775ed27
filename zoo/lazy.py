"""Packages whose public names are imported on first use (PEP 562).

`import zoo` (and a family's or a kind's package) binds its public names
without importing the modules behind them, so `python -m zoo presets`
reads the registry without Keras; `zoo.Seq2Seq` (or `from zoo.seq2seq
import Seq2Seq`) imports the model code when first asked for.

Example:
>>> package = sys.modules["package"] = types.ModuleType("package")
>>> package.__getattr__, package.__dir__ = exports("package", {"path": "os"})
>>> package.path.join("a", "b")
'a/b'
>>> "path" in dir(package)
True
>>> del sys.modules["package"]
>>> import zoo
>>> zoo.seq2seq.PRESETS == zoo.registry.get("seq2seq").presets
True
"""

import importlib
import importlib.util
import sys
import types


def exports(package, names):
    """`(__getattr__, __dir__)` for `package`, whose `names` load lazily.

    Args:
        package: str. The package's `__name__`.
        names: dict `{public name: module}`. The module holds the name
            (which wins, as in `from module import name`), or is the name's
            own submodule (`{"data": "zoo.data"}`). Any other
            submodule loads too when asked for (`zoo.seq2seq`), as it did
            when the package imported everything.

    Returns:
        The two module-level functions of PEP 562; a name, once loaded, is
        set on the package, so it is looked up once. A submodule imported
        directly does not hide a name it exports under its own name
        (`zoo.translation.ensemble`, the function), as with the eager
        `from module import name` (`_Package`).
    """
    sys.modules[package].__class__ = _Package
    sys.modules[package]._lazy_names = names

    def __getattr__(name):
        if name in names:
            module = importlib.import_module(names[name])
        elif not name.startswith("_") and _has_submodule(package, name):
            return importlib.import_module(f"{package}.{name}")  # sets it
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(module, name, module)  # as `from module import name`
        setattr(sys.modules[package], name, value)
        return value

    def __dir__():
        return sorted(set(vars(sys.modules[package])) | set(names))

    return __getattr__, __dir__


def _has_submodule(package, name):
    """Whether `package` has a submodule `name` (found, not imported)."""
    return importlib.util.find_spec(f"{package}.{name}") is not None


class _Package(types.ModuleType):
    """A lazy package: the import system's binding of a submodule on the
    package (`import zoo.translation.ensemble`) keeps the submodule's own
    attribute of that name when the package exports it from there."""

    def __setattr__(self, name, value):
        exported = self.__dict__.get("_lazy_names", {})
        if (
            isinstance(value, types.ModuleType)
            and exported.get(name) == value.__name__
            and hasattr(value, name)
        ):
            value = getattr(value, name)
        super().__setattr__(name, value)
