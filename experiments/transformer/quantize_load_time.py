"""Seconds to load the Transformer preset, quantize it, and load its int8 preset (#51 item 3)."""

import tempfile
import time
import warnings

warnings.simplefilter("ignore")
from zoo.base.task import Task  # noqa: E402

P = "transformer_bible_en_es"
t = time.time()
m = Task.from_preset(P)
print(f"float from_preset {time.time() - t:.1f} s", flush=True)
t = time.time()
m.quantize("int8")
print(f"quantize {time.time() - t:.1f} s", flush=True)
d = tempfile.mkdtemp()
m.save_to_preset(d)
t = time.time()
q = Task.from_preset(d)
print(f"int8 from_preset {time.time() - t:.1f} s", flush=True)
t = time.time()
m2 = Task.from_preset(P)
print(f"float from_preset again {time.time() - t:.1f} s", flush=True)
