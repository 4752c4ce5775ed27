"""Loss corrections that make a `tf.distribute` step equal a one-device step.

Keras divides each replica's loss by that replica's own count of outputs and
averages the replicas, so with uneven replicas (variable-length targets, the
last partial batch) the summed gradients are not those of the mean over the
global batch. `Task.compute_loss` weights each replica's share with
`global_average_weights`; loss terms a model adds itself (e.g. REINFORCE)
use `global_batch_mean`; `logged_as_share` fixes the value Keras logs.
Outside a replica context, or with one replica, every function is the
identity (or the plain mean), so single-device training is unchanged; so it
is on a backend other than TensorFlow (no `tf.distribute` there), where the
functions compute with `keras.ops`.

Example:
>>> import numpy as np
>>> float(global_batch_mean(np.array([1.0, 2.0, 6.0])))  # One device: the mean.
3.0
"""

import keras

from zoo import quiet
from zoo.base import backends

tf = quiet.LazyModule("tensorflow", "Training under tf.distribute")


def _replicas():
    """`(replica context or None, number of replicas in sync)`."""
    if not backends.on_tensorflow():
        return None, 1
    context = tf.distribute.get_replica_context()
    return context, tf.distribute.get_strategy().num_replicas_in_sync


def global_average_weights(y, y_pred, sample_weight):
    """Sample weights that make each replica's loss a share of the global mean.

    Keras divides a replica's loss by its unmasked outputs (e.g. real target
    tokens), else by its samples. The weights are scaled by
    `replicas * local count / global count`, so the replicas' summed
    gradients are those of the mean over every output of the global batch.

    Args:
        y: the labels (a tensor or a structure; the first leaf counts the
            samples).
        y_pred: the predictions; their Keras mask, if any, counts outputs.
        sample_weight: the weights Keras would use, or `None`.

    Returns:
        `sample_weight` unchanged off a replica context or with one
        replica, else float32 weights scaled as described.

    Example:
    >>> import numpy as np
    >>> global_average_weights(np.zeros((2, 3)), None, None) is None  # One device.
    True
    """
    context, replicas = _replicas()
    if replicas == 1 or context is None or y is None:
        return sample_weight
    labels = tf.nest.flatten(y)[0]
    mask = getattr(y_pred, "_keras_mask", None)
    if mask is not None:
        count = tf.reduce_sum(tf.cast(mask, "float32"))
    else:
        count = tf.cast(tf.shape(labels)[0], "float32")
    total = context.all_reduce(tf.distribute.ReduceOp.SUM, count)
    scale = tf.math.divide_no_nan(replicas * count, total)
    if sample_weight is None:
        sample_weight = tf.ones(tf.shape(labels)[:1])
    return tf.nest.map_structure(lambda w: tf.cast(w, "float32") * scale, sample_weight)


def batch_samples(x, y):
    """The number of samples of a batch (the rows of its first input).

    Example:
    >>> import numpy as np
    >>> int(batch_samples({"ids": np.zeros((4, 7))}, None))
    4
    """
    first = next((t for t in keras.tree.flatten((x, y)) if t is not None), None)
    if first is None:
        return 0
    return tf.shape(first)[0] if backends.on_tensorflow() else keras.ops.shape(first)[0]


def logged_as_share(value, samples, total=None):
    """A replica's loss share, with the value Keras's loss tracker needs.

    Under `tf.distribute`, `value` is this replica's share of a loss that is
    a mean over the global batch (the shares add up to it, and so do their
    gradients). Keras logs `sum_r replicas * value_r * b_r / B`, each
    replica's loss weighted by its own sample count `b_r` (`B` the global
    count), which is that mean only when every `b_r` is `B / replicas`.
    This returns `value * B / (replicas * b_r)` with the gradient of
    `value` (a `stop_gradient` correction), so the logged loss is the
    global mean for any split. Off a replica context, or with one replica,
    `value` is returned unchanged.

    Args:
        value: scalar float tensor, this replica's share.
        samples: int scalar, this replica's number of samples `b_r`.
        total: optional float32 scalar, `B` when the caller has already
            all-reduced it.

    Returns:
        A scalar tensor with the value described and the gradient of `value`.

    Example:
    >>> float(logged_as_share(tf.constant(0.5), 8))  # One device: unchanged.
    0.5
    """
    context, replicas = _replicas()
    if replicas == 1 or context is None:
        return value
    local = tf.cast(samples, value.dtype)
    if total is None:
        total = context.all_reduce(tf.distribute.ReduceOp.SUM, local)
    factor = tf.math.divide_no_nan(tf.cast(total, value.dtype), replicas * local)
    return value + tf.stop_gradient(value * (factor - 1.0))


def global_batch_mean(values):
    """This replica's share of the mean of per-sample `values` over the global batch.

    Returns `sum(values) / N` (float32), `N` the number of samples of the
    global batch (all-reduced across replicas). For loss terms a model adds
    to its compiled loss (e.g. REINFORCE). `tf.distribute` sums the replicas'
    gradients, so they add up to the gradient of the global-batch mean, as
    for Keras's compiled losses, even when the replicas hold different
    numbers of samples (e.g. the last, partial batch). On one device this is
    the plain mean. Its value, not its gradient, is adjusted for Keras's
    loss log (`logged_as_share`).

    Args:
        values: float tensor `(batch,)`, one loss term per sample.

    Returns:
        A float32 scalar tensor.

    Example:
    >>> float(global_batch_mean(tf.constant([1.0, 2.0, 6.0])))
    3.0
    """
    if not backends.on_tensorflow():
        return keras.ops.mean(keras.ops.cast(values, "float32"))
    samples = tf.shape(values)[0]
    count = tf.cast(samples, "float32")
    context, replicas = _replicas()
    if replicas > 1 and context is not None:
        count = context.all_reduce(tf.distribute.ReduceOp.SUM, count)
    share = tf.reduce_sum(tf.cast(values, "float32")) / count
    return logged_as_share(share, samples, total=count)


def per_worker_logs(logs):
    """Gives a step's logs the leading axis Keras reduces across workers.

    Under MultiWorkerMirroredStrategy, Keras 3 averages the logs of a step
    with `strategy.reduce("MEAN", value, axis=0)`, which fails on scalars
    (tensorflow/tensorflow#72388); a length-1 axis reduces back to them.
    Elsewhere the logs are returned as they are.

    Example:
    >>> per_worker_logs({"loss": 1.0})  # Not multi-worker: unchanged.
    {'loss': 1.0}
    """
    strategy = tf.distribute.get_strategy()
    if (
        isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)
        and strategy.extended._in_multi_worker_mode()
    ):
        return tf.nest.map_structure(lambda v: tf.expand_dims(v, 0), logs)
    return logs


def local_batch(strategy, batch):
    """This worker's first replica's part of a distributed batch.

    Keras 3 averages the first distributed batch over all replicas to build
    the model, which MultiWorkerMirroredStrategy cannot do for a dict of
    inputs (keras-team/keras#20329), nor for batches trimmed to different
    lengths; only shapes matter, and this part has them.

    Example:
    >>> local_batch(tf.distribute.get_strategy(), {"ids": 1})
    {'ids': 1}
    """
    return tf.nest.map_structure(
        lambda v: (
            strategy.experimental_local_results(v)[0]
            if isinstance(v, tf.distribute.DistributedValues)
            else v
        ),
        batch,
    )
