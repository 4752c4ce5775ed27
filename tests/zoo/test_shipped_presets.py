"""What ships: per family a default and at most two others, each listed in
its family's `PRESETS`, named in its card, with provenance-only metadata."""

import importlib
import json
import os

import pytest

import zoo

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FAMILIES = (
    "seq2seq",
    "transformer",
    "show_attend_tell",
    "ram",
    "transformer_captioner",
)
# What `metadata.json` may hold: provenance (`save_preset` writes the first
# group, the training harness the second), never the per-epoch history.
PROVENANCE = {"class_name", "registered_name", "format_version", "created"}
PROVENANCE |= {"versions", "parameters", "files", "resaved"}
PROVENANCE |= {"command", "data", "metrics", "options", "hardware", "seed"}
PROVENANCE |= {"strategy", "task", "table"}


def _registry(family):
    return importlib.import_module(f"zoo.{family}").PRESETS


@pytest.mark.parametrize("family", FAMILIES)
def test_each_family_ships_a_default_and_at_most_two_others(family):
    folder = os.path.join(ROOT, "zoo", family, "presets")
    assert sorted(_registry(family)) == sorted(os.listdir(folder))
    assert 1 <= len(_registry(family)) <= 3


def test_every_shipped_preset_belongs_to_a_family_registry():
    listed = [name for family in FAMILIES for name in _registry(family)]
    assert sorted(listed) == sorted(zoo.list_presets())


@pytest.mark.parametrize("family", FAMILIES)
def test_each_card_is_short_and_names_its_presets_default_first(family):
    with open(os.path.join(ROOT, "zoo", family, "README.md"), encoding="utf-8") as f:
        card = f.read()
    assert len(card.splitlines()) <= 200
    positions = [card.find(f"`{name}`") for name in _registry(family)]
    assert -1 not in positions and positions == sorted(positions)


@pytest.mark.parametrize("name", sorted(zoo.list_presets()))
def test_metadata_holds_provenance_not_the_training_history(name):
    with open(os.path.join(zoo.list_presets()[name], "metadata.json")) as f:
        meta = json.load(f)
    assert set(meta) <= PROVENANCE, set(meta) - PROVENANCE
    assert {"command", "data", "metrics", "versions", "files"} <= set(meta)
    assert "history" not in meta["metrics"]
    # Where the history went, in the repository (not in the package).
    history = os.path.join(ROOT, meta["metrics"]["history_file"])
    with open(history, encoding="utf-8") as f:
        moved = json.load(f)
    assert moved["preset"] == name and moved["command"] == meta["command"]
    assert len(moved["history"]["loss"]) == meta["metrics"]["epochs"]


@pytest.mark.parametrize(
    "name", ["seq2seq_bahdanau_bible_en_es", "transformer_bible_en_es"]
)
def test_one_bleu_per_translation_preset_in_metadata_readme_and_card(name):
    # `zoo presets` prints the metadata's numbers; `zoo evaluate` printed
    # them (the command is recorded beside them); README and card quote them.
    with open(os.path.join(zoo.list_presets()[name], "metadata.json")) as f:
        test = json.load(f)["metrics"]["test"]
    assert test["command"] == f"python -m zoo evaluate {name}"
    beam, greedy = test["beam4"]["bleu"], test["greedy"]["bleu"]
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        row = next(line for line in f if line.startswith("|") and f"`{name}`" in line)
    assert f"BLEU {beam:.2f}" in row, row
    family = "seq2seq" if name.startswith("seq2seq") else "transformer"
    with open(os.path.join(ROOT, "zoo", family, "README.md"), encoding="utf-8") as f:
        row = next(line for line in f if line.startswith(f"| `{name}`"))
    assert f"**{beam:.2f}**" in row and f"greedy {greedy:.2f}" in row, row
