"""Training callbacks shared by the zoo's training scripts.

Both budgets keep their count in `get_state()` / `set_state()`, which
`zoo.training.run_directory` saves after every epoch: a resumed run counts the time and
steps of the epochs done before it was killed. `AnnealLearningRate` reads the
budgets' `progress()` to lower the learning rate for the last part of them.
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

    #: What the harness says stopped a run (`stopped` is `True`).
    reason = "the time budget (--max-minutes)"

    def __init__(self, minutes):
        super().__init__()
        self.seconds = minutes * 60
        self.spent = 0.0  # Training seconds before this `fit` (a resumed run).
        self.start = time.time()
        self.stopped = False  # Whether this budget ended the last `fit`.

    def elapsed(self):
        """Seconds of training so far, those of a resumed run's past included.

        Example:
        >>> budget = TimeBudget(minutes=10)
        >>> budget.set_state({"seconds": 120.0})  # 2 minutes before a kill
        >>> 120.0 <= budget.elapsed() < 130.0
        True
        """
        return self.spent + time.time() - self.start

    def progress(self):
        """The part of the budget used so far (1.0 or more: spent).

        Example:
        >>> budget = TimeBudget(minutes=10)
        >>> budget.set_state({"seconds": 450.0})  # 7.5 minutes before a kill
        >>> 0.75 <= budget.progress() < 0.8
        True
        """
        return self.elapsed() / self.seconds

    def on_train_begin(self, logs=None):
        self.start = time.time()
        self.stopped = False

    def on_train_batch_end(self, batch, logs=None):
        if self.elapsed() > self.seconds:
            self.model.stop_training = self.stopped = True

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

    #: What the harness says stopped a run (`stopped` is `True`).
    reason = "the step budget (--max-steps)"

    def __init__(self, steps):
        super().__init__()
        self.steps = steps
        self.seen = 0
        self.stopped = False  # Whether this budget ended the last `fit`.

    def on_train_begin(self, logs=None):
        self.stopped = False

    def on_train_batch_end(self, batch, logs=None):
        self.seen += 1
        if self.seen >= self.steps:
            self.model.stop_training = self.stopped = True

    def progress(self):
        """The part of the budget used so far (1.0: spent).

        Example:
        >>> budget = StepBudget(8)
        >>> budget.set_state({"seen": 2})
        >>> budget.progress()
        0.25
        """
        return self.seen / self.steps

    def get_state(self):
        return {"seen": self.seen}

    def set_state(self, state):
        self.seen = state["seen"]


class AnnealLearningRate(keras.callbacks.Callback):
    """Multiplies the learning rate by `factor` for the last `fraction` of training.

    Training ends when the first of its budgets is spent: the epochs of
    `fit`, and the `TimeBudget` and `StepBudget` callbacks given. The
    learning rate is `learning_rate` until the most advanced of them has used
    `1 - fraction` of itself, then `learning_rate * factor` (checked before
    every batch). It is set from the budgets, not counted: a run resumed
    from the run directory (the budgets' state restored) gets the rate of
    the point it resumes at.

    Args:
        learning_rate: float. The optimizer's learning rate before annealing.
        fraction: float in (0, 1). The last part of the budget annealed.
        factor: float > 0. What the learning rate is multiplied by.
        budgets: the `TimeBudget` and `StepBudget` callbacks of the `fit`.
        verbose: bool. Print a line when the rate changes.

    Attributes:
        annealed_at_step: int or None. The optimizer step at which the lower
            rate began (kept in `get_state()` across a resumed run).

    Example (ten steps, the last 30% at a tenth of the rate):
    >>> import numpy as np
    >>> class Record(keras.callbacks.Callback):
    ...     rates = []
    ...     def on_train_batch_begin(self, batch, logs=None):
    ...         self.rates.append(float(self.model.optimizer.learning_rate))
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile(keras.optimizers.SGD(0.5), "mse")
    >>> budget = StepBudget(10)
    >>> anneal = AnnealLearningRate(0.5, fraction=0.3, budgets=[budget])
    >>> history = model.fit(np.ones((8, 2)), np.ones((8, 1)), batch_size=2,
    ...     epochs=5, callbacks=[anneal, Record(), budget], verbose=0)
    >>> [round(rate, 3) for rate in Record.rates]
    [0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.05, 0.05, 0.05]
    >>> anneal.annealed_at_step
    7
    """

    def __init__(self, learning_rate, fraction, factor=0.1, budgets=(), verbose=False):
        super().__init__()
        if not 0.0 < fraction < 1.0:
            raise ValueError(
                "`fraction` must be a number between 0 and 1 (both excluded). "
                f"Received: fraction={fraction!r}"
            )
        if not factor > 0.0:
            raise ValueError(
                f"`factor` must be a number > 0. Received: factor={factor!r}"
            )
        self.learning_rate = float(learning_rate)
        self.fraction = float(fraction)
        self.factor = float(factor)
        self.budgets = list(budgets)
        self.epoch = 0
        self.epochs = None
        self.rate = None  # The rate this callback set last.
        self.verbose = verbose
        self.annealed_at_step = None

    def on_train_begin(self, logs=None):
        self.epochs = self.params.get("epochs") if self.params else None
        self.rate = None

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch  # Counted from 0 across a resumed run.

    def progress(self):
        """The part of the training budget used: the most advanced budget's.

        Example:
        >>> steps, minutes = StepBudget(100), TimeBudget(60)
        >>> steps.set_state({"seen": 50})
        >>> minutes.set_state({"seconds": 600.0})  # 10 of 60 minutes
        >>> AnnealLearningRate(1e-3, 0.2, budgets=[steps, minutes]).progress()
        0.5
        """
        parts = [budget.progress() for budget in self.budgets]
        if self.epochs:
            parts.append(self.epoch / self.epochs)
        return max(parts, default=0.0)

    def on_train_batch_begin(self, batch, logs=None):
        progress = self.progress()
        annealed = progress >= 1.0 - self.fraction
        rate = self.learning_rate * (self.factor if annealed else 1.0)
        if rate == self.rate:
            return
        self.model.optimizer.learning_rate = rate
        self.rate = rate
        if annealed and self.annealed_at_step is None:
            self.annealed_at_step = int(self.model.optimizer.iterations)
        if self.verbose:
            print(
                f"\nlearning rate {rate:.3g} from step "
                f"{int(self.model.optimizer.iterations)} "
                f"({progress:.0%} of the budget used)"
            )

    def get_state(self):
        return {"annealed_at_step": self.annealed_at_step}

    def set_state(self, state):
        self.annealed_at_step = state["annealed_at_step"]
