"""Progress on long work: on standard error, only when it is a terminal.

Standard output keeps only the answer, so `> answers.txt` holds just that;
without a terminal (a pipe, a log file) nothing is drawn
(`tests/zoo/cli/test_quiet.py` checks the pipe case in fresh processes).
"""

import pytest

from zoo import cli, progress

SEQ2SEQ = "seq2seq_bahdanau_bible_en_es"


@pytest.fixture
def terminal(monkeypatch):
    monkeypatch.setattr(progress, "shown", lambda stream=None: True)


def test_a_long_run_draws_a_bar_on_stderr_only(terminal, capsys):
    calls = []
    out = progress.in_batches(
        list(range(50)), 16, lambda b: calls.append(b) or b, "items", "warming up"
    )
    assert out == list(range(50)) and [len(c) for c in calls] == [16, 16, 16, 2]
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "50 items: warming up" in captured.err and "50/50" in captured.err


def test_a_short_run_says_its_first_step_and_erases_it(terminal, capsys):
    assert progress.in_batches([1, 2], 16, list, "items", "warming up") == [1, 2]
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == "warming up...\r\033[K"


def test_without_a_terminal_nothing_is_drawn(capsys):
    assert progress.in_batches(list(range(50)), 16, list, "items") == list(range(50))
    assert capsys.readouterr() == ("", "")


@pytest.mark.tensorflow_only
def test_translating_many_sentences_keeps_stdout_the_answers(terminal, capsys):
    texts = [f"Jesus wept {i} times." for i in range(progress.SCREENFUL + 2)]
    assert cli.main(["translate", SEQ2SEQ, *texts, "--beam", "1"]) == 0
    captured = capsys.readouterr()
    assert len(captured.out.splitlines()) == len(texts)
    assert f"{len(texts)}/{len(texts)}" in captured.err
    assert "compiling the search (first call)" in captured.err


@pytest.mark.tensorflow_only
def test_evaluating_a_translator_draws_a_bar_per_search(terminal, monkeypatch, capsys):
    from zoo.translation import data

    class Echo:
        def translate(self, texts, beam_width):
            return list(texts)

    lines = [f"this is the line number {i} of the test" for i in range(25)]
    pairs = list(zip(lines, lines))
    monkeypatch.setattr(data, "TRANSLATE_BATCH", 10)
    scores = data.evaluate_translations(Echo(), pairs, 2)
    assert scores["greedy"]["bleu"] == scores["beam2"]["bleu"] == 100.0
    captured = capsys.readouterr()
    assert "greedy: BLEU 100.00" in captured.out and "25/25" not in captured.out
    assert "greedy: compiling the search" in captured.err
    assert captured.err.count(f"{len(pairs)}/{len(pairs)}") >= 2
