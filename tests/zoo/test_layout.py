"""The zoo's layout: no import cycle, and imports run one way.

Every module of `zoo` and `keras_attention` is parsed (not imported) and
each of its imports, at the top or inside a function, is an arrow to the
module it names. The arrows must form no cycle, and run down the layers:

```
zoo, zoo.cli(.*), zoo.__main__  the package and the CLI: may see everything
families (zoo/<family>/)       may import kinds and below, never another family
kinds (translation, captioning, classification)
serving, training              may import base and below, not each other
base                           what every model stands on
registry, data                 the families and their presets; the data loaders
keras_attention, version, quiet, progress, lazy  never import zoo; `zoo.version`,
                                 `zoo.quiet` (TensorFlow's logs) and `zoo.progress`
                                 (progress on a terminal) import nothing of it
```

A module may always import modules of its own folder. An import of a
package a module is in is an arrow too: the direction check refuses
`import zoo` below the top (the package imports every family); only the
cycle check passes over it, since the package has started before its
modules run. The serving code and the CLI test no family's or kind's class
(`isinstance`): they ask the object.
"""

import ast
import os
import sys

import pytest

from zoo import registry

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tiny_models  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KINDS = ("translation", "captioning", "classification")
TOP = ("zoo", "zoo.cli", "zoo.__main__")

#: The layer of each group of modules: an import must go to a lower layer or
#: stay in its own group.
LAYERS = {
    "keras_attention": 0,
    "zoo.version": 0,
    "zoo.quiet": 0,
    "zoo.progress": 0,
    "zoo.lazy": 0,
    "zoo.data": 1,
    "zoo.registry": 1,
    "zoo.base": 2,
    "zoo.serving": 3,
    "zoo.training": 3,
    **{f"zoo.{kind}": 4 for kind in KINDS},
    "family": 5,
    "top": 6,
}


def _modules(package):
    """`{dotted name: path}` of every module of `package` under the root."""
    found = {}
    for folder, _, files in os.walk(os.path.join(ROOT, package)):
        for name in files:
            if not name.endswith(".py"):
                continue
            path = os.path.join(folder, name)
            parts = os.path.relpath(path, ROOT)[: -len(".py")].split(os.sep)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


MODULES = {**_modules("zoo"), **_modules("keras_attention")}


def _imports(name, path):
    """The modules `name` imports (top level and inside functions)."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
    targets = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                child = f"{base}.{alias.name}"
                targets.add(child if child in MODULES else base)
    return {t for t in targets if t.split(".")[0] in ("zoo", "keras_attention")}


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _group(name):
    """The group a module belongs to, and that group's layer."""
    if name.startswith("keras_attention"):
        return "keras_attention", LAYERS["keras_attention"]
    if name in TOP or name.startswith("zoo.cli."):
        return "top", LAYERS["top"]
    parts = name.split(".")
    group = ".".join(parts[:2])
    if group in LAYERS:
        return group, LAYERS[group]
    return group, LAYERS["family"]


def test_every_import_names_a_module_of_the_tree():
    unknown = {
        f"{name} -> {target}"
        for name, targets in GRAPH.items()
        for target in targets
        if target not in MODULES
    }
    assert not unknown, sorted(unknown)


def test_there_is_no_import_cycle():
    # Tarjan's strongly connected components: any with two modules or more,
    # or a module importing itself, is a cycle. An import of a package the
    # module is in orders nothing (the package has started before its
    # modules run): no arrow here.
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        targets = {t for t in GRAPH.get(node, ()) if not node.startswith(t + ".")}
        for target in sorted(targets):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in GRAPH.get(node, ()):
                cycles.append(sorted(component))

    for node in sorted(GRAPH):
        if node not in index:
            visit(node)
    assert not cycles, cycles


def test_the_cycle_check_finds_a_cycle():
    # The check above can fail: a graph with a loop of three has one.
    loop = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    global GRAPH
    saved, GRAPH = GRAPH, loop
    try:
        with pytest.raises(AssertionError, match=r"\['a', 'b', 'c'\]"):
            test_there_is_no_import_cycle()
    finally:
        GRAPH = saved


def _against_the_direction(graph):
    wrong = []
    for name, targets in sorted(graph.items()):
        group, layer = _group(name)
        for target in sorted(targets):
            target_group, target_layer = _group(target)
            if target_group != group and target_layer >= layer:
                wrong.append(f"{name} -> {target}")
    return wrong


def test_imports_run_from_families_to_kinds_to_base():
    assert not _against_the_direction(GRAPH)


def test_an_import_of_a_package_above_is_checked(tmp_path):
    # `import zoo` in a serving module (for `zoo.__version__`, as the
    # server once did) is an arrow to the top, which the direction check
    # refuses; it was left out of the graph, and passed unseen.
    path = tmp_path / "server.py"
    path.write_text("def version():\n    import zoo\n\n    return zoo.__version__\n")
    graph = {"zoo.serving.server": _imports("zoo.serving.server", str(path))}
    assert graph == {"zoo.serving.server": {"zoo"}}
    assert _against_the_direction(graph) == ["zoo.serving.server -> zoo"]


@pytest.mark.parametrize(
    "name, target",
    [
        ("zoo.base.task", "zoo.serving.export"),  # base -> serving
        ("zoo.serving.export", "zoo.ram"),  # serving -> a family
        ("zoo.translation.task", "zoo.captioning.task"),  # kind -> kind
        ("zoo.seq2seq.task", "zoo.transformer.task"),  # family -> family
        ("zoo.serving.server", "zoo.training.harness"),  # serving -> training
        ("keras_attention.layers", "zoo"),  # keras_attention -> zoo
        ("zoo.ram.task", "zoo"),  # a family -> the package (everything)
    ],
)
def test_the_direction_check_refuses(name, target):
    assert _against_the_direction({name: {target}}) == [f"{name} -> {target}"]


def test_the_registered_families_are_the_family_folders():
    groups = {_group(name) for name in MODULES}
    families = sorted(g.split(".")[1] for g, layer in groups if layer == 5)
    assert families == registry.names()
    assert {f.kind for f in registry.families()} <= set(KINDS)


def _isinstance_names(path):
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    names = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", None) == "isinstance"
            and len(node.args) == 2
        ):
            for part in ast.walk(node.args[1]):
                if isinstance(part, ast.Name):
                    names.add(part.id)
                elif isinstance(part, ast.Attribute):
                    names.add(part.attr)
    return names


def test_serving_and_the_cli_test_no_family_or_kind_class():
    classes = {f.task.__name__ for f in registry.families()}
    classes |= {cls.__name__ for f in registry.families() for cls in f.task.__mro__}
    classes -= {"Task", "Model", "Layer", "object"}
    classes = {c for c in classes if not c.startswith(("Keras", "Trainer", "Tensor"))}
    paths = [path for name, path in MODULES.items() if name.startswith("zoo.serving")]
    paths += [path for name, path in MODULES.items() if name.startswith("zoo.cli")]
    tested = {path: _isinstance_names(path) & classes for path in paths}
    assert not {path: names for path, names in tested.items() if names}
    assert "ShowAttendTell" in classes and "TranslationTask" in classes


def test_the_tiny_models_of_the_distribution_tests_cover_every_family():
    # `tiny_models.CASES` (distribution, multi-worker and fault-tolerance
    # tests) lists its factories by family: one per registered family.
    assert sorted(tiny_models.CASES) == registry.names()


def test_the_package_names_are_those_of_the_modules():
    import zoo
    from zoo.base.task import Task, list_presets
    from zoo.captioning.preprocessor import CaptionPreprocessor
    from zoo.serving.export import export_preset
    from zoo.training import TrainingRun

    assert zoo.CaptionPreprocessor is CaptionPreprocessor
    assert zoo.Task is Task and zoo.list_presets is list_presets
    assert export_preset.__module__ == "zoo.serving.export"
    assert TrainingRun.__module__ == "zoo.training.harness"
    for name in ("Transformer", "ShowAttendTell", "Seq2Seq", "translation"):
        assert hasattr(zoo, name), name
