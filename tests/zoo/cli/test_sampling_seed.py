"""`--seed` reproduces a whole run of `translate`/`caption --sample`.

The CLI decodes its inputs `common.BATCH` at a time whether or not a
progress bar is drawn, and each batch draws under its own seed derived
from `--seed`: the outputs do not depend on the terminal, and the 1st and
the 65th of equal inputs draw apart (before, every batch reused the seed,
and without a terminal the inputs went in one call).
"""

import pytest

from zoo import cli, progress
from zoo.cli import common

COUNT = common.BATCH + 2
SEQ2SEQ = "seq2seq_bahdanau_bible_en_es"


class Drawer:
    """A translator whose "draw" for a row is its seed and place in the call."""

    verbs = ("translate",)

    def __init__(self):
        self.seeds = []

    def translate(self, texts, sampler, num_return_sequences, **kwargs):
        self.seeds.append(sampler.seed)
        return [f"{sampler.seed}:{row}" for row in range(len(texts))]


def _run(argv, monkeypatch, capsys, terminal):
    monkeypatch.setattr(progress, "shown", lambda stream=None: terminal)
    assert cli.main(argv) == 0
    return capsys.readouterr().out.splitlines()


def test_a_seed_draws_the_same_run_with_or_without_a_terminal(monkeypatch, capsys):
    models = []
    monkeypatch.setattr(
        common, "load_preset", lambda *a, **k: models.append(Drawer()) or models[-1]
    )
    argv = ["translate", "p", *["Jesus wept."] * COUNT, "--seed", "3"]
    piped = _run(argv, monkeypatch, capsys, terminal=False)
    drawn = _run(argv, monkeypatch, capsys, terminal=True)
    assert piped == drawn and len(piped) == COUNT
    assert [len(m.seeds) for m in models] == [2, 2]  # BATCH, then 2
    assert models[0].seeds[0] == 3 and models[0].seeds[1] != 3
    assert piped[0] != piped[common.BATCH]  # the 1st and the 65th draw apart
    assert _run(argv, monkeypatch, capsys, terminal=False) == piped


def test_without_a_seed_the_task_draws_a_new_one_per_batch(monkeypatch, capsys):
    model = Drawer()
    monkeypatch.setattr(common, "load_preset", lambda *a, **k: model)
    argv = ["translate", "p", *["Jesus wept."] * COUNT, "--sample"]
    _run(argv, monkeypatch, capsys, terminal=False)
    assert model.seeds == [None, None]  # `sampling_seed`: new draws per call
    assert cli.main([*argv[:-1], "--seed", "-1"]) == 2
    assert "`seed` must be an int >= 0" in capsys.readouterr().err


@pytest.mark.tensorflow_only
def test_a_seeded_translation_of_a_file_does_not_depend_on_the_terminal(
    monkeypatch, capsys
):
    texts = ["Jesus wept."] * COUNT
    argv = ["translate", SEQ2SEQ, *texts, "--temperature", "3", "--seed", "1"]
    piped = _run(argv, monkeypatch, capsys, terminal=False)
    drawn = _run(argv, monkeypatch, capsys, terminal=True)
    assert piped == drawn and len(piped) == COUNT
    assert piped[: len(texts) - common.BATCH] != piped[common.BATCH :]
