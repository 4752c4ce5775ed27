"""What the cross-family tests read of each registered family's own tests.

A family's test folder (`tests/zoo/<family>/`) holds, in its
`test_backbone.py`, the cases the cross-family tests run on it:
`JAX_CASES` (`backends/test_backbones_on_jax.py`) and `TASK_CASES`
(`test_task_backbone.py`). The families are the registry's
(`zoo.registry`), so a registered family without its cases fails here
instead of being left out.
"""

import importlib.util
import os

from zoo import registry

HERE = os.path.dirname(os.path.abspath(__file__))


def cases(name, module="test_backbone"):
    """`{case: value}` of every registered family's `module.<name>`.

    Raises:
        FileNotFoundError, AttributeError: a registered family whose test
            folder lacks the module or the cases.
    """
    found = {}
    for family in registry.names():
        path = os.path.join(HERE, family, f"{module}.py")
        spec = importlib.util.spec_from_file_location(f"{family}_{module}", path)
        loaded = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(loaded)
        found.update(getattr(loaded, name))
    return found
