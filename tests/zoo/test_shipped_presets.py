"""What ships: per family a default and at most two others, each listed in
its family's `PRESETS`, named in its card, with provenance-only metadata."""

import json
import os

import pytest

import zoo
from zoo import registry

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FAMILIES = registry.names()
# What `metadata.json` may hold: provenance (`save_preset` writes the first
# group, the training harness the second), never the per-epoch history.
PROVENANCE = {"class_name", "registered_name", "format_version", "created"}
PROVENANCE |= {"versions", "parameters", "files", "resaved"}
PROVENANCE |= {"command", "data", "metrics", "options", "hardware", "seed"}
PROVENANCE |= {"strategy", "task", "table"}


def _registry(family):
    return registry.get(family).presets


@pytest.mark.parametrize("family", FAMILIES)
def test_each_family_ships_a_default_and_at_most_two_others(family):
    folder = os.path.join(ROOT, "zoo", family, "presets")
    assert sorted(_registry(family)) == sorted(os.listdir(folder))
    assert 1 <= len(_registry(family)) <= 3


def test_every_shipped_preset_belongs_to_a_family_registry():
    listed = [name for family in FAMILIES for name in _registry(family)]
    assert sorted(listed) == sorted(zoo.list_presets())
    assert sorted(registry.presets()) == sorted(listed)


def test_every_folder_with_presets_is_a_registered_family():
    folders = [
        name
        for name in os.listdir(os.path.join(ROOT, "zoo"))
        if os.path.isdir(os.path.join(ROOT, "zoo", name, "presets"))
    ]
    assert sorted(folders) == FAMILIES
    for family in registry.families():
        assert family.folder == os.path.join(ROOT, "zoo", family.name)
        assert os.path.isfile(family.card) and family.kind is not None
        for name in family.presets:
            assert os.path.isfile(
                os.path.join(family.preset_folder(name), "metadata.json")
            )


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


def test_one_captioner_number_in_zoo_presets_readme_and_card():
    # `zoo presets` prints the metadata's widest beam, as README and card
    # quote it: BLEU-4 and the attention peak on the named item.
    from zoo import cli

    name = "show_attend_tell_fashion_scenes"
    with open(os.path.join(zoo.list_presets()[name], "metadata.json")) as f:
        meta = json.load(f)
    test = meta["metrics"]["test"]
    widest = test[max(test, key=lambda beam: int(beam.removeprefix("beam")))]
    bleu4, peak = widest["bleu4"], widest["attention"]["peak"]
    summary = cli.metrics_summary(meta)
    assert f"BLEU-4 {bleu4:.2f}, attention peak on the named item {peak:.1f}%" in (
        summary
    )
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        row = next(line for line in f if line.startswith("|") and f"`{name}`" in line)
    assert f"BLEU-4 {bleu4:.2f}" in row and f"{peak:.1f}% of nouns" in row, row
    with open(os.path.join(ROOT, "zoo", "show_attend_tell", "README.md")) as f:
        row = next(line for line in f if line.startswith(f"| `{name}`"))
    assert f"**{bleu4:.2f}**" in row and f"**{peak:.1f}%**" in row, row


@pytest.mark.parametrize("family", FAMILIES)
def test_the_readme_table_has_a_row_per_family_linking_its_card(family):
    registered = registry.get(family)
    card = os.path.relpath(registered.card, ROOT).replace(os.sep, "/")
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        rows = [
            line for line in f if line.startswith(f"| `zoo.{registered.task.__name__}`")
        ]
    assert len(rows) == 1 and f"]({card})" in rows[0], rows
    assert any(f"`{name}`" in rows[0] for name in registered.presets), rows
