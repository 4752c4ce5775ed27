"""`python -m zoo presets` lists the presets without Keras or TensorFlow.

It reads the registry (`zoo/<family>/family.py`, keras-free) and each
preset's `metadata.json`, so it answers at once (issue #54: "`presets`
answers in well under a second").
"""

import subprocess
import sys

import pytest

import zoo
from zoo import registry
from zoo.cli import presets

#: Run as `python -m zoo presets`; prints the heavy packages left imported.
PROBE = """
import atexit, runpy, sys
heavy = ("keras", "tensorflow", "jax", "torch", "keras_attention")
atexit.register(lambda: print(sorted(
    m for m in sys.modules if m.split(".")[0] in heavy), file=sys.stderr))
sys.argv = ["zoo", "presets"]
runpy.run_module("zoo", run_name="__main__")
"""


def test_presets_imports_neither_keras_nor_tensorflow_and_lists_them_all():
    result = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == "[]", result.stderr
    out = result.stdout.splitlines()
    for name in zoo.list_presets():
        assert sum(line.startswith(f"{name} ") for line in out) == 1, name


def test_the_keras_free_lines_are_the_task_classes():
    for family in registry.families():
        assert family.kind == family.task.kind, family.name
        for name in family.presets:
            meta = registry.read_metadata(family.preset_folder(name))
            metrics = meta.get("metrics", {})
            assert presets.metrics_summary(meta) == family.task.metrics_summary(metrics)
            assert presets.image_sizes(meta) == family.task.preset_note(meta)


def test_the_metadata_reader_keeps_keras_attentions_bounds():
    from keras_attention import presets as preset_files

    assert registry.METADATA_FILE == preset_files.METADATA_FILE
    assert registry.MAX_METADATA_BYTES == preset_files.MAX_JSON_BYTES
    for path in zoo.list_presets().values():
        assert registry.read_metadata(path) == preset_files.read_metadata(path)


def test_the_metadata_reader_refuses_a_link_and_a_file_past_the_bound(
    tmp_path, monkeypatch
):
    (tmp_path / "real.json").write_text('{"class_name": "Seq2Seq"}')
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / registry.METADATA_FILE).symlink_to(tmp_path / "real.json")
    with pytest.raises(ValueError, match="Cannot read preset file"):
        registry.read_metadata(linked)
    big = tmp_path / "big"
    big.mkdir()
    (big / registry.METADATA_FILE).write_text('{"x": "' + "a" * 100 + '"}')
    monkeypatch.setattr(registry, "MAX_METADATA_BYTES", 64)
    with pytest.raises(ValueError, match="at most 64 bytes"):
        registry.read_metadata(big)
    (big / registry.METADATA_FILE).write_text("[1]")
    with pytest.raises(ValueError, match="not a JSON object"):
        registry.read_metadata(big)
