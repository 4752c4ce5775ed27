"""`zoo.training.callbacks.AnnealLearningRate`: the learning rate of every step.

The rate is lowered for the last part of whichever budget ends training
first (the epochs of `fit`, a `TimeBudget`, a `StepBudget`), and a run
resumed from its run directory continues at the rate of the point it
resumes at, to the state of an unbroken run.
"""

import os
import sys

import keras
import numpy as np
import pytest

from zoo.training import run_directory
from zoo.training.callbacks import AnnealLearningRate, StepBudget, TimeBudget

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from interrupts import Interrupt, StopAt  # noqa: E402 (tests/zoo/training/interrupts.py)

RATE = 0.1


class Rates(keras.callbacks.Callback):
    """Records the optimizer's learning rate before every batch."""

    def __init__(self):
        super().__init__()
        self.rates = []

    def on_train_batch_begin(self, batch, logs=None):
        self.rates.append(round(float(self.model.optimizer.learning_rate), 6))


def tiny_model():
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(keras.optimizers.Adam(RATE), "mse")
    return model


def fit_rates(callbacks, epochs=5):
    """The rates of a `fit` of 2 batches an epoch, and the model."""
    model, rates = tiny_model(), Rates()
    x = np.arange(16, dtype="float32").reshape(8, 2)
    model.fit(
        x, x[:, :1], batch_size=4, epochs=epochs, callbacks=[*callbacks, rates],
        verbose=0,
    )  # fmt: skip
    return rates.rates, model


def test_the_last_part_of_the_epochs_runs_at_the_lower_rate():
    anneal = AnnealLearningRate(RATE, fraction=0.4)
    rates, model = fit_rates([anneal])
    assert rates == [RATE] * 6 + [RATE / 10] * 4  # Epochs 4 and 5 of 5.
    assert anneal.annealed_at_step == 6
    assert float(model.optimizer.learning_rate) == pytest.approx(RATE / 10)


def test_the_most_advanced_budget_decides():
    # 10 steps of a 5-epoch fit: the step budget (8) ends first.
    steps = StepBudget(8)
    anneal = AnnealLearningRate(RATE, fraction=0.5, factor=0.5, budgets=[steps])
    rates, _ = fit_rates([anneal, steps])
    assert rates == [RATE] * 4 + [RATE / 2] * 4
    # A time budget 80% spent (a resumed run) anneals the last 25% at once,
    # and one barely started does not.
    spent = TimeBudget(minutes=10.0)
    spent.set_state({"seconds": 480.0})
    assert fit_rates([AnnealLearningRate(RATE, 0.25, budgets=[spent])])[0] == (
        [RATE / 10] * 10
    )
    fresh = TimeBudget(minutes=10.0)
    assert fit_rates([AnnealLearningRate(RATE, 0.25, budgets=[fresh])], 2)[0] == (
        [RATE] * 4
    )


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"fraction": 0.0}, "fraction"),
        ({"fraction": 1.0}, "fraction"),
        ({"fraction": 0.5, "factor": 0.0}, "factor"),
    ],
)
def test_bad_arguments_are_named(kwargs, name):
    with pytest.raises(ValueError, match=rf"`{name}`.*Received: {name}="):
        AnnealLearningRate(RATE, **kwargs)


def staged_fit(stage, interrupt_at=None):
    import tensorflow as tf

    model, rates = tiny_model(), Rates()
    anneal = AnnealLearningRate(RATE, fraction=0.4, budgets=[StepBudget(100)])
    x = np.arange(16, dtype="float32").reshape(8, 2)
    data = tf.data.Dataset.from_tensor_slices((x, x[:, :1])).batch(4)
    callbacks = [anneal, rates, anneal.budgets[0]]
    if interrupt_at is not None:
        callbacks.append(StopAt(interrupt_at))
    stage.fit(model, data, epochs=5, callbacks=callbacks, shuffle=False, verbose=0)
    return model, rates.rates, anneal


@pytest.mark.tensorflow_only
def test_a_resumed_run_continues_at_the_rate_of_its_point(tmp_path):
    want, want_rates, _ = staged_fit(run_directory.Stage(None))
    path = str(tmp_path / "train")
    with pytest.raises(Interrupt):
        staged_fit(run_directory.Stage(path), interrupt_at=4)  # Annealed at 3.
    got, rates, anneal = staged_fit(run_directory.Stage(path))
    assert rates == want_rates[8:] == [RATE / 10] * 2  # The last epoch.
    assert anneal.annealed_at_step == 6  # Restored, not the resumed step (8).
    for a, b in zip(got.get_weights(), want.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)
