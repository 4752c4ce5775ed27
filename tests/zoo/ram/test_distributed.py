"""RecurrentAttentionModel under a 2-replica MirroredStrategy on logical CPUs.

Logical devices must be configured before TensorFlow initialises, so the
strategy runs in a fresh process (`WORKER`), which prints JSON results.
"""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytestmark = pytest.mark.tensorflow_only

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))

WORKER = textwrap.dedent(
    """
    import json
    import numpy as np
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 2
    )
    import keras
    from zoo.ram import RecurrentAttentionModel
    from zoo.ram.layers import replica_normal
    from zoo.base.task import global_batch_mean

    def build():
        model = RecurrentAttentionModel(
            num_classes=4, num_glimpses=3, patch_size=4, num_scales=2,
            glimpse_units=8, location_units=8, glimpse_output_units=16,
            units=16, seed=0,
        )
        model.compile(
            keras.optimizers.SGD(0.05),
            keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=["accuracy"],
        )
        return model

    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        mirrored = build()
        generator = keras.random.SeedGenerator(0)
    one = build()
    one.set_weights(mirrored.get_weights())

    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (64, 20, 20), dtype="uint8")
    y = rng.integers(0, 4, 64)
    # Inference follows the policy mean: both must give the same loss if
    # the extra terms are scaled as Keras scales the compiled loss.
    eval_mirrored = mirrored.evaluate(x, y, batch_size=16, verbose=0, return_dict=True)
    eval_one = one.evaluate(x, y, batch_size=16, verbose=0, return_dict=True)

    @tf.function
    def draw():
        return replica_normal((4,), generator), global_batch_mean(tf.ones((3,)))

    noise, scale = strategy.run(draw)
    noise = [v.numpy().tolist() for v in strategy.experimental_local_results(noise)]
    scale = [float(v) for v in strategy.experimental_local_results(scale)]

    before = [w.copy() for w in mirrored.get_weights()]
    history = mirrored.fit(x, y, batch_size=16, epochs=2, verbose=0)
    changed = any(
        not np.allclose(a, b) for a, b in zip(before, mirrored.get_weights())
    )
    print("RESULT " + json.dumps({
        "replicas": strategy.num_replicas_in_sync,
        "eval_mirrored": eval_mirrored,
        "eval_one": eval_one,
        "noise": noise,
        "scale": scale,
        "loss": history.history["loss"],
        "reward": history.history["reward"],
        "changed": changed,
    }))
    """
)


@pytest.fixture(scope="module")
def result():
    env = dict(os.environ, KERAS_BACKEND="tensorflow", CUDA_VISIBLE_DEVICES="")
    env.pop("TF_CONFIG", None)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    run = subprocess.run(
        [sys.executable, "-c", WORKER],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
    )
    lines = [line for line in run.stdout.splitlines() if line.startswith("RESULT ")]
    assert run.returncode == 0 and lines, run.stderr[-3000:]
    return json.loads(lines[-1][len("RESULT ") :])


def test_two_replicas(result):
    assert result["replicas"] == 2


def test_extra_losses_scaled_like_compiled_losses(result):
    mirrored, one = result["eval_mirrored"], result["eval_one"]
    # The REINFORCE and baseline terms are not zero, so an unscaled sum
    # (twice the terms) would show.
    assert abs(mirrored["reinforce_loss"]) + mirrored["baseline_loss"] > 1e-3
    for key in ("loss", "accuracy", "reinforce_loss", "baseline_loss", "reward"):
        np.testing.assert_allclose(mirrored[key], one[key], rtol=1e-5, atol=1e-6)
    assert result["scale"] == [0.5, 0.5]


def test_sampling_differs_per_replica(result):
    first, second = (np.array(v) for v in result["noise"])
    assert not np.allclose(first, second)


def test_fit_trains(result):
    assert result["changed"]
    assert np.all(np.isfinite(result["loss"]))
    assert all(0.0 <= r <= 1.0 for r in result["reward"])
