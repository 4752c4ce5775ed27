"""The model card's usage block runs as written."""

import os
import re

import pytest

CARD = os.path.join(
    os.path.dirname(__file__), "..", "..", "..", "zoo", "show_attend_tell", "README.md"
)

pytestmark = pytest.mark.tensorflow_only


def test_usage_block_runs(tmp_path, monkeypatch):
    with open(CARD, encoding="utf-8") as f:
        blocks = re.findall(r"```python\n(.*?)```", f.read(), flags=re.S)
    assert blocks
    monkeypatch.chdir(tmp_path)  # the block writes caption.png
    namespace = {"__name__": "model_card"}
    exec(compile(blocks[0], CARD, "exec"), namespace)
    assert (tmp_path / "caption.png").stat().st_size > 1000
    assert namespace["rgb_photo"].shape == (252, 252, 3)
    assert len(namespace["maps"]) == len(namespace["texts"]) == 8
