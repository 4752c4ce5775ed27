"""examples/finetune_from_preset.py: the Transformer preset fitted on a user's TSV."""

import importlib.util
import os

import pytest

import zoo
from keras_attention import presets

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _example():
    path = os.path.join(ROOT, "examples", "finetune_from_preset.py")
    spec = importlib.util.spec_from_file_location("finetune_from_preset", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
@pytest.mark.tensorflow_only
def test_fine_tunes_keeps_the_vocabulary_and_reloads(tmp_path, capsys):
    preset = "transformer_bible_en_es"
    data = tmp_path / "pairs.tsv"
    pairs = [
        ("Jesus wept.", "Jesús lloró."),
        (
            "In the beginning God created the heavens and the earth.",
            "En el principio crió Dios los cielos y la tierra.",
        ),
        ("The Lord is my shepherd.", "Jehová es mi pastor."),
    ] * 8
    data.write_text("".join(f"{en}\t{es}\n" for en, es in pairs), encoding="utf-8")
    out = str(tmp_path / "tuned")
    module = _example()
    assert module.DEFAULT_PRESET == preset  # the example is the default
    argv = [out, f"--data={data}", "--held-out=6", "--steps=6", "--batch-size=6"]
    before, after, reloaded = module.main(argv)

    # Six steps on the same three pairs must lower their loss.
    assert after["train"] < before["train"]
    assert reloaded == pytest.approx(after["held_out"], rel=1e-5)
    meta = presets.verify_preset(out)
    assert meta["fine_tuned_from"]["preset"] == preset
    base = presets.read_metadata(zoo.list_presets()[preset])
    assets = [name for name in meta["files"] if name.startswith("assets/")]
    assert assets
    for name in assets:  # the preset's vocabularies, byte for byte
        assert meta["files"][name] == base["files"][name]
    assert meta["metrics"]["steps"] == 6
    assert "reloaded" in capsys.readouterr().out


def test_the_default_hold_out_is_a_share_with_a_floor_and_a_cap():
    module = _example()
    assert module.parse_args(["out"]).held_out is None  # decided by the data's size
    sizes = {n: module.held_out_size(n) for n in (10, 52, 400, 5000)}
    assert sizes == {10: 4, 52: 5, 400: 40, 5000: 40}  # 52 pairs: 47 left to train
