"""Training callbacks shared by the zoo's training scripts."""

import time

import keras


class TimeBudget(keras.callbacks.Callback):
    """Stops training once `minutes` have passed (checked every batch)."""

    def __init__(self, minutes):
        super().__init__()
        self.seconds = minutes * 60
        self.start = time.time()

    def on_train_batch_end(self, batch, logs=None):
        if time.time() - self.start > self.seconds:
            self.model.stop_training = True


class StepBudget(keras.callbacks.Callback):
    """Stops training after `steps` batches in all (across epochs)."""

    def __init__(self, steps):
        super().__init__()
        self.steps = steps
        self.seen = 0

    def on_train_batch_end(self, batch, logs=None):
        self.seen += 1
        if self.seen >= self.steps:
            self.model.stop_training = True
