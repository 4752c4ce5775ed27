"""zoo.translation.data: the translation scripts' shared data helpers."""

import argparse
import json

import pytest

from zoo.data import bible, parallel_text
from zoo.translation import data as translation


def _args(**kwargs):
    defaults = dict(data="sample", sword_path=None, validation_tsv=None, test_tsv=None)
    defaults.update(kwargs)
    return argparse.Namespace(**defaults)


def test_load_splits_sample_and_tsv(tmp_path):
    train, validation, test = translation.load_splits(_args())
    assert train == parallel_text.read_tsv(bible.sample_path("train"))
    assert test == parallel_text.read_tsv(bible.sample_path("test"))
    assert validation == test[:50]

    path = tmp_path / "pairs.tsv"
    path.write_text("a\tb\nc\td\n", encoding="utf-8")
    train, validation, test = translation.load_splits(_args(data=str(path)))
    assert train == [("a", "b"), ("c", "d")] and validation == [] and test == []


def test_fixed_batches_drop_the_remainder_and_keep_pairs_together():
    pairs = [(f"s{i}", f"t{i}") for i in range(10)]
    batches = list(translation.fixed_batches(pairs, 4, seed=0, shuffle=False))
    assert [int(b[0].shape[0]) for b in batches] == [4, 4]
    spec = translation.fixed_batches(pairs, 4, seed=0).element_spec
    assert all(s.shape.is_fully_defined() for s in spec)
    for source, target in translation.fixed_batches(pairs, 4, seed=1):
        for s, t in zip(source.numpy(), target.numpy()):
            assert s[1:] == t[1:]  # shuffled as pairs


class _Echo:
    """A 'model' whose translations are the references (or a bad word)."""

    def __init__(self, references, wrong=False):
        self.references, self.wrong, self.widths = references, wrong, []

    def translate(self, sources, beam_width=4):
        self.widths.append(beam_width)
        if self.wrong:
            return ["zzz" for _ in sources]
        return [self.references[s] for s in sources]


def test_evaluate_translations_scores_greedy_and_beam(capsys):
    pairs = parallel_text.read_tsv(bible.sample_path("test"))[:20]
    model = _Echo(dict(pairs))
    results = translation.evaluate_translations(model, pairs, beam_width=3, limit=10)
    assert model.widths == [1, 3]
    assert set(results) == {"greedy", "beam3"}
    assert results["greedy"]["bleu"] == pytest.approx(100.0)
    assert results["beam3"]["sentences"] == 10
    assert "nrefs:1" in results["greedy"]["bleu_signature"]
    assert "BLEU 100.00" in capsys.readouterr().out
    bad = translation.evaluate_translations(_Echo({}, wrong=True), pairs, 2)
    assert bad["greedy"]["bleu"] < 1.0 and bad["greedy"]["sentences"] == 20


def test_translation_metadata_records_command_and_split_as_data():
    splits = ([("a", "b")] * 3, [("c", "d")], [("e", "f")] * 2)
    meta = translation.translation_metadata(
        _args(data="bible"), "python -m x", splits, {"steps": 7}
    )
    assert meta["command"] == "python -m x"
    assert meta["data"]["train_pairs"] == 3 and meta["data"]["test_pairs"] == 2
    split = meta["data"]["split"]
    assert split["by"] == "book"
    assert split["test"] == list(bible.TEST_BOOKS) and "Ruth" in split["test"]
    assert split["validation"] == ["Joel", "Micah", "Titus", "Galatians"]
    assert not set(split["train"]) & set(split["test"] + split["validation"])
    assert meta["metrics"] == {"steps": 7}
    assert "hardware" not in meta  # the harness records it, as data
    json.dumps(meta)  # data, not objects


def test_translation_split_of_files_lists_them():
    args = _args(data="train.tsv", validation_tsv="v.tsv", test_tsv="t.tsv")
    split = translation.translation_split(args)
    assert split == {
        "by": "file",
        "train": ["train.tsv"],
        "validation": ["v.tsv"],
        "test": ["t.tsv"],
    }
    sample = translation.translation_split(_args(data="sample"))
    assert sample["by"] == "file" and sample["test"] == sample["validation"]


def test_add_data_arguments_feed_load_splits(tmp_path):
    parser = argparse.ArgumentParser()
    translation.add_data_arguments(parser)
    assert parser.parse_args([]).data == "bible"
    path = tmp_path / "pairs.tsv"
    path.write_text("a\tb\n", encoding="utf-8")
    args = parser.parse_args([f"--data={path}", f"--test-tsv={path}"])
    assert translation.load_splits(args) == ([("a", "b")], [], [("a", "b")])
