"""Weights of each shipped preset, float vs Task.quantize("int8"): bytes in memory and
the preset's model.weights.h5 on disk."""

import os
import sys
import tempfile
import time
import warnings

import keras
import numpy as np

from zoo import list_presets
from zoo.base.task import Task


def nbytes(model):
    return sum(
        int(np.prod(v.shape))
        * np.dtype(keras.backend.standardize_dtype(v.dtype)).itemsize
        for v in model.weights
    )


for preset in sys.argv[1:] or list_presets():
    model = Task.from_preset(preset)
    before = nbytes(model)
    with tempfile.TemporaryDirectory() as d:
        model.save_to_preset(os.path.join(d, "f"))
        disk_before = os.path.getsize(os.path.join(d, "f", "model.weights.h5"))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model.quantize("int8")
        floats = sorted(
            {
                str(w.message).split()[1]
                for w in caught
                if "quantize` method" in str(w.message)
            }
        )
        after = nbytes(model)
        model.save_to_preset(os.path.join(d, "q"))
        disk_after = os.path.getsize(os.path.join(d, "q", "model.weights.h5"))
        t = time.time()
        loaded = Task.from_preset(os.path.join(d, "q"))
        load_s = time.time() - t
        same = all(
            np.array_equal(np.asarray(a), np.asarray(b))
            for a, b in zip(loaded.get_weights(), model.get_weights())
        )
    float_left = sum(
        int(np.prod(v.shape)) * 4
        for layer in model._flatten_layers()
        if layer.quantization_mode is None and len(list(layer._flatten_layers())) == 1
        for v in layer.weights
        if "float" in keras.backend.standardize_dtype(v.dtype)
    )
    print(
        f"{preset}: weights in memory {before / 1e6:.2f} MB -> {after / 1e6:.2f} MB ({before / after:.2f}x); "
        f"model.weights.h5 {disk_before / 1e6:.2f} MB -> {disk_after / 1e6:.2f} MB ({disk_before / disk_after:.2f}x); "
        f"left float: {float_left / 1e6:.2f} MB in {', '.join(floats)}; reloaded from its preset: "
        f"weights {'equal' if same else 'DIFFER'}, {load_s:.1f} s",
        flush=True,
    )
