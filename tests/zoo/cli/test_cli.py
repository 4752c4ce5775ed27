"""`python -m zoo` / `keras-attention`: commands on the shipped presets."""

import os
import sys
import warnings

import keras
import numpy as np
import pytest

from zoo import cli, registry
from zoo.cli import common, warning_lines
from zoo.data import fashion_mnist, scenes

RAM = "ram_fashion_mnist_translated_seeking_annealed"
SEQ2SEQ = "seq2seq_bahdanau_bible_en_es"
CAPTIONER = "show_attend_tell_fashion_scenes"


def _png(path, image):
    keras.utils.save_img(str(path), image[..., None], scale=False)
    return str(path)


@pytest.fixture(scope="module")
def items(tmp_path_factory):
    """Two held-out Fashion-MNIST items on canvases of two sizes, as PNGs."""
    folder = tmp_path_factory.mktemp("items")
    images, labels = fashion_mnist.load_arrays("test", fashion_mnist.sample_path())
    small, _ = fashion_mnist.translate(images[:1], canvas_size=60, seed=3)
    large, _ = fashion_mnist.translate(images[1:2], canvas_size=150, seed=3)
    return [_png(folder / "small.png", small[0]), _png(folder / "large.png", large[0])]


def test_presets_lists_every_shipped_preset_with_metrics(capsys):
    assert cli.main(["presets"]) == 0
    out = capsys.readouterr().out
    for name in (RAM, SEQ2SEQ, CAPTIONER):
        assert name in out
    assert "BLEU" in out


def test_classify_any_image_size_and_plot(items, tmp_path, capsys):
    plot = str(tmp_path / "glimpses.png")
    assert cli.main(["classify", RAM, *items, "--plot", plot]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith(tuple(items))]
    assert len(lines) == 2
    for line in lines:
        name = line.split(": ", 1)[1].rsplit(" (", 1)[0]
        assert name in fashion_mnist.CLASS_NAMES
    for i in range(2):
        assert os.path.getsize(str(tmp_path / f"glimpses_{i}.png")) > 1000


def test_caption_and_plot(tmp_path, capsys):
    test = scenes.load("test", num_scenes=1, sample=True, seed=5)
    image = _png(tmp_path / "scene.png", test["images"][0])
    plot = str(tmp_path / "words.png")
    assert cli.main(["caption", CAPTIONER, image, "--beam", "2", "--plot", plot]) == 0
    out = capsys.readouterr().out
    caption = out.splitlines()[0].split(": ", 1)[1]
    assert caption.startswith("a ")
    assert os.path.getsize(plot) > 1000


def test_translate_sequence_length_lifts_the_cut(capsys):
    long = " ".join(["and the lord said unto moses"] * 20)  # 181 subwords
    with pytest.warns(UserWarning, match="longer than source_sequence_length=64"):
        assert cli.main(["translate", SEQ2SEQ, long, "--beam", "1"]) == 0
    short = capsys.readouterr().out.strip()
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*longer than.*")
        argv = ["translate", SEQ2SEQ, long, "--beam", "1", "--sequence-length", "200"]
        assert cli.main(argv) == 0
    longer = capsys.readouterr().out.strip()
    assert short and len(longer.split()) > len(short.split())
    assert cli.main([*argv[:-1], "1"]) == 2
    assert "sequence_length" in capsys.readouterr().err


def test_a_cut_output_advises_the_verbs_flag_in_one_line(monkeypatch, capsys):
    # As `python -m zoo` runs it: the process's own command line.
    argv = ["translate", SEQ2SEQ, "Jesus wept.", "--beam", "1", "--max-length", "1"]
    monkeypatch.setattr(sys, "argv", ["keras-attention", *argv])
    assert cli.main() == 0
    assert capsys.readouterr().err.splitlines() == [
        "warning: 1 of 1 translations reached max_length=1 subwords before "
        "[END] and stop mid-sentence. Raise --max-length to let them finish."
    ]


def test_a_cut_source_advises_the_verbs_flag_in_one_line(monkeypatch, capsys):
    long = " ".join(["and the lord said unto moses"] * 20)  # 180 subwords
    argv = ["translate", SEQ2SEQ, long, "--beam", "1"]
    monkeypatch.setattr(sys, "argv", ["keras-attention", *argv])
    assert cli.main() == 0
    assert capsys.readouterr().err.splitlines() == [
        "warning: 1 of 1 source sentences were longer than "
        "source_sequence_length=64 subwords and were truncated (the longest "
        "needs source_sequence_length=181). Raise --sequence-length to keep "
        "them whole."
    ]


def test_evaluate_says_cut_sources_are_scored_as_cut(capsys):
    from zoo.base.truncation import TruncatedWarning

    cut = TruncatedWarning(1, 9, "source sentences", "source_sequence_length", 64, 70)
    inside = os.path.join(os.path.dirname(cli.__file__), "translation", "data.py")
    warning_lines.warning_printer("evaluate", None)(cut, TruncatedWarning, inside, 1)
    err = capsys.readouterr().err
    assert err.startswith("warning: 1 of 9 source sentences were longer than")
    assert "scored as cut" in err and "preprocessor" not in err


def test_evaluate_says_cut_outputs_are_scored_as_cut(capsys):
    from zoo.base.truncation import UnfinishedWarning

    shown = []
    printer = warning_lines.warning_printer("evaluate", lambda *a, **k: shown.append(a))
    inside = os.path.join(os.path.dirname(cli.__file__), "translation", "data.py")
    printer(UnfinishedWarning(2, 50, "translations", 64), UnfinishedWarning, inside, 1)
    err = capsys.readouterr().err
    assert err.startswith("warning: 2 of 50 translations reached max_length=64")
    assert "scored as cut" in err and "Raise" not in err
    printer(UserWarning("theirs"), UserWarning, keras.__file__, 1)  # Keras's
    assert capsys.readouterr().err == "warning: keras: theirs\n" and shown == []
    printer(UserWarning("theirs"), UserWarning, __file__, 1)  # not ours
    assert capsys.readouterr().err == "" and len(shown) == 1
    cut = UnfinishedWarning(1, 1, "captions", 3)
    warning_lines.warning_printer("caption", None)(cut, UnfinishedWarning, inside, 1)
    assert capsys.readouterr().err.endswith(" Raise --max-length to let them finish.\n")


def test_translate_with_alignment_plot(tmp_path, capsys):
    plot = str(tmp_path / "alignment.png")
    assert cli.main(["translate", SEQ2SEQ, "Jesus wept.", "--plot", plot]) == 0
    out = capsys.readouterr().out
    assert out.strip()
    assert os.path.getsize(plot) > 1000


def test_evaluate_classifier_on_a_given_path(capsys):
    args = ["evaluate", RAM, "--limit", "50", "--data-path"]
    assert cli.main([*args, fashion_mnist.sample_path()]) == 0
    out = capsys.readouterr().out
    assert "error" in out and "(50 images)" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["classify", "no_such_preset", "x.png"], "Unknown preset"),
        (["classify", SEQ2SEQ, "x.png"], "not a classification model"),
        (["caption", RAM, "x.png"], "not a captioning model"),
        (["translate", RAM, "hello"], "not a translation model"),
        (["classify", RAM, "/no/such/image.png"], "No image file"),
        (["train", "no_such_model"], "Unknown model"),
        (["evaluate", SEQ2SEQ, "--sword-path", "/no/sword", "--limit", "1"], "apt"),
    ],
)
def test_bad_arguments_exit_2_with_a_message(argv, message, capsys):
    assert cli.main(argv) == 2
    assert message in capsys.readouterr().err


def test_unknown_option_is_an_argparse_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["translate", SEQ2SEQ, "hi", "--no-such-flag"])
    assert exit_info.value.code == 2


# Dispatch on the task type ---------------------------------------------------


def test_every_family_names_its_kind_and_verbs_through_its_task_class():
    kinds = {"translation": "translate", "captioning": "caption"}
    kinds["classification"] = "classify"
    assert registry.families()
    for family in registry.families():
        cls = family.task
        subclass = type("Custom" + cls.__name__, (cls,), {})
        assert cls.kind in kinds, family.name
        assert cls.verbs == (kinds[cls.kind],) == subclass.verbs
        assert subclass.kind == cls.kind
    known = {"seq2seq": "translation", "transformer": "translation"}
    known.update(show_attend_tell="captioning", ram="classification")
    for name, kind in known.items():
        assert registry.get(name).kind == kind


class LooksLikeEveryTask:
    """Has every user verb the CLI uses, but is none of the zoo's tasks."""

    preset_metadata = {}
    image_shape = (8, 8, 1)

    def translate(self, *args, **kwargs):
        raise AssertionError("dispatched on a method name")

    caption = glimpses = predict = translate


@pytest.mark.parametrize(
    "argv, message",
    [
        (["translate", "p", "hello"], "not a translation model"),
        (["caption", "p", "x.png"], "not a captioning model"),
        (["classify", "p", "x.png"], "not a classification model"),
        (["evaluate", "p"], "has no evaluation here"),
    ],
)
def test_commands_dispatch_on_the_type_not_the_methods(
    argv, message, monkeypatch, capsys
):
    monkeypatch.setattr(
        common, "load_preset", lambda preset, dtype=None: LooksLikeEveryTask()
    )
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err


@pytest.mark.parametrize(
    "data, variant, seeds, canvas",
    [
        (
            {"variant": "centered", "seeds": {"train": 5, "test": 6}},
            "centered",
            6,
            None,
        ),
        (
            {"variant": "cluttered", "canvas_size": 100, "seeds": {"test": 2}},
            "cluttered",
            2,
            100,
        ),
        (
            {"variant": "translated: each 28x28 item at a uniformly random"},
            "translated",
            1,
            None,
        ),
        ({}, "translated", 1, None),
    ],
    ids=["data", "canvas", "old-prose", "none"],
)
def test_evaluate_reads_the_ram_data_variant_from_metadata(
    data, variant, seeds, canvas, monkeypatch, capsys
):
    from zoo.ram import RecurrentAttentionModel

    loaded = []

    def load(split, variant, canvas_size, seed, path=None):
        loaded.append((split, variant, seed, canvas_size))
        return np.zeros((4, 28, 28), "uint8"), np.zeros(4, "int64")

    model = RecurrentAttentionModel.__new__(RecurrentAttentionModel)
    model.preset_metadata = {"data": data}
    model.predict = lambda images, **kwargs: np.eye(10)[np.zeros(len(images), int)]
    monkeypatch.setattr(common, "load_preset", lambda preset, dtype=None: model)
    monkeypatch.setattr(fashion_mnist, "load", load)
    assert cli.main(["evaluate", RAM]) == 0
    assert loaded == [("test", variant, seeds, canvas)]
    assert (
        f"{variant} 28x28 Fashion-MNIST test: error 0.00% (4 images)"
        in capsys.readouterr().out
    )


def test_a_bad_data_variant_in_metadata_exits_2(monkeypatch, capsys):
    from zoo.ram import RecurrentAttentionModel

    model = RecurrentAttentionModel.__new__(RecurrentAttentionModel)
    model.preset_metadata = {"data": {"variant": "rotated"}}
    monkeypatch.setattr(common, "load_preset", lambda preset, dtype=None: model)
    assert cli.main(["evaluate", RAM]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "variant='rotated'" in err


def test_verbs_run_under_another_dtype_policy(items, capsys):
    assert cli.main(["classify", RAM, items[0], "--dtype", "mixed_bfloat16"]) == 0
    name = capsys.readouterr().out.splitlines()[0].split(": ", 1)[1].rsplit(" (", 1)[0]
    assert name in fashion_mnist.CLASS_NAMES
    argv = ["translate", SEQ2SEQ, "Jesus wept.", "--beam", "1"]
    assert cli.main([*argv, "--dtype", "mixed_bfloat16"]) == 0
    assert capsys.readouterr().out.strip()


def test_evaluate_classifier_refuses_the_validation_split(capsys):
    code = cli.main(["evaluate", RAM, "--split", "validation"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err
    assert "split" in err and "validation" in err, err


# Help ------------------------------------------------------------------------


def test_train_help_exits_0_and_lists_the_models(capsys):
    assert cli.main(["train", "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: keras-attention train")
    for model in registry.names():
        assert f"\n  {model} " in out


def test_train_without_a_model_exits_2_naming_them(capsys):
    assert cli.main(["train"]) == 2
    err = capsys.readouterr().err
    assert "error: name the model to train" in err and "show_attend_tell" in err


@pytest.mark.parametrize("model", registry.names())
def test_train_model_help_names_the_command_typed(model, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["train", model, "--help"], prog="python -m zoo")
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: python -m zoo train {model} ")
    assert "--time-budget MINUTES" in out and "minutes" in out


def test_python_dash_m_zoo_names_itself(monkeypatch, capsys):
    import runpy

    monkeypatch.setattr("sys.argv", ["__main__.py", "train", "--help"])
    with pytest.raises(SystemExit) as exit_info:
        runpy.run_module("zoo", run_name="__main__")
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.startswith("usage: python -m zoo train")


def test_every_argument_and_option_has_help():
    import argparse

    parser = cli.build_parser()
    (commands,) = [
        action
        for action in parser._actions
        if isinstance(action, argparse._SubParsersAction)
    ]
    missing = [
        f"{name} {action.dest}"
        for name, command in commands.choices.items()
        for action in command._actions
        if not isinstance(action, argparse._HelpAction) and not action.help
    ]
    assert missing == []
