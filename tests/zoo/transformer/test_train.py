"""`zoo.transformer.train`: token-based batches and an end-to-end run."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from keras_attention import presets
from zoo.data import bible, parallel_text
from zoo.transformer import Transformer, train

pytestmark = pytest.mark.tensorflow_only


def test_token_batches_hold_about_batch_tokens_of_similar_length():
    pairs = parallel_text.read_tsv(bible.sample_path("train"))[:200]
    lengths = np.array([len(p[1].split()) + 1 for p in pairs])
    by_pair = {p: n for p, n in zip(pairs, lengths)}
    seen = 0
    for source, target in train.token_batches(pairs, lengths, 256, seed=0):
        batch = [
            (s.decode(), t.decode()) for s, t in zip(source.numpy(), target.numpy())
        ]
        longest = max(by_pair[p] for p in batch)
        bucket_top = 8 * -(-longest // 8)  # The bucket's upper boundary.
        assert len(batch) * bucket_top <= 256 + 8 * len(batch)
        assert max(by_pair[p] for p in batch) - min(by_pair[p] for p in batch) < 8
        seen += len(batch)
    assert seen == len(pairs)


@pytest.mark.slow
def test_end_to_end_on_the_sample(tmp_path, capsys):
    out = str(tmp_path / "preset")
    train.main(
        [
            "--data=sample",
            "--config=tiny",
            "--max-steps=3",
            "--batch-tokens=1024",
            "--max-length=16",
            "--eval-limit=2",
            "--beam-width=2",
            "--verbose=0",
            f"--out={out}",
        ]
    )
    printed = capsys.readouterr().out
    assert "vocabulary:" in printed and "BLEU" in printed
    assert "nrefs:1|case:mixed" in printed
    meta = presets.verify_preset(out)
    assert meta["command"].startswith("python -m zoo.transformer.train --data=sample")
    assert meta["metrics"]["steps"] == 3
    assert set(meta["metrics"]["test"]) == {"greedy", "beam2"}
    model = Transformer.from_preset(out)
    tokenizers = (
        model.preprocessor.source_tokenizer,
        model.preprocessor.target_tokenizer,
    )
    assert tokenizers[0].get_vocabulary() == tokenizers[1].get_vocabulary()
    with open(os.path.join(out, "config.json")) as f:
        assert json.load(f)["config"]["num_layers"] == 2
    # The compiled loss, metric and schedule stored in the preset are
    # registered by importing `zoo.transformer` alone.
    code = (
        "from zoo.transformer import Transformer; "
        f"print(Transformer.from_preset({out!r}).count_params())"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split()[-1] == str(model.count_params())


@pytest.mark.slow
def test_static_shapes_run_on_the_sample(tmp_path, capsys):
    out = str(tmp_path / "preset")
    train.main(
        [
            "--data=sample",
            "--config=tiny",
            "--max-steps=2",
            "--batch-tokens=256",
            "--max-length=16",
            "--static-shapes",
            "--eval-limit=1",
            "--beam-width=2",
            "--verbose=0",
            f"--out={out}",
        ]
    )
    assert "static shapes: fixed-size batches" in capsys.readouterr().out
    # Training padded to the full length; the preset trims padding again.
    assert Transformer.from_preset(out).preprocessor.trim_padding is True
