"""The RAM's traced graph is one TensorFlow's optimizer can rewrite.

With a ReLU of a sum of two `Dense` outputs (the glimpse network's last step,
`SimpleRNNCell`'s step), TensorFlow 2.21's remapper left a Relu node without
an op: W/E lines for every traced function and the function run unoptimized
(`keras_attention.layers.glimpse.relu`). A fresh process with TensorFlow's logs
on (`ZOO_VERBOSE=1`) traces the agent's predict and train steps; no line
may name the failure.
"""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from keras_attention.layers import glimpse

pytestmark = pytest.mark.tensorflow_only

FAILURES = (
    "has an empty op name",
    "No registered '' OpKernel",
    "optimization failure",
    "remapper failed",
)


def test_the_unfused_relu_is_keras_relu():
    import keras

    x = np.append(np.linspace(-3, 3, 61, dtype="float32"), [np.nan, np.inf, -np.inf])
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(glimpse.relu(x)),
        keras.ops.convert_to_numpy(keras.activations.relu(x)),
    )


def test_predict_and_fit_trace_without_optimizer_failures():
    script = textwrap.dedent(
        """
        import numpy as np
        from zoo.ram import RecurrentAttentionModel
        model = RecurrentAttentionModel(
            num_classes=4, num_glimpses=3, patch_size=4, num_scales=2,
            glimpse_units=8, location_units=8, glimpse_output_units=16,
            units=16, cell="rnn", seed=0,
        )
        images = np.zeros((4, 8, 8, 1), "uint8")
        model.predict(images, verbose=0)
        model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
        model.fit(images, np.zeros(4, "int32"), epochs=1, verbose=0)
        print("ok")
        """
    )
    env = {**os.environ, "ZOO_VERBOSE": "1", "TF_CPP_MIN_LOG_LEVEL": "0"}
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert result.stdout.strip() == "ok", result.stderr
    bad = [
        line for line in result.stderr.splitlines() if any(f in line for f in FAILURES)
    ]
    assert bad == []
