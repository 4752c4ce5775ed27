"""`python -m zoo` on JAX and PyTorch: the verbs print TensorFlow's answers (#43).

Run by `make test` under `KERAS_BACKEND=jax` and `KERAS_BACKEND=torch`
(skipped under TensorFlow, the reference). `backends_cli_worker.py` runs the
CLI's verbs on the shipped presets and samples in one process per backend,
this one's and TensorFlow's (once for both backends' passes:
`tensorflow_reference.py`), side by side: `translate`, `caption` and
`classify` must print TensorFlow's text (translations, captions and classes
equal; printed probabilities and scores within their last printed digit),
`evaluate` its scores, every `--plot` a PNG; `train ram --max-steps 2`
writes a preset that classifies; `export` refuses in one line naming the
backend; no warning is printed that TensorFlow does not print. `serve` needs TensorFlow installed, not its backend: it runs an
export with TensorFlow alone, and answers here as on TensorFlow.
"""

import json
import os
import pathlib
import re
import subprocess
import sys

import keras
import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
WORKER = os.path.join(HERE, "backends_cli_worker.py")
sys.path[:0] = [HERE, os.path.dirname(HERE)]  # this folder's helpers, tests/zoo's

import tensorflow_reference  # noqa: E402

BACKEND = keras.backend.backend()

pytestmark = pytest.mark.skipif(
    BACKEND == "tensorflow", reason="compares another backend with TensorFlow"
)

NUMBER = re.compile(r"-?\d+(?:\.(\d+))?")
PNG = b"\x89PNG\r\n\x1a\n"
TIMING = re.compile(r",? \d+(?:\.\d+)? s\b")


def _start(backend, folder, *options):
    # One OpenMP thread: the two workers and pytest's share the cores (a
    # PyTorch worker with a thread per core ran 5x slower on 2 busy cores).
    env = dict(
        os.environ,
        KERAS_BACKEND=backend,
        PYTHONPATH=ROOT,
        TF_CPP_MIN_LOG_LEVEL="3",
        CUDA_VISIBLE_DEVICES="",
        OMP_NUM_THREADS="1",
    )
    return subprocess.Popen(
        [sys.executable, WORKER, str(folder), *options],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(process):
    try:
        out, err = process.communicate(timeout=900)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def runs(request, tmp_path_factory):
    """The worker's runs: `here` (this backend, with `--train`) and
    `tensorflow`, and the `folders` they wrote, by the same names.

    TensorFlow's run and folder come from the cache when the other
    backend's pass made them for this code (`tensorflow_reference.py`);
    if not, both processes run at once.
    """
    reference = tensorflow_reference.Reference(request.config, "backends_cli", WORKER)
    process = None
    if reference.answer is None:
        process = _start("tensorflow", reference.folder)
    here_folder = tmp_path_factory.mktemp(BACKEND)
    here = _start(BACKEND, here_folder, "--train")
    try:
        if process is not None:
            reference.keep(_finish(process))
    finally:
        mine = _finish(here)
    folders = {"here": here_folder, "tensorflow": pathlib.Path(reference.folder)}
    return {"here": mine, "tensorflow": reference.answer, "folders": folders}


def _both(runs, name):
    """`(here, tensorflow)` runs of command `name`, both exited 0."""
    here, tensorflow = runs["here"][name], runs["tensorflow"][name]
    assert tensorflow["status"] == 0, tensorflow["err"][-3000:]
    assert here["status"] == 0, here["err"][-3000:]
    return here, tensorflow


def _same_text(actual, expected):
    """Equal text; a printed decimal may differ by one in its last digit."""
    assert NUMBER.sub("#", actual) == NUMBER.sub("#", expected), (actual, expected)
    for mine, theirs in zip(NUMBER.finditer(actual), NUMBER.finditer(expected)):
        digits = len(theirs.group(1) or "")
        tolerance = 1.001 * 10.0**-digits if digits else 0.0  # counts: equal
        difference = abs(float(mine.group()) - float(theirs.group()))
        assert difference <= tolerance, (actual, expected)


def _without_timings(text):
    """`text` without Keras's progress bars and the seconds a run took."""
    lines = [line for line in text.splitlines() if "/step" not in line]
    return TIMING.sub("", "\n".join(lines))


def _classes(out):
    """The class names `classify` printed, one per image."""
    return [
        line.split(": ", 1)[1].rsplit(" (", 1)[0]
        for line in out.splitlines()
        if line.startswith("FOLDER/")
    ]


@pytest.mark.parametrize(
    "name",
    [
        "translate_transformer",
        "translate_seq2seq",
        "caption_show_attend_tell",
        "caption_transformer_captioner",
    ],
)
def test_translate_and_caption_print_tensorflows_text(runs, name):
    here, tensorflow = _both(runs, name)
    assert len(here["out"].strip().splitlines()) >= 2
    assert here["out"] == tensorflow["out"]


@pytest.mark.parametrize(
    "name",
    ["classify", "evaluate_ram", "evaluate_captioner"],
)
def test_classify_and_evaluate_print_tensorflows_scores(runs, name):
    here, tensorflow = _both(runs, name)
    assert NUMBER.search(here["out"])
    _same_text(_without_timings(here["out"]), _without_timings(tensorflow["out"]))
    # Items on the preset's own canvas size: nothing to warn about (PyTorch
    # used to echo a NumPy deprecation as `warning: <image>: ...`).
    assert "warning" not in here["err"]


@pytest.mark.parametrize("name", ["alignment", "words", "glimpses"])
def test_each_plot_is_a_png_per_input(runs, name):
    for i in range(2):  # two verses, scenes, items
        path = runs["folders"]["here"] / f"{name}_{i}.png"
        assert path.stat().st_size > 1000
        with open(path, "rb") as f:
            assert f.read(8) == PNG


def test_train_writes_a_preset_that_classifies(runs):
    from zoo.data import fashion_mnist

    train, classify = runs["here"]["train"], runs["here"]["classify_trained"]
    assert train["status"] == 0, train["err"][-3000:]
    assert "ram_translated_6: test error" in train["out"]
    assert (runs["folders"]["here"] / "trained_ram" / "model.weights.h5").is_file()
    assert classify["status"] == 0, classify["err"][-3000:]
    (name,) = _classes(classify["out"])
    assert name in fashion_mnist.CLASS_NAMES


def test_export_refuses_in_one_line_naming_the_backend(runs):
    here, tensorflow = runs["here"]["export"], runs["tensorflow"]["export"]
    assert tensorflow["status"] == 0, tensorflow["err"][-3000:]
    assert here["status"] == 2
    assert here["err"].strip().count("\n") == 0
    assert "needs the TensorFlow backend (KERAS_BACKEND=tensorflow)" in here["err"]
    assert repr(BACKEND) in here["err"]
    assert not (runs["folders"]["here"] / "export").exists()


def test_serve_answers_tensorflows_export_with_its_classes(runs):
    """`serve` runs an export with TensorFlow alone, not Keras: on this
    backend it answers as `classify` does on TensorFlow."""
    from PIL import Image
    from serving_helpers import post, serving

    from zoo.serving.server import make_server

    folder = runs["folders"]["tensorflow"]
    images = [
        np.asarray(Image.open(folder / f"items_{i}.png"))[..., None].tolist()
        for i in range(2)
    ]
    with serving(make_server(str(folder / "export"), port=0)) as address:
        status, answer = post(address, {"image": images})
    assert status == 200, answer
    served = [row["class_name"] for row in answer["predictions"]]
    assert served == _classes(runs["tensorflow"]["classify"]["out"])
