"""python -m zoo.ram.evaluation: per-glimpse distances on the preset's canvases."""

import numpy as np
import pytest

from zoo.data import fashion_mnist
from zoo.ram import evaluation

pytestmark = pytest.mark.tensorflow_only

PRESET = "ram_fashion_mnist_translated_seeking_annealed"


def test_distances_on_the_presets_canvases_and_on_others(capsys):
    path = fashion_mnist.sample_path()
    mean, border = evaluation.main([PRESET, "--limit", "50", "--path", path])
    assert mean.shape == border.shape == (6,)
    out = capsys.readouterr().out
    # The preset's own test canvases: translated 60x60, seed 1.
    assert "50 translated 60x60 test canvases (seed 1)" in out
    assert out.count("|---|") == 1
    # Glimpse 1 sits at the centre: its distance is the items' mean offset.
    images = fashion_mnist.load_arrays("test", path)[0]
    _, positions = fashion_mnist.translate(images, 60, seed=1)
    centres = evaluation.item_centres(positions[:50], 60)
    np.testing.assert_allclose(mean[0], np.linalg.norm(centres, axis=-1).mean())

    evaluation.main(
        [PRESET, "--limit", "20", "--path", path, "--variant", "cluttered"]
        + ["--canvas-size", "100", "--seed", "3"]
    )
    assert "20 cluttered 100x100 test canvases (seed 3)" in capsys.readouterr().out


def test_random_first_glimpses_and_the_plot(tmp_path, capsys):
    path, png = fashion_mnist.sample_path(), tmp_path / "paths.png"
    argv = [PRESET, "--limit", "30", "--path", path, "--start", "random"]
    mean, _ = evaluation.main(argv + ["--plot", str(png)])
    assert "first glimpse at random" in capsys.readouterr().out
    assert png.read_bytes()[:4] == b"\x89PNG"
    # Seeded: the same random starts again; farther from the item than the centre.
    np.testing.assert_array_equal(evaluation.main(argv)[0], mean)
    centre, _ = evaluation.main(argv[:-2])
    assert mean[0] > centre[0]


def test_test_samples_adds_the_sampled_error_and_keeps_the_mean_path(capsys):
    argv = [PRESET, "--limit", "40", "--path", fashion_mnist.sample_path()]
    mean, border = evaluation.main(argv)
    assert "sampled glimpse paths" not in capsys.readouterr().out
    sampled_mean, sampled_border = evaluation.main(argv + ["--test-samples", "4"])
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("with 4 sampled"))
    error = float(line.rsplit(" ", 1)[1].rstrip("%"))
    assert 0.0 <= error <= 100.0 and error * 40 / 100 == pytest.approx(
        round(error * 40 / 100)
    )
    # The per-glimpse table describes the policy mean, with or without samples.
    np.testing.assert_array_equal(sampled_mean, mean)
    np.testing.assert_array_equal(sampled_border, border)


@pytest.mark.parametrize("value", ["0", "two"])
def test_bad_test_samples_exits_2(value, capsys):
    with pytest.raises(SystemExit) as exit_info:
        evaluation.main([PRESET, "--test-samples", value])
    assert exit_info.value.code == 2
    assert "--test-samples" in capsys.readouterr().err


def test_bad_variant_exits_2(capsys):
    with pytest.raises(SystemExit) as exit_info:
        evaluation.main([PRESET, "--variant", "rotated"])
    assert exit_info.value.code == 2
    assert "--variant" in capsys.readouterr().err


def test_item_coverage_counts_the_item_not_the_clutter():
    items = fashion_mnist.load_arrays("test", fashion_mnist.sample_path())[0][:20]
    canvases, positions = fashion_mnist.clutter(items, 60, num_pieces=8, seed=2)
    centres = evaluation.item_centres(positions, 60)
    whole_box = evaluation.item_coverage(canvases, positions, centres[:, None], 28)
    np.testing.assert_allclose(whole_box, [np.mean(items > 0)])
    # Every canvas seen whole: only the item's own pixels count.
    everything = evaluation.item_coverage(canvases, positions, np.zeros((20, 1, 2)), 60)
    assert (canvases > 0).mean() > everything[0]
    np.testing.assert_allclose(everything, [np.mean(items > 0) * 28**2 / 60**2])
