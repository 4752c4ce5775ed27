"""The model card's usage block runs as written; its table is the metadata's."""

import json
import os
import re

import pytest

from zoo.base.task import list_presets

CARD = os.path.join(
    os.path.dirname(__file__),
    "..",
    "..",
    "..",
    "zoo",
    "transformer_captioner",
    "README.md",
)
NAME = "transformer_captioner_fashion_scenes"

pytestmark = pytest.mark.tensorflow_only


def card():
    with open(CARD, encoding="utf-8") as f:
        return f.read()


def test_usage_block_runs(tmp_path, monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", card(), flags=re.S)
    assert blocks
    monkeypatch.chdir(tmp_path)  # the block writes caption.png
    namespace = {"__name__": "model_card"}
    exec(compile(blocks[0], CARD, "exec"), namespace)
    assert (tmp_path / "caption.png").stat().st_size > 1000
    assert len(namespace["maps"]) == len(namespace["texts"]) == 8
    assert namespace["heads"].shape[:2] == (8, 4)


def test_card_quotes_the_numbers_the_training_command_printed():
    with open(os.path.join(list_presets()[NAME], "metadata.json")) as f:
        test = json.load(f)["metrics"]["test"]
    row = next(line for line in card().splitlines() if line.startswith(f"| `{NAME}`"))
    greedy, beam = test["beam1"], test["beam4"]
    assert f"**{beam['bleu4']:.2f}** (greedy {greedy['bleu4']:.2f})" in row
    assert f"**{beam['attention']['peak']:.1f}%**" in row
