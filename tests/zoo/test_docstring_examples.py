"""Every public class and method of `zoo` shows its use in a `>>>` example.

The examples run as doctests (`make test` passes `--doctest-modules zoo`);
this test checks that they exist. It walks the modules of the `zoo`
package (not `zoo/__main__.py`, which runs the command line when imported,
nor private modules), and in each the public classes defined there, with
the public methods, class and static methods and properties each class
defines itself (inherited ones are checked where they are defined).
"""

import http.server
import importlib
import inspect
import pkgutil
import socketserver

import keras
import pytest

import zoo

pytestmark = pytest.mark.tensorflow_only

# Methods that only override a framework hook: Keras calls them (`build`,
# `call`, `train_step`, a metric's `update_state`, a callback's `on_*` and
# the `get_state` / `set_state` that `zoo.training.run_directory` saves), or the
# standard library's HTTP server does (`do_GET`, `server_close`). They need
# no example of their own: the class example runs them. A name here is
# exempt only on a subclass of one of `FRAMEWORK_BASES`, whose framework
# calls it (some by name: `save_assets`, `do_GET`); `ArgumentsOf.build`, a
# method of a plain class, still needs its example.
HOOKS = (
    # keras.layers.Layer / keras.Model
    "build",
    "call",
    "get_config",
    "from_config",
    "compute_output_shape",
    "compute_output_spec",
    "compute_mask",
    "train_step",
    "test_step",
    "predict_step",
    "save_assets",
    "load_assets",
    # keras.metrics.Metric
    "update_state",
    "result",
    "reset_state",
    # keras.callbacks.Callback state, saved by zoo.training.run_directory
    "get_state",
    "set_state",
    # http.server.BaseHTTPRequestHandler / ThreadingHTTPServer
    "log_message",
    "do_GET",
    "do_POST",
    "server_close",
)
# keras.callbacks.Callback's `on_train_begin`, `on_epoch_end`, ...
HOOK_PREFIXES = ("on_",)
FRAMEWORK_BASES = (
    keras.layers.Layer,  # models and preprocessors too
    keras.metrics.Metric,
    keras.callbacks.Callback,
    keras.losses.Loss,
    http.server.BaseHTTPRequestHandler,
    socketserver.BaseServer,
)

# "module.Class" or "module.Class.method" -> why it has no example. Empty:
# every public class and method has one.
EXEMPT = {}


def _modules():
    for info in pkgutil.walk_packages(zoo.__path__, "zoo."):
        parts = info.name.split(".")
        if info.name == "zoo.__main__" or any(p.startswith("_") for p in parts):
            continue
        yield importlib.import_module(info.name)


def _is_hook(cls, name):
    hook = name in HOOKS or name.startswith(HOOK_PREFIXES)
    return hook and issubclass(cls, FRAMEWORK_BASES)


def _function(value):
    """The function behind a class attribute, or None if it is no method."""
    if isinstance(value, (staticmethod, classmethod)):
        value = value.__func__
    elif isinstance(value, property):
        value = value.fget
    return value if inspect.isfunction(value) else None


def _public_api():
    """`(qualified name, object)` of each public class and method of `zoo`."""
    for module in _modules():
        for name, cls in sorted(vars(module).items()):
            if name.startswith("_") or not inspect.isclass(cls):
                continue
            if cls.__module__ != module.__name__:
                continue  # imported, checked in its own module
            qualified = f"{module.__name__}.{name}"
            yield qualified, cls
            for attribute, value in vars(cls).items():
                function = _function(value)
                if attribute.startswith("_") or function is None:
                    continue
                if _is_hook(cls, attribute):
                    continue
                yield f"{qualified}.{attribute}", function


def _has_example(obj):
    # Its own docstring: `inspect.getdoc` would take an overridden method's.
    return ">>>" in (obj.__doc__ or "")


def test_every_public_class_and_method_has_an_example():
    missing = [
        name
        for name, obj in _public_api()
        if name not in EXEMPT and not _has_example(obj)
    ]
    assert not missing, (
        f"{len(missing)} public classes or methods of zoo have no `>>>` "
        "example in their docstring:\n" + "\n".join(missing)
    )


def test_the_walk_finds_the_api():
    names = dict(_public_api())
    assert "zoo.base.generation.GenerativeTask.generate" in names
    assert "zoo.training.run_directory.Stage.initial_epoch" in names  # a property
    assert "zoo.transformer.task.Transformer.from_name" in names  # a classmethod
    assert "zoo.base.constructor_arguments.ArgumentsOf.build" in names  # not a hook
    assert "zoo.base.task.Task.call" not in names  # a Keras hook
    assert "zoo.training.callbacks.TimeBudget.get_state" not in names  # callback state
    assert not any(name.startswith("zoo.__main__") for name in names)


def test_exemptions_are_current():
    names = dict(_public_api())
    stale = [name for name in EXEMPT if name not in names or _has_example(names[name])]
    assert not stale, f"Exempt but gone or with an example now: {stale}"
