"""CPU seconds of a RAM preset's predict on 2,000 translated test canvases.

Run once per checkout to compare (the process's CPU time, less moved by a
loaded machine than wall time):

    PYTHONPATH=CHECKOUT python experiments/ram/graph_optimizer_probe.py

Session 29: before the unfused ReLU (keras_attention.layers.glimpse.relu)
TensorFlow's optimizer failed on the traced predict function and ran it
unoptimized; after, it optimizes it.
"""

import time

import numpy as np

import zoo
from zoo.data import fashion_mnist

PRESET = "ram_fashion_mnist_translated_seeking_annealed"

model = zoo.from_preset(PRESET)
items, _ = fashion_mnist.load_arrays("test", path=fashion_mnist.sample_path())
canvases = fashion_mnist.translate(np.tile(items, (2, 1, 1)), canvas_size=60, seed=0)[0]
model.predict(canvases[:256], batch_size=256, verbose=0)  # trace
rounds = []
for _ in range(3):
    start = time.process_time()
    model.predict(canvases, batch_size=256, verbose=0)
    rounds.append(time.process_time() - start)
print(f"{zoo.__file__}: CPU seconds per 2,000 images {sorted(rounds)}")
