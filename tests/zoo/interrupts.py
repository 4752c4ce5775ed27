"""A kill in the middle of `fit`, for the resumption tests.

`StopAt(epoch)` raises `Interrupt` at the start of that epoch, after the
run directory saved the state of the epochs before it.
"""

import keras


class Interrupt(Exception):
    """Raised by `StopAt`: stands for a kill of the training process."""


class StopAt(keras.callbacks.Callback):
    """Raises `Interrupt` at the start of epoch `epoch` (counted from 0)."""

    def __init__(self, epoch):
        super().__init__()
        self.epoch = epoch

    def on_epoch_begin(self, epoch, logs=None):
        if epoch == self.epoch:
            raise Interrupt()
