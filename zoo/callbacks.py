"""Training callbacks shared by the zoo's training scripts.

Both budgets keep their count in `get_state()` / `set_state()`, which
`zoo.run_directory` saves after every epoch: a resumed run counts the time and
steps of the epochs done before it was killed.
"""

import time

import keras


class TimeBudget(keras.callbacks.Callback):
    """Stops training once `minutes` of training have passed (checked every batch).

    Args:
        minutes: float. The budget, counted from the start of `fit` (plus
            the time restored with `set_state`).

    Example:
    >>> import numpy as np
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile("sgd", "mse")
    >>> history = model.fit(np.ones((8, 2)), np.ones((8, 1)), batch_size=2,
    ...     epochs=5, callbacks=[TimeBudget(1e-9)], verbose=0)
    >>> len(history.history["loss"])  # Stopped after the first batch.
    1
    """

    def __init__(self, minutes):
        super().__init__()
        self.seconds = minutes * 60
        self.spent = 0.0  # Training seconds before this `fit` (a resumed run).
        self.start = time.time()

    def elapsed(self):
        """Seconds of training so far, those of a resumed run's past included.

        Example:
        >>> budget = TimeBudget(minutes=10)
        >>> budget.set_state({"seconds": 120.0})  # 2 minutes before a kill
        >>> 120.0 <= budget.elapsed() < 130.0
        True
        """
        return self.spent + time.time() - self.start

    def on_train_begin(self, logs=None):
        self.start = time.time()

    def on_train_batch_end(self, batch, logs=None):
        if self.elapsed() > self.seconds:
            self.model.stop_training = True

    def get_state(self):
        return {"seconds": self.elapsed()}

    def set_state(self, state):
        self.spent = state["seconds"]
        self.start = time.time()


class StepBudget(keras.callbacks.Callback):
    """Stops training after `steps` batches in all (across epochs).

    Args:
        steps: int. The budget of optimizer steps (plus the steps restored
            with `set_state`).

    Example:
    >>> import numpy as np
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile("sgd", "mse")
    >>> history = model.fit(np.ones((8, 2)), np.ones((8, 1)), batch_size=2,
    ...     epochs=5, callbacks=[StepBudget(6)], verbose=0)
    >>> len(history.history["loss"]), int(model.optimizer.iterations)
    (2, 6)
    """

    def __init__(self, steps):
        super().__init__()
        self.steps = steps
        self.seen = 0

    def on_train_batch_end(self, batch, logs=None):
        self.seen += 1
        if self.seen >= self.steps:
            self.model.stop_training = True

    def get_state(self):
        return {"seen": self.seen}

    def set_state(self, state):
        self.seen = state["seen"]
