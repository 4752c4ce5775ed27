"""The `--strategy` of a training run on each backend (`zoo.training.strategy`, #43).

Under JAX, `auto` trains in `keras.distribution.DataParallel` when there
are several devices: `data_parallel_worker.py`, in a process whose CPU is
two JAX devices, fits the tiny Transformer 2 steps through the harness on
one device and on both; the distribution is in effect during `fit`, every
variable lives on both devices, each device computes on half of the batch,
and loss and weights are those of the one-device run within float
tolerance. In this process, on every backend: which strategy each name
gives, and the names a backend cannot honour refused in one line.
"""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from zoo.training import strategy as strategies

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
BACKEND = keras.backend.backend()


@pytest.mark.skipif(BACKEND != "jax", reason="keras.distribution runs on JAX")
def test_data_parallel_over_two_devices_trains_as_one_device(tmp_path):
    flags = (
        os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2"
    )
    env = dict(
        os.environ,
        KERAS_BACKEND="jax",
        JAX_PLATFORMS="cpu",
        XLA_FLAGS=flags.strip(),
        PYTHONPATH=ROOT,
    )
    out = tmp_path / "weights.npz"
    done = subprocess.run(
        [
            sys.executable,
            os.path.join(HERE, "data_parallel_worker.py"),
            "--out",
            str(out),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["devices"] == ["cpu:0", "cpu:1"]
    one, two = report["default"], report["auto"]

    assert (one["strategy"], one["replicas"], one["static_shapes"]) == (
        "SingleDevice",
        1,
        False,
    )
    assert one["distribution_devices"] == [0, 0]  # No distribution, 2 steps.
    assert one["variable_devices"] == [1]
    assert one["batch_shard"] == [4, 3]

    assert (two["strategy"], two["replicas"], two["static_shapes"]) == (
        "DataParallel",
        2,
        True,
    )
    assert two["distribution_devices"] == [2, 2]
    assert two["variable_devices"] == [2] and two["replicated"]
    assert two["batch_shard"] == [2, 3]  # Each device gets half the batch.
    assert two["odd_batch_refused"].startswith("error: --batch-size 3 must be")

    assert one["steps"] == two["steps"] == 2
    assert np.isfinite(one["loss"]).all()
    np.testing.assert_allclose(two["loss"], one["loss"], rtol=1e-5)
    weights = np.load(out)
    names = sorted(
        k.split(":", 1)[1] for k in weights.files if k.startswith("default:")
    )
    assert len(names) > 10
    for name in names:
        np.testing.assert_allclose(
            weights[f"auto:{name}"],
            weights[f"default:{name}"],
            rtol=1e-5,
            atol=1e-6,
            err_msg=name,
        )


def test_each_name_gives_the_strategy_of_this_backend():
    auto, default = strategies.strategy_for("auto"), strategies.strategy_for("default")
    assert default.num_replicas_in_sync == 1
    devices = len(keras.distribution.list_devices()) if BACKEND == "jax" else 1
    assert auto.num_replicas_in_sync == (devices if BACKEND != "tensorflow" else 1)
    with default.scope():
        model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    assert model.count_params() == 3
    if BACKEND == "tensorflow":
        import tensorflow as tf

        assert default.strategy is tf.distribute.get_strategy()
        assert default.name == type(tf.distribute.get_strategy()).__name__
        return
    assert default.name == "SingleDevice" and not default.needs_static_shapes
    if BACKEND == "jax":
        data_parallel = strategies.strategy_for("data_parallel")
        assert data_parallel.name == "DataParallel"
        assert data_parallel.num_replicas_in_sync == len(
            keras.distribution.list_devices()
        )
        with data_parallel.scope():
            assert keras.distribution.distribution() is data_parallel.distribution
        assert keras.distribution.distribution() is None


REFUSED = {
    "tensorflow": {
        "data_parallel": "is keras.distribution.DataParallel, for KERAS_BACKEND=jax"
    },
    "jax": {"mirrored": "needs the TensorFlow backend (KERAS_BACKEND=tensorflow)"},
    "torch": {
        "data_parallel": "needs KERAS_BACKEND=jax (keras.distribution); "
        "this process runs 'torch', which trains on one device",
        "tpu": "needs the TensorFlow backend (KERAS_BACKEND=tensorflow)",
    },
}


@pytest.mark.parametrize("name", ["gpus", *REFUSED[BACKEND]])
def test_a_name_this_backend_cannot_honour_is_refused_in_one_line(name, capsys):
    with pytest.raises(SystemExit) as stopped:
        strategies.strategy_for(name)
    assert stopped.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith(f"error: --strategy {name}")
    expected = REFUSED[BACKEND].get(name, "is not a strategy. Valid names are: auto,")
    assert expected in err


def test_a_batch_the_devices_cannot_split_is_refused_naming_its_options():
    strategy = strategies.DataParallel(devices=["cpu:0", "cpu:1"])
    strategy.check_batch_size(10, "--batch-tokens // --max-length")
    with pytest.raises(ValueError) as refused:
        strategy.check_batch_size(9, "--batch-tokens // --max-length")
    assert str(refused.value).startswith(
        "--batch-tokens // --max-length 9 must be a multiple of the 2 devices"
    )
    assert str(refused.value).endswith("Received: batch_tokens // max_length=9")
