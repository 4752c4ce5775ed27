"""`python -m zoo` / `keras-attention`: commands on the shipped presets."""

import os

import keras
import pytest

from zoo import cli
from zoo.data import fashion_mnist, scenes

RAM = "ram_fashion_mnist_translated"
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
        (["classify", SEQ2SEQ, "x.png"], "not a glimpse classifier"),
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
