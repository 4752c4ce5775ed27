"""The command line prints its answer and the project's warnings, nothing else.

Each verb runs in a fresh process, as a user starts it, with neither
`TF_CPP_MIN_LOG_LEVEL` nor `ZOO_VERBOSE` set: every line on standard error
must be a `warning:` line the project wrote (TensorFlow's start-up logs, its
E-level `cuInit` line and the RAM graph's optimizer errors are not).
`--verbose` brings TensorFlow's logs back.
"""

import os
import subprocess
import sys

import numpy as np
import PIL.Image
import pytest

from zoo import quiet
from zoo.data import fashion_mnist, scenes

pytestmark = pytest.mark.tensorflow_only


def _run(*argv):
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("TF_CPP_MIN_LOG_LEVEL", "ZOO_VERBOSE")
    }
    result = subprocess.run(
        [sys.executable, "-m", "zoo", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines(), result.stderr.splitlines()


def _png(path, pixels):
    PIL.Image.fromarray(np.asarray(pixels, np.uint8).squeeze()).save(path)
    return str(path)


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    folder = tmp_path_factory.mktemp("images")
    items, _ = fashion_mnist.load_arrays("test", path=fashion_mnist.sample_path())
    canvas = fashion_mnist.translate(items[:1], canvas_size=60, seed=0)[0]
    scene = scenes.load("test", num_scenes=1, sample=True, seed=5)["images"][0]
    return _png(folder / "item.png", canvas), _png(folder / "scene.png", scene)


def test_presets_prints_only_its_table():
    out, err = _run("presets")
    assert err == []
    assert any(line.startswith("transformer_bible_en_es ") for line in out)


def test_translate_prints_only_the_translation():
    out, err = _run("translate", "seq2seq_bahdanau_bible_en_es", "Jesus wept.")
    assert err == []
    assert len(out) == 1 and out[0].strip()


def test_classify_with_a_ram_preset_prints_no_graph_errors(images):
    item, _ = images
    preset = "ram_fashion_mnist_translated_seeking_annealed"
    out, err = _run("classify", preset, item)
    assert [line for line in err if not line.startswith("warning: ")] == []
    assert out == [f"{item}: {out[0].split(': ', 1)[1]}"]


def test_caption_prints_only_the_caption(images):
    _, scene = images
    out, err = _run("caption", "show_attend_tell_fashion_scenes", scene, "--beam", "1")
    assert [line for line in err if not line.startswith("warning: ")] == []
    assert len(out) == 1 and out[0].startswith(f"{scene}: a ")


def test_verbose_shows_tensorflows_logs():
    out, err = _run("presets", "--verbose")
    assert any(quiet.is_tensorflow_log(line) for line in err), err
    assert any(line.startswith("transformer_bible_en_es ") for line in out)
