"""Checkpoint averaging: the mean of saved weights, and the saving callback."""

import os

import keras
import numpy as np

from zoo.transformer.averaging import (
    Checkpoints,
    average_checkpoints,
    checkpoint_paths,
)


def model():
    inputs = keras.Input((3,))
    return keras.Model(inputs, keras.layers.Dense(2)(keras.layers.Dense(4)(inputs)))


def test_average_is_the_mean_of_the_checkpoints(tmp_path):
    net = model()
    rng = np.random.default_rng(0)
    saved = []
    for i in range(3):
        weights = [rng.normal(size=w.shape).astype("float32") for w in net.weights]
        net.set_weights(weights)
        net.save_weights(str(tmp_path / f"checkpoint_{i}.weights.h5"))
        saved.append(weights)
    paths = checkpoint_paths(str(tmp_path))
    assert [os.path.basename(p) for p in paths] == [
        f"checkpoint_{i}.weights.h5" for i in range(3)
    ]
    average_checkpoints(net, paths[1:])
    for got, a, b in zip(net.get_weights(), saved[1], saved[2]):
        np.testing.assert_allclose(got, (a + b) / 2, rtol=1e-6)


def test_callback_keeps_the_last_checkpoints(tmp_path):
    net = model()
    net.compile("sgd", "mse")
    callback = Checkpoints(str(tmp_path), minutes=1e-9, keep=2)
    x, y = np.ones((8, 3)), np.ones((8, 2))
    net.fit(x, y, batch_size=2, epochs=1, verbose=0, callbacks=[callback])
    paths = checkpoint_paths(str(tmp_path))
    assert [os.path.basename(p) for p in paths] == [
        "checkpoint_3.weights.h5",
        "checkpoint_4.weights.h5",
    ]
    # The last checkpoint holds the final weights.
    final = net.get_weights()
    net.load_weights(paths[-1])
    for a, b in zip(net.get_weights(), final):
        np.testing.assert_array_equal(a, b)
