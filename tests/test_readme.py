"""Runs every ```python block of README.md, as written.

A block that reads the full Debian data (`/usr/share/...`, e.g. the SWORD
modules or Fashion-MNIST) is skipped when that data is absent; the others
run on what the repository ships (`zoo/data/samples/`).
"""

import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
# What a block must find on disk to run (the full data sets).
NEEDS = {
    'load("train")': "/usr/share/sword",
    "fashion_mnist.load(": "/usr/share/dataset-fashion-mnist",
}


def blocks():
    with open(README, encoding="utf-8") as f:
        text = f.read()
    found = []
    for index, match in enumerate(BLOCK.finditer(text)):
        line = text[: match.start()].count("\n") + 2
        found.append(pytest.param(match.group(1), id=f"block{index}_line{line}"))
    return found


def test_readme_has_python_blocks():
    assert len(blocks()) >= 2


@pytest.mark.tensorflow_only
@pytest.mark.parametrize("code", blocks())
def test_readme_block_runs(code):
    for marker, path in NEEDS.items():
        if marker in code and not os.path.exists(path):
            pytest.skip(f"needs the full data set in {path}")
    exec(compile(code, README, "exec"), {"__name__": "readme"})
