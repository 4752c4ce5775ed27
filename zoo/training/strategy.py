"""The `--strategy` of a training run, on the backend Keras runs.

One object answers what the harness and the training scripts ask of a
strategy, whatever the backend: `scope()` (build, compile and fit the model
inside it), `num_replicas_in_sync`, `name`, `needs_static_shapes` and
`check_batch_size`. Which one `strategy_for(name)` gives:

| `--strategy`    | TensorFlow                     | JAX                         | PyTorch     |
|-----------------|--------------------------------|-----------------------------|-------------|
| `auto`          | `get_strategy("auto")`         | `DataParallel` over every   | one device  |
|                 |                                | device when there are       |             |
|                 |                                | several, else one device    |             |
| `default`       | the default strategy           | one device                  | one device  |
| `data_parallel` | refused: use `mirrored`        | `DataParallel` (any count)  | refused     |
| `one_device`, `mirrored`, `multi_worker`, `tpu` | `get_strategy(name)` | refused | refused |

TensorFlow's strategies are `tf.distribute` objects
(`keras_attention.training.strategy.get_strategy`). JAX's is
`keras.distribution.DataParallel` over the devices
`keras.distribution.list_devices()` finds (the accelerators, else the CPU's
devices): the variables are replicated on every device and each batch is
split over them along its first axis, so a batch must hold a multiple of the
devices (fixed-size batches, `needs_static_shapes`). PyTorch trains on one
device here (Keras has no `keras.distribution` for it). A refused name stops
the script with one line naming the backend (exit status 2).
"""

import contextlib
import re

import keras

from zoo.base import backends
from zoo.training.flags import fail

TENSORFLOW_NAMES = ("auto", "default", "one_device", "mirrored", "multi_worker", "tpu")
KERAS_NAMES = ("auto", "default", "data_parallel")
NAMES = TENSORFLOW_NAMES + ("data_parallel",)


class SingleDevice:
    """No distribution: Keras's default device (PyTorch; JAX on one device).

    Example:
    >>> strategy = SingleDevice()
    >>> strategy.name, strategy.num_replicas_in_sync, strategy.needs_static_shapes
    ('SingleDevice', 1, False)
    >>> with strategy.scope():
    ...     model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    """

    name = "SingleDevice"
    num_replicas_in_sync = 1
    needs_static_shapes = False

    def scope(self):
        """A context that changes nothing.

        Example:
        >>> with SingleDevice().scope():
        ...     print(keras.distribution.distribution())
        None
        """
        return contextlib.nullcontext()

    def check_batch_size(self, batch_size, option="--batch-size"):
        """Any batch size fits one device.

        Example:
        >>> SingleDevice().check_batch_size(3)  # no error
        """


class DataParallel(SingleDevice):
    """`keras.distribution.DataParallel` over `devices` (JAX).

    Within `scope()` the distribution is Keras's current one
    (`keras.distribution.distribution()`): variables created there are
    replicated on every device, and `fit` splits each batch over them.

    Args:
        devices: list of str (e.g. `["gpu:0", "gpu:1"]`), or `None` for
            every device `keras.distribution.list_devices()` finds.

    Example (the devices are named, not touched, until a model is built):
    >>> strategy = DataParallel(devices=["gpu:0", "gpu:1"])
    >>> strategy.name, strategy.num_replicas_in_sync, strategy.needs_static_shapes
    ('DataParallel', 2, True)
    >>> type(strategy.distribution).__name__
    'DataParallel'
    """

    name = "DataParallel"

    def __init__(self, devices=None):
        devices = list(devices or keras.distribution.list_devices())
        self.distribution = keras.distribution.DataParallel(devices=devices)
        self.devices = devices

    @property
    def num_replicas_in_sync(self):
        """The devices each batch is split over.

        Example:
        >>> DataParallel(devices=["cpu:0"]).num_replicas_in_sync
        1
        """
        return len(self.devices)

    @property
    def needs_static_shapes(self):
        """Batches are split evenly over several devices: fixed-size ones.

        Example:
        >>> DataParallel(devices=["cpu:0"]).needs_static_shapes  # one device
        False
        """
        return self.num_replicas_in_sync > 1

    def scope(self):
        """Makes the distribution Keras's current one (`keras.distribution.distribution()`).

        Example:
        >>> strategy = DataParallel(devices=["cpu:0"])
        >>> with strategy.scope():
        ...     keras.distribution.distribution() is strategy.distribution
        True
        >>> print(keras.distribution.distribution())
        None
        """
        return self.distribution.scope()

    def check_batch_size(self, batch_size, option="--batch-size"):
        """Refuses a batch that does not split evenly over the devices.

        Raises:
            ValueError: naming `option` and the value.

        Example:
        >>> strategy = DataParallel(devices=["gpu:0", "gpu:1"])
        >>> strategy.check_batch_size(4)  # 2 rows a device
        >>> strategy.check_batch_size(3)
        Traceback (most recent call last):
        ...
        ValueError: --batch-size 3 must be a multiple of the 2 devices of the DataParallel strategy (each batch is split evenly over them). Received: batch_size=3
        """
        if batch_size and batch_size % self.num_replicas_in_sync:
            raise ValueError(
                f"{option} {batch_size} must be a multiple of the "
                f"{self.num_replicas_in_sync} devices of the DataParallel "
                "strategy (each batch is split evenly over them). "
                f"Received: {_argument_names(option)}={batch_size}"
            )


class TensorFlowStrategy(SingleDevice):
    """A `tf.distribute` strategy, asked as the other backends' strategies are.

    Args:
        strategy: a `tf.distribute.Strategy` (its `strategy` attribute).

    Example:
    >>> import tensorflow as tf
    >>> strategy = TensorFlowStrategy(tf.distribute.get_strategy())
    >>> strategy.name, strategy.num_replicas_in_sync, strategy.needs_static_shapes
    ('_DefaultDistributionStrategy', 1, False)
    >>> with strategy.scope():
    ...     model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    """

    def __init__(self, strategy):
        self.strategy = strategy

    @property
    def name(self):
        """The strategy's class name, e.g. `"MirroredStrategy"`.

        Example:
        >>> import tensorflow as tf
        >>> TensorFlowStrategy(tf.distribute.OneDeviceStrategy("/cpu:0")).name
        'OneDeviceStrategy'
        """
        return type(self.strategy).__name__

    @property
    def num_replicas_in_sync(self):
        """The strategy's replicas.

        Example:
        >>> import tensorflow as tf
        >>> TensorFlowStrategy(tf.distribute.get_strategy()).num_replicas_in_sync
        1
        """
        return self.strategy.num_replicas_in_sync

    @property
    def needs_static_shapes(self):
        """Whether the strategy runs on TPUs, which want one batch shape.

        Example:
        >>> import tensorflow as tf
        >>> TensorFlowStrategy(tf.distribute.get_strategy()).needs_static_shapes
        False
        """
        from keras_attention.training.strategy import needs_static_shapes

        return needs_static_shapes(self.strategy)

    def scope(self):
        """The strategy's `scope()`.

        Example:
        >>> import tensorflow as tf
        >>> strategy = TensorFlowStrategy(tf.distribute.get_strategy())
        >>> with strategy.scope():
        ...     tf.distribute.get_strategy() is strategy.strategy
        True
        """
        return self.strategy.scope()


def strategy_for(name):
    """The strategy of `--strategy name` on the backend Keras runs.

    See the table of this module. A name the backend cannot honour (a
    `tf.distribute` strategy off TensorFlow, `data_parallel` off JAX, an
    unknown name) stops the script with one `error:` line (exit 2).

    Args:
        name: str. One of `NAMES`.

    Returns:
        `TensorFlowStrategy`, `DataParallel` or `SingleDevice`.

    Example:
    >>> strategy = strategy_for("default")
    >>> strategy.num_replicas_in_sync
    1
    >>> with strategy.scope():
    ...     model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    """
    if name not in NAMES:
        fail(
            f"--strategy {name} is not a strategy. Valid names are: {', '.join(NAMES)}"
        )
    backend = keras.backend.backend()
    if backends.on_tensorflow():
        if name == "data_parallel":
            fail(
                "--strategy data_parallel is keras.distribution.DataParallel, for "
                "KERAS_BACKEND=jax; this process runs 'tensorflow', where "
                "--strategy mirrored (or auto) splits batches over the devices"
            )
        from keras_attention.training.strategy import get_strategy

        return TensorFlowStrategy(get_strategy(name))
    if name not in KERAS_NAMES:
        try:
            backends.require_tensorflow(f"--strategy {name}")
        except backends.BackendError as e:
            fail(str(e))
    if backend != "jax":
        if name == "data_parallel":
            fail(
                "--strategy data_parallel needs KERAS_BACKEND=jax "
                f"(keras.distribution); this process runs {backend!r}, "
                "which trains on one device"
            )
        return SingleDevice()
    if name == "data_parallel" or (
        name == "auto" and len(keras.distribution.list_devices()) > 1
    ):
        return DataParallel()
    return SingleDevice()


def _argument_names(option):
    """`option`'s flags as argument names: `"--batch-tokens // --max-length"`
    reads `"batch_tokens // max_length"`."""
    return re.sub(r"--([\w-]+)", lambda m: m.group(1).replace("-", "_"), option)
