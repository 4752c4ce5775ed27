"""Warm decoding speed of the two captioning presets on the 2,000 test scenes.

    python experiments/transformer_captioner/decode_speed.py

For each preset and beam width: one `caption` call traces the search, a
second, timed, call decodes the same 2,000 scenes (no attention maps).
"""

import time

from zoo.base.task import Task
from zoo.data import scenes

test = scenes.load("test", num_scenes=2000)
for name in ("show_attend_tell_fashion_scenes", "transformer_captioner_fashion_scenes"):
    model = Task.from_preset(name)
    for width in (1, 4):
        model.caption(test["images"][:64], beam_width=width)  # traces
        start = time.perf_counter()
        model.caption(test["images"], beam_width=width)
        seconds = time.perf_counter() - start
        print(f"{name} beam {width}: {seconds:.1f} s for 2000 scenes")
