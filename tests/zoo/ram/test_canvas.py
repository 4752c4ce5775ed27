"""RAM presets say which image sizes they are good for, and warn outside them.

A preset's cost does not grow with the image, but its policy learned where to
look on canvases of one size: the 60x60 presets classify 1000x1000 canvases
at 8-18% accuracy. `classify`, `glimpses` and `look` warn
(`CanvasSizeWarning`) when an image side is outside `[canvas / 2,
canvas * 1.25]` of the canvas the preset's metadata records; `python -m
zoo classify` says it in one `warning:` line, and `python -m zoo presets`
lists the range.
"""

import importlib.util
import os
import warnings

import numpy as np
import pytest
from PIL import Image

from zoo import cli
from zoo.ram import CanvasSizeWarning, RecurrentAttentionModel, canvas

pytestmark = pytest.mark.tensorflow_only

_spec = importlib.util.spec_from_file_location(
    "tiny_models",
    os.path.join(os.path.dirname(os.path.dirname(__file__)), "tiny_models.py"),
)
tiny_models = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tiny_models)

TRANSLATED_60 = {"data": {"variant": "translated", "canvas_size": 60}}


@pytest.fixture(scope="module")
def model():
    model = tiny_models.exportable_ram()
    model.preset_metadata = TRANSLATED_60  # as `from_preset` sets it
    return model


def _verbs(model, images):
    """Each user verb on `images`, with the warnings it gave."""
    caught = {}
    for verb in ("classify", "glimpses", "look"):
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            getattr(model, verb)(images)
        caught[verb] = [w for w in record if w.category is CanvasSizeWarning]
    return caught


@pytest.mark.parametrize("side", [30, 60, 75])
def test_no_warning_within_half_to_five_quarters_of_the_canvas(model, side):
    caught = _verbs(model, np.zeros((1, side, side), "uint8"))
    assert caught == {"classify": [], "glimpses": [], "look": []}


@pytest.mark.parametrize("shape", [(1000, 1000), (29, 60), (60, 76)])
def test_every_verb_warns_far_from_the_canvas(model, shape):
    caught = _verbs(model, np.zeros((2, *shape), "uint8"))
    for verb, found in caught.items():
        assert len(found) == 1, verb
        message = str(found[0].message)
        assert f"{shape[0]}x{shape[1]}" in message and "60x60" in message
        assert "30 to 75" in message
        assert found[0].filename == __file__  # points at the caller


def test_a_model_without_metadata_does_not_warn():
    model = RecurrentAttentionModel(
        num_classes=2, num_glimpses=1, class_names=["a", "b"]
    )
    assert model.training_canvas is None
    with warnings.catch_warnings():
        warnings.simplefilter("error", CanvasSizeWarning)
        model.classify(np.zeros((1, 1000, 1000), "uint8"))


def test_training_canvas_comes_from_the_metadata():
    assert canvas.training_canvas(TRANSLATED_60) == 60
    cluttered = {"data": {"variant": "cluttered", "canvas_size": 100}}
    assert canvas.training_canvas(cluttered) == 100
    assert canvas.good_sides(100) == (50, 125)
    old = {"data": {"variant": "translated: each 28x28 item at a random place"}}
    assert canvas.training_canvas(old) == 60  # the loader's default canvas


def test_the_cli_warns_in_one_line_and_still_classifies(model, tmp_path, capsys):
    preset = str(tmp_path / "preset")
    model.save_to_preset(preset, metadata=TRANSLATED_60)
    small, large = tmp_path / "small.png", tmp_path / "large.png"
    Image.fromarray(np.zeros((60, 60), "uint8")).save(small)
    Image.fromarray(np.zeros((300, 200), "uint8")).save(large)
    plot = str(tmp_path / "paths.png")
    assert cli.main(["classify", preset, str(small), str(large), "--plot", plot]) == 0
    captured = capsys.readouterr()
    warned = [line for line in captured.err.splitlines() if line.startswith("warning")]
    assert len(warned) == 1  # the large image's, once despite --plot
    assert warned[0].startswith(f"warning: {large}: images of 300x200 are far")
    assert len([line for line in captured.out.splitlines() if ".png: " in line]) == 2


def test_presets_lists_the_image_sizes_of_a_glimpse_classifier(capsys):
    assert cli.main(["presets"]) == 0
    out = capsys.readouterr().out
    sizes = [
        line.strip() for line in out.splitlines() if "good for image sides" in line
    ]
    ram_presets = [
        line for line in out.splitlines() if "RecurrentAttentionModel" in line
    ]
    assert ram_presets and len(sizes) == len(ram_presets)
    assert all(line.startswith("trained on ") for line in sizes)
