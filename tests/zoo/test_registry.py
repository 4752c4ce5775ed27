"""`zoo.registry`: each family registers itself once, with presets of its own."""

import pytest

import zoo
from zoo import registry


def test_every_family_is_registered_with_its_task_class_exported_by_zoo():
    known = {
        "ram": zoo.RecurrentAttentionModel,
        "seq2seq": zoo.Seq2Seq,
        "show_attend_tell": zoo.ShowAttendTell,
        "transformer": zoo.Transformer,
    }
    for name, cls in known.items():
        assert registry.get(name).task is cls
    for family in registry.families():
        assert getattr(zoo, family.task.__name__) is family.task
        assert family.task.__name__ in zoo.__all__
    translation = registry.families("translation")
    assert {f.name for f in translation} >= {"seq2seq", "transformer"}
    assert all(f.kind == "translation" for f in translation)


def test_a_second_family_of_the_same_name_is_refused():
    with pytest.raises(ValueError, match="'seq2seq' is already registered"):
        registry.register("zoo.seq2seq", zoo.Transformer, {}, "another")
    assert registry.get("seq2seq").task is zoo.Seq2Seq


def test_a_preset_registered_by_another_family_is_refused():
    with pytest.raises(ValueError, match="already registered by \\['seq2seq'\\]"):
        registry.register(
            "zoo.transformer",
            zoo.Transformer,
            {"seq2seq_bahdanau_bible_en_es": "taken"},
            "clash",
        )
    assert "seq2seq_bahdanau_bible_en_es" not in registry.get("transformer").presets


def test_an_unknown_family_is_a_value_error_naming_the_choices():
    with pytest.raises(ValueError, match="Unknown family 'nope'. Choose one of: ram"):
        registry.get("nope")


@pytest.mark.parametrize(
    "handle, scheme",
    [
        ("hf://keras/bert_base_en", "hf"),
        ("kaggle://keras/gemma/keras/gemma_2b_en", "kaggle"),
        ("https://example.com/preset.zip", "https"),
    ],
)
def test_a_hub_handle_is_refused_naming_its_scheme(handle, scheme):
    with pytest.raises(
        ValueError, match=f"is a {scheme}:// handle.*local preset folder"
    ):
        zoo.from_preset(handle)
