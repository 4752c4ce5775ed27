"""The RAM model card: its usage block runs, its table names what ships."""

import os
import re

import pytest

from zoo.ram import PRESETS

CARD = os.path.join(
    os.path.dirname(__file__), "..", "..", "..", "zoo", "ram", "README.md"
)


def _card():
    with open(CARD, encoding="utf-8") as f:
        return f.read()


def test_the_preset_table_names_every_shipped_preset_and_no_other():
    # The first table of the card: its rows up to the first blank line.
    lines = _card().split("\n| preset |", 1)[1].split("\n\n", 1)[0].splitlines()
    named = [re.match(r"\| `(\w+)`", line).group(1) for line in lines[2:]]
    assert named == list(PRESETS)  # the default first


@pytest.mark.tensorflow_only
def test_usage_block_runs(tmp_path, monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", _card(), flags=re.S)
    assert len(blocks) == 1
    monkeypatch.chdir(tmp_path)  # the block writes glimpses.png
    namespace = {"__name__": "model_card"}
    exec(compile(blocks[0], CARD, "exec"), namespace)
    assert (tmp_path / "glimpses.png").stat().st_size > 1000
    assert namespace["paths"].shape == (8, 6, 2)
    assert namespace["names"].shape == (8, 3)
