"""Runs every ```python block of README.md and of docs/*.md, as written.

A block that reads the full Debian data (`/usr/share/...`, e.g. the SWORD
modules or Fashion-MNIST) is skipped when that data is absent; the others
run on what the repository ships (`zoo/data/samples/`). The README stays
what a newcomer reads in two minutes: the long material is in `docs/`, and
every relative link of the README and the docs leads to a file.
"""

import glob
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")
PAGES = [README, *sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
# What a block must find on disk to run (the full data sets).
NEEDS = {
    'load("train")': "/usr/share/sword",
    "fashion_mnist.load(": "/usr/share/dataset-fashion-mnist",
}


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def blocks(paths=PAGES):
    found = []
    for path in paths:
        text = read(path)
        name = os.path.relpath(path, ROOT)
        for index, match in enumerate(BLOCK.finditer(text)):
            line = text[: match.start()].count("\n") + 2
            found.append(
                pytest.param(path, match.group(1), id=f"{name}:block{index}_line{line}")
            )
    return found


def test_readme_has_python_blocks_and_is_short():
    assert len(blocks([README])) >= 2
    assert len(read(README).splitlines()) <= 150


def test_the_readme_links_each_docs_page():
    pages = [os.path.relpath(p, ROOT) for p in PAGES[1:]]
    assert pages, "no docs/*.md"
    linked = LINK.findall(read(README))
    assert sorted(set(pages) - set(linked)) == []


@pytest.mark.parametrize("path", PAGES, ids=lambda p: os.path.relpath(p, ROOT))
def test_every_relative_link_leads_to_a_file(path):
    for target in LINK.findall(read(path)):
        if "://" in target:
            continue
        resolved = os.path.join(os.path.dirname(path), target)
        assert os.path.exists(resolved), f"{path}: {target}"


@pytest.mark.tensorflow_only
@pytest.mark.parametrize("path, code", blocks())
def test_readme_block_runs(path, code):
    for marker, needed in NEEDS.items():
        if marker in code and not os.path.exists(needed):
            pytest.skip(f"needs the full data set in {needed}")
    exec(compile(code, path, "exec"), {"__name__": "readme"})


def test_every_metric_of_a_training_log_is_explained():
    # The names a fit logs: compiled ones, and the models' own trackers.
    from zoo.transformer.losses import TargetTokens

    source = "".join(
        read(path)
        for path in glob.glob(os.path.join(ROOT, "zoo", "**", "*.py"), recursive=True)
    )
    names = {"loss", "accuracy", TargetTokens().name}
    names |= set(re.findall(r'keras\.metrics\.\w+\(name="(\w+)"', source))
    assert len(names) > 3
    explained = read(os.path.join(ROOT, "docs", "training.md"))
    assert sorted(n for n in names if f"`{n}`" not in explained) == []
    assert "`val_`" in explained


@pytest.mark.parametrize("path", PAGES[1:], ids=lambda p: os.path.relpath(p, ROOT))
def test_the_docs_cite_no_wheel_size_or_issue_number(path):
    # The README's wheel size is the one checked (tests/test_wheel.py); a
    # copy here goes stale, and an issue number means nothing to a reader.
    text = read(path)
    assert re.findall(r"wheel.{0,200}?\d MB", text, re.DOTALL) == []
    assert re.findall(r"\bissues? #?\d+|#\d+\b", text, re.IGNORECASE) == []
