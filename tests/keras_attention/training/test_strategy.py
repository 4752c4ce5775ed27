"""`get_strategy`: names, the CPU default, and MirroredStrategy replicas."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from keras_attention.training import get_strategy
from keras_attention.training.strategy import NAMES

pytestmark = pytest.mark.tensorflow_only


def test_default_and_auto_on_cpu(monkeypatch):
    import tensorflow as tf

    if tf.config.list_logical_devices("GPU") or os.environ.get("TPU_NAME"):
        pytest.skip("auto picks another strategy with accelerators")
    monkeypatch.delenv("TF_CONFIG", raising=False)
    default = tf.distribute.get_strategy()
    assert get_strategy("default") is default
    assert get_strategy("auto") is default
    assert get_strategy() is default
    assert default.num_replicas_in_sync == 1


def test_one_device_uses_the_cpu():
    import tensorflow as tf

    if tf.config.list_logical_devices("GPU"):
        pytest.skip("one_device picks the first GPU")
    strategy = get_strategy("one_device")
    assert isinstance(strategy, tf.distribute.OneDeviceStrategy)
    assert strategy.extended.worker_devices[0].endswith("CPU:0")


def test_unknown_name_lists_valid_names():
    with pytest.raises(ValueError, match="Unknown strategy 'gpus'") as info:
        get_strategy("gpus")
    for name in NAMES:
        assert name in str(info.value)


def test_bad_tf_config(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", "{not json")
    with pytest.raises(ValueError, match="TF_CONFIG is not valid JSON"):
        get_strategy("auto")


def test_tpu_without_tpu_is_a_clear_error():
    import tensorflow as tf

    if tf.config.list_logical_devices("TPU"):
        pytest.skip("a TPU is attached")
    with pytest.raises(ValueError, match="no TPU was found"):
        get_strategy("tpu")


# Logical devices must be configured before TensorFlow initialises its
# devices, which this test process has already done: use a fresh process.
MIRRORED = textwrap.dedent(
    """
    import json
    import numpy as np
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 2
    )
    import keras
    from keras_attention.training import get_strategy

    strategy = get_strategy("mirrored")
    with strategy.scope():
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
        model.compile(keras.optimizers.SGD(0.1), "mse")
    kernel = model.layers[0].kernel.numpy()
    x = np.arange(24, dtype="float32").reshape(8, 3) / 10
    y = x.sum(axis=1, keepdims=True)
    model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    # One SGD step on the global batch of 8, split over the two replicas.
    bias = 0.0
    grad = 2 * x.T @ (x @ kernel + bias - y) / len(x)
    expected = kernel - 0.1 * grad
    print(json.dumps({
        "type": type(strategy).__name__,
        "replicas": strategy.num_replicas_in_sync,
        "devices": list(strategy.extended.worker_devices),
        "error": float(np.abs(model.layers[0].kernel.numpy() - expected).max()),
    }))
    """
)


def test_mirrored_over_two_logical_cpus():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    env = dict(os.environ, KERAS_BACKEND="tensorflow", CUDA_VISIBLE_DEVICES="")
    env.pop("TF_CONFIG", None)
    result = subprocess.run(
        [sys.executable, "-c", MIRRORED],
        capture_output=True,
        text=True,
        cwd=root,
        env=env,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["type"] == "MirroredStrategy"
    assert report["replicas"] == 2
    assert [d[-5:] for d in report["devices"]] == ["CPU:0", "CPU:1"]
    assert report["error"] < 1e-5
