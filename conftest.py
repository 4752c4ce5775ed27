"""pytest set-up shared by the tests and the docstring examples.

`make test` runs `tests/` and `--doctest-modules keras_attention zoo` in one
pytest run on TensorFlow, then `tests/keras_attention` and the
`keras_attention` examples (with `tests/zoo/backends/test_backends.py`, the zoo's
verbs compared with TensorFlow) in one run on JAX and one on PyTorch, each
on two processes
(pytest-xdist, a module's tests on one process). On a backend other than TensorFlow, tests marked
`tensorflow_only` are skipped; so are the examples of the modules in
`TENSORFLOW_ONLY_EXAMPLES`, whose subject is a TensorFlow object.
"""

import importlib
import os

# gRPC's fork handlers (its event engine's poller) aborted about one in five
# children forked with a `preexec_fn` (tests/bounded.py's bounded runs) in a
# process that had served gRPC (tests/zoo/serving/test_serve_grpc.py in the
# same worker): SIGABRT, "epoll_wait error: Bad file descriptor". Read when
# grpc is first imported; children inherit them.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

# XLA compiles each distinct operation that a JAX test runs eagerly, and each
# `jit` function, to machine code: much of the JAX run's time (one compile
# per new shape, ~40 ms of CPU each here). Two settings cut it, and both
# leave the HLO passes (fusion, simplification) alone, so the same
# operations run, as other machine code (rounding within the tests' tolerances):
# LLVM at -O0 (636 -> 460 s of CPU, 1109 tests, Intel Xeon), and XLA:CPU's
# older elemental emitters for fused loops instead of its MLIR fusion
# emitters, whose pipeline costs more per compile
# (test_grouped_query_attention.py and test_rotary.py under JAX: 72 -> 45 s
# of CPU, 98 tests, AMD EPYC; 600 tiny eager ops: 20.8 -> 12.8 s).
# Set before the first computation (XLA reads them when it starts);
# processes that tests start inherit them (the JAX worker of
# test_backbones_on_jax.py), and TensorFlow's `jit_compile` functions read
# them too. A setting already in XLA_FLAGS is kept.
for _flag in (
    "--xla_backend_optimization_level=0",
    "--xla_cpu_use_fusion_emitters=false",
):
    if _flag.partition("=")[0] not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {_flag}".strip()

import keras  # noqa: E402
import pytest  # noqa: E402

# `python -m zoo` runs the command line when it is imported.
collect_ignore = ["zoo/__main__.py"]

# The packages whose modules' docstring examples are collected.
PACKAGES = ("keras_attention", "zoo")

# Modules whose docstring examples need the TensorFlow backend.
TENSORFLOW_ONLY_EXAMPLES = ("keras_attention/training/strategy.py",)


@pytest.fixture(autouse=True)
def _fresh_keras_session_for_examples(request):
    """A docstring example starts from a fresh Keras session, as in a new
    interpreter (layer names from `dense`, default settings), whatever tests
    ran before it in the same process."""
    if not isinstance(request.node, pytest.Function):
        keras.utils.clear_session(free_memory=False)


def pytest_collection_modifyitems(config, items):
    tensorflow_only = {config.rootpath / path for path in TENSORFLOW_ONLY_EXAMPLES}
    for item in items:
        if item.path in tensorflow_only:
            item.add_marker(pytest.mark.tensorflow_only)
    if keras.backend.backend() == "tensorflow":
        return
    skip = pytest.mark.skip(reason="needs the TensorFlow backend")
    for item in items:
        if "tensorflow_only" in item.keywords:
            item.add_marker(skip)


def pytest_collect_file(file_path, parent):
    """Imports a package module by its name before its examples are collected.

    Under `--import-mode=importlib` pytest imports a module for its examples
    from the file: when the module's package is not imported yet, it imports
    the package (whose `__init__` imports the module) and then executes the
    file a second time as a new module object in `sys.modules`. The layers
    would keep the first `keras_attention.layers.dispatch`, the tests stub
    the second: collected first (`pytest --doctest-modules
    keras_attention/layers/dispatch.py tests/...`), 80 dispatch tests
    failed. Imported here the usual way, the module is in `sys.modules`,
    and pytest takes it from there. An import error is left for the
    collection of the examples to report.
    """
    if not parent.config.getoption("doctestmodules") or file_path.suffix != ".py":
        return
    try:
        parts = file_path.relative_to(parent.config.rootpath).with_suffix("").parts
    except ValueError:
        return
    if not parts or parts[0] not in PACKAGES:
        return
    if parts[-1] == "__init__":
        parts = parts[:-1]
    try:
        importlib.import_module(".".join(parts))
    except Exception:  # noqa: BLE001 - reported when the examples are collected
        pass
