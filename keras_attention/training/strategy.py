"""Choosing a `tf.distribute` strategy by name."""

import json
import os

NAMES = ("auto", "default", "one_device", "mirrored", "multi_worker", "tpu")


def _workers():
    try:
        config = json.loads(os.environ.get("TF_CONFIG", "") or "{}")
    except json.JSONDecodeError as e:
        raise ValueError(f"TF_CONFIG is not valid JSON: {e}") from e
    return len(config.get("cluster", {}).get("worker", []))


def _tpu_resolver():
    import tensorflow as tf

    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver()
        resolver.master()  # raises when there is no TPU
    except (ValueError, RuntimeError, tf.errors.NotFoundError):
        return None
    return resolver


def get_strategy(name="auto"):
    """Returns a `tf.distribute.Strategy` by name.

    `"auto"` picks a `TPUStrategy` when a TPU resolver finds one, a
    `MultiWorkerMirroredStrategy` when `TF_CONFIG` names several workers, a
    `MirroredStrategy` with more than one GPU, and the default strategy
    otherwise.

    Args:
        name: str. One of `"auto"`, `"default"`, `"one_device"`,
            `"mirrored"`, `"multi_worker"`, `"tpu"`. Defaults to `"auto"`.

    Returns:
        A `tf.distribute.Strategy`. Build and compile models inside its
        `scope()`; batch sizes given to `fit` are global.

    Example:
    >>> import keras
    >>> import numpy as np
    >>> strategy = get_strategy("auto")  # the default strategy on one device
    >>> with strategy.scope():
    ...     model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    ...     model.compile("sgd", "mse")
    >>> global_batch = 4 * strategy.num_replicas_in_sync
    >>> history = model.fit(
    ...     np.ones((8, 4)), np.ones((8, 1)), batch_size=global_batch, verbose=0
    ... )
    >>> len(history.history["loss"])
    1
    """
    import tensorflow as tf

    if name not in NAMES:
        raise ValueError(
            f"Unknown strategy {name!r}. Valid names are: {', '.join(NAMES)}."
        )
    if name == "auto":
        if _workers() > 1:
            name = "multi_worker"
        elif len(tf.config.list_logical_devices("GPU")) > 1:
            name = "mirrored"
        elif _tpu_resolver() is not None:
            name = "tpu"
        else:
            name = "default"
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "one_device":
        gpus = tf.config.list_logical_devices("GPU")
        return tf.distribute.OneDeviceStrategy(gpus[0].name if gpus else "/cpu:0")
    if name == "mirrored":
        return tf.distribute.MirroredStrategy()
    if name == "multi_worker":
        return tf.distribute.MultiWorkerMirroredStrategy()
    resolver = _tpu_resolver()
    if resolver is None:
        raise ValueError("strategy='tpu' but no TPU was found by TPUClusterResolver.")
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)


def needs_static_shapes(strategy):
    """Whether `strategy` runs on TPUs, which want one fixed batch shape.

    Training scripts use it to switch their input pipelines to padded,
    fixed-size batches (`drop_remainder=True`) when they land on a TPU.

    Args:
        strategy: a `tf.distribute.Strategy`.

    Returns:
        bool. `True` for `TPUStrategy` (and its subclasses).

    Example:
    >>> needs_static_shapes(get_strategy("default"))
    False
    """
    import tensorflow as tf

    return isinstance(strategy, (tf.distribute.TPUStrategy,))
