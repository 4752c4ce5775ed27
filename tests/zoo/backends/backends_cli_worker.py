"""`python -m zoo`'s verbs on the shipped presets and samples, on this process's backend.

`python backends_cli_worker.py FOLDER [--train]` writes a few inputs into
FOLDER (held-out Fashion-MNIST items on 60x60 canvases and held-out scenes,
as PNG files), then runs the CLI (`zoo.cli.main`, what `python -m zoo`
runs) in this process: `translate` with both translation presets (one with
`--plot`), `caption` with both captioners (one with `--plot`), `classify`
(with `--plot`), `evaluate` of RAM and of a captioner on the shipped
samples (a translator's needs the Debian SWORD modules), and `export` of
the RAM preset (a SavedModel in `FOLDER/export`; it needs TensorFlow's
backend). With `--train` it also trains RAM two steps on the shipped
sample (`train ram ... --max-steps 2`) and classifies with the preset
written.

It prints one JSON object on its last line: for each command (a name of
`commands()`), its `argv`, exit `status`, `out`, `err` and `seconds` (FOLDER written
as `FOLDER`, so two runs compare), and `files`: the size of each file
written under FOLDER.
`tests/zoo/backends/test_backends_cli.py` runs it under TensorFlow and under the
backend it tests, and compares.
"""

import contextlib
import io
import json
import os
import sys
import time

SEQ2SEQ = "seq2seq_bahdanau_bible_en_es"
TRANSFORMER = "transformer_bible_en_es"
SHOW_ATTEND_TELL = "show_attend_tell_fashion_scenes"
CAPTIONER = "transformer_captioner_fashion_scenes"
RAM = "ram_fashion_mnist_translated_seeking_annealed"
VERSES = 2
#: A RAM row small enough to train in seconds (`zoo/ram/train.py`).
TRAIN_RAM = [
    "--data", "sample",
    "--rows", "ram_translated_6",
    "--units", "8",
    "--batch-size", "32",
    "--max-steps", "2",
    "--verbose", "0",
]  # fmt: skip


def inputs(folder):
    """`(verses, items, scenes)`: the 2 shortest held-out verses of the
    sample, and the PNG paths of 2 items and 2 scenes written into `folder`
    (the same pixels on every backend)."""
    import numpy as np
    from PIL import Image

    from zoo.data import bible, fashion_mnist, parallel_text, scenes

    # The shortest held-out verses: PyTorch decodes step by step, eagerly.
    sources = [
        source for source, _ in parallel_text.read_tsv(bible.sample_path("test"))
    ]
    verses = sorted(sorted(sources, key=len)[:VERSES], key=sources.index)
    images, _ = fashion_mnist.load_arrays("test", fashion_mnist.sample_path())
    canvases, _ = fashion_mnist.translate(images[:2], canvas_size=60, seed=3)
    held_out = scenes.load("test", num_scenes=2, sample=True, seed=5)["images"]
    paths = {"items": [], "scenes": []}
    for kind, arrays in (("items", canvases), ("scenes", held_out)):
        for i, array in enumerate(arrays):
            path = os.path.join(folder, f"{kind}_{i}.png")
            Image.fromarray(np.asarray(array, "uint8").squeeze()).save(path)
            paths[kind].append(path)
    return verses, paths["items"], paths["scenes"]


def commands(folder, train=False):
    """`{name: argv}` of the CLI runs, in order."""
    from zoo.data import fashion_mnist

    verses, items, scene_files = inputs(folder)
    samples = fashion_mnist.sample_path()
    plot = os.path.join(folder, "{}.png").format
    runs = {
        "translate_transformer": [
            "translate", TRANSFORMER, *verses, "--beam", "2",
            "--plot", plot("alignment"),
        ],
        "translate_seq2seq": ["translate", SEQ2SEQ, *verses, "--beam", "1"],
        "caption_show_attend_tell": [
            "caption", SHOW_ATTEND_TELL, *scene_files, "--beam", "2",
            "--plot", plot("words"),
        ],
        "caption_transformer_captioner": [
            "caption", CAPTIONER, *scene_files, "--beam", "1",
        ],
        "classify": ["classify", RAM, *items, "--plot", plot("glimpses")],
        "evaluate_ram": ["evaluate", RAM, "--limit", "20", "--data-path", samples],
        "evaluate_captioner": [
            "evaluate", SHOW_ATTEND_TELL, "--limit", "2", "--beam", "2",
            "--data-path", samples,
        ],
        "export": ["export", RAM, os.path.join(folder, "export")],
    }  # fmt: skip
    if train:
        preset = os.path.join(folder, "trained_ram")
        runs["train"] = ["train", "ram", *TRAIN_RAM, "--out", preset]
        runs["classify_trained"] = ["classify", preset, items[0]]
    return runs


def run(argv):
    """`zoo.cli.main(argv)`: its exit status, stdout, stderr and seconds."""
    from zoo import cli

    out, err = io.StringIO(), io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = cli.main(argv, prog="python -m zoo")
        except SystemExit as e:  # what `python -m zoo` would exit with
            status = e.code
    return {
        "argv": argv,
        "status": status,
        "out": out.getvalue(),
        "err": err.getvalue(),
        "seconds": round(time.perf_counter() - start, 1),
    }


def outputs(folder, train=False):
    """`{name: run}` of every command, and `files`: the sizes of FOLDER's files."""

    def relative(value):
        if isinstance(value, list):
            return [relative(item) for item in value]
        return value.replace(folder, "FOLDER") if isinstance(value, str) else value

    result = {
        name: {key: relative(value) for key, value in run(argv).items()}
        for name, argv in commands(folder, train).items()
    }
    result["files"] = {
        relative(os.path.join(root, name)): os.path.getsize(os.path.join(root, name))
        for root, _, names in os.walk(folder)
        for name in names
    }
    return result


if __name__ == "__main__":
    sys.path.insert(
        0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    )
    folder = os.path.abspath(sys.argv[1])
    print(json.dumps(outputs(folder, train="--train" in sys.argv[2:])))
