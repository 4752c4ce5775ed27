"""`python -m zoo`: every bad input ends in one line and exit status 2.

Nothing is done before a bad argument is found (an unwritable `--plot` is
refused before the model runs), and nothing is silently wrong (a 16-bit
image is scaled, not wrapped modulo 256; several plots never share a file).
"""

import os
import struct
import zlib

import numpy as np
import pytest
from PIL import Image

from zoo import cli
from zoo.cli import images
from zoo.data import fashion_mnist

pytestmark = pytest.mark.tensorflow_only

RAM = "ram_fashion_mnist_translated_seeking_annealed"
SEQ2SEQ = "seq2seq_bahdanau_bible_en_es"
CAPTIONER = "show_attend_tell_fashion_scenes"


@pytest.fixture(scope="module")
def item():
    """One held-out Fashion-MNIST item on a 60x60 canvas, uint8."""
    images, _ = fashion_mnist.load_arrays("test", fashion_mnist.sample_path())
    canvas, _ = fashion_mnist.translate(images[:1], canvas_size=60, seed=3)
    return canvas[0]


def _bad_files(folder, item):
    text = folder / "notes.png"
    text.write_text("not an image")
    empty = folder / "empty.png"
    empty.write_bytes(b"")
    good = folder / "good.png"
    Image.fromarray(item).save(good)
    truncated = folder / "truncated.png"
    truncated.write_bytes(good.read_bytes()[:60])
    # A PNG whose header says 0x0 (PIL cannot write one).
    zero = folder / "zero.png"
    header = struct.pack(">IIBBBBB", 0, 0, 8, 0, 0, 0, 0)
    chunk = b"IHDR" + header
    crc = struct.pack(">I", zlib.crc32(chunk) & 0xFFFFFFFF)
    zero.write_bytes(b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + chunk + crc)
    return {"text": text, "empty": empty, "truncated": truncated, "zero": zero}


@pytest.mark.parametrize("command, preset", [("classify", RAM), ("caption", CAPTIONER)])
@pytest.mark.parametrize("kind", ["text", "empty", "truncated", "zero"])
def test_unreadable_image_exits_2_naming_the_file(
    command, preset, kind, item, tmp_path, capsys
):
    path = _bad_files(tmp_path, item)[kind]
    assert cli.main([command, preset, str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert str(path) in err and "not a readable image" in err


def test_sixteen_bit_png_is_scaled_not_wrapped(item, tmp_path):
    eight = tmp_path / "eight.png"
    Image.fromarray(item).save(eight)
    sixteen = tmp_path / "sixteen.png"
    Image.fromarray(item.astype("uint16") * 257).save(sixteen)
    assert Image.open(sixteen).mode.startswith("I")
    read_eight = images.read_image(str(eight), 1)
    read_sixteen = images.read_image(str(sixteen), 1)
    np.testing.assert_array_equal(read_sixteen, read_eight)


def test_several_outputs_never_share_a_plot_file(item, tmp_path, capsys):
    image = tmp_path / "item.png"
    Image.fromarray(item).save(image)
    plot = str(tmp_path / "paths")  # no extension
    assert cli.main(["classify", RAM, str(image), str(image), "--plot", plot]) == 0
    assert sorted(os.listdir(tmp_path)) == ["item.png", "paths_0.png", "paths_1.png"]


@pytest.mark.parametrize(
    "plot",
    ["/no/such/folder/out.png", "{file}/out.png", "{folder}"],
    ids=["missing-folder", "parent-is-a-file", "is-a-folder"],
)
def test_unwritable_plot_is_refused_before_the_work(plot, item, tmp_path, capsys):
    image = tmp_path / "item.png"
    Image.fromarray(item).save(image)
    plot = plot.format(file=image, folder=tmp_path)
    assert cli.main(["classify", RAM, str(image), "--plot", plot]) == 2
    captured = capsys.readouterr()
    assert "--plot" in captured.err
    assert captured.out == ""  # nothing was classified


@pytest.mark.parametrize(
    "argv",
    [
        ["evaluate", RAM, "--limit", "0"],
        ["evaluate", RAM, "--limit", "-1"],
        ["translate", SEQ2SEQ, "hi", "--beam", "0"],
        ["caption", CAPTIONER, "x.png", "--beam", "-2"],
        ["evaluate", SEQ2SEQ, "--beam", "zero"],
        ["train", "ram", "--epochs", "0"],
        ["train", "seq2seq", "--out", "p", "--batch-size", "-8"],
        ["train", "transformer", "--out", "p", "--max-steps", "0"],
        ["train", "show_attend_tell", "--out", "p", "--epochs", "-1"],
    ],
)
def test_counts_below_one_are_argument_errors(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    assert exit_info.value.code == 2
    assert "expected an int >= 1" in capsys.readouterr().err


def test_a_time_budget_must_be_positive(capsys):
    argv = ["train", "transformer", "--out", "p", "--time-budget", "nan"]
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    assert exit_info.value.code == 2
    assert "expected a number > 0" in capsys.readouterr().err


def test_train_on_missing_data_exits_2(tmp_path, capsys):
    empty = tmp_path / "empty.tsv"
    empty.write_text("")
    argv = ["train", "seq2seq", "--data", str(empty), "--out", str(tmp_path / "p")]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and len(err.splitlines()) == 1


# Refused up front, or clipped ---------------------------------------------------


def _tiny_models():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "tiny_models",
        os.path.join(os.path.dirname(os.path.dirname(__file__)), "tiny_models.py"),
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def tiny_presets(tmp_path_factory):
    """A tiny RAM (60x60 canvases, its metadata says) and captioner, saved."""
    tiny = _tiny_models()
    folder = tmp_path_factory.mktemp("presets")
    ram = tiny.exportable_ram()
    ram.save_to_preset(
        folder / "ram", metadata={"data": {"variant": "translated", "canvas_size": 60}}
    )
    captioner = tiny.show_attend_tell()
    captioner.caption(tiny.scenes_batch(1)[0], beam_width=1)  # built
    captioner.save_to_preset(folder / "captioner")
    return {"ram": str(folder / "ram"), "captioner": str(folder / "captioner")}


def test_a_plot_that_is_not_an_image_file_is_refused_before_the_work(
    tiny_presets, item, tmp_path, capsys
):
    image = tmp_path / "item.png"
    Image.fromarray(item).save(image)
    plot = str(tmp_path / "plot.txt")
    assert cli.main(["classify", tiny_presets["ram"], str(image), "--plot", plot]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # nothing was classified
    assert "--plot" in captured.err and ".png" in captured.err
    assert len(captured.err.strip().splitlines()) == 1
    assert sorted(os.listdir(tmp_path)) == ["item.png"]


def test_export_to_an_existing_file_is_refused_before_loading(tmp_path, capsys):
    target = tmp_path / "notes.txt"
    target.write_text("keep me")
    # No preset is loaded: the check comes first, so even a bad name gets it.
    assert cli.main(["export", "no_such_preset", str(target)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "is a file, not a folder" in err
    assert target.read_text() == "keep me"
    inside = str(target / "export")
    assert cli.main(["export", "no_such_preset", inside]) == 2
    assert "inside a file" in capsys.readouterr().err


def test_evaluate_limit_above_the_split_is_clipped_not_allocated(
    tiny_presets, monkeypatch, capsys
):
    from zoo.captioning import evaluation
    from zoo.data import scenes

    asked = []
    real_load = scenes.load

    def load(split, num_scenes=None, **kwargs):
        asked.append(num_scenes)
        return real_load(split, num_scenes=4, sample=True)

    monkeypatch.setattr(scenes, "load", load)
    monkeypatch.setattr(evaluation, "evaluate_scenes", lambda *a, **k: None)
    argv = ["evaluate", tiny_presets["captioner"], "--limit", "1000000000"]
    assert cli.main(argv) == 0
    assert asked == [scenes.DEFAULT_SIZES["test"]]
    assert cli.main([*argv[:-1], "3"]) == 0
    assert asked[-1] == 3


@pytest.mark.parametrize("text", ["", "   "])
def test_translate_an_empty_sentence_exits_2_before_loading(text, capsys):
    # No preset is loaded: the check comes first.
    assert cli.main(["translate", "no_such_preset", "Amen.", text]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "TEXT 2 of 2 is empty" in err
