"""`InverseSqrtSchedule` against equation (3) of Vaswani et al."""

import keras
import numpy as np
import pytest

from keras_attention.training.schedules import InverseSqrtSchedule


def paper(step, d_model, warmup):
    """Equation (3) with the 1-based step number."""
    return d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


@pytest.mark.parametrize("d_model, warmup", [(512, 4000), (256, 100)])
def test_matches_the_formula(d_model, warmup):
    schedule = InverseSqrtSchedule(d_model, warmup_steps=warmup)
    for iterations in [0, 1, 10, warmup - 2, warmup - 1, warmup, 3 * warmup, 10**6]:
        np.testing.assert_allclose(
            float(schedule(iterations)),
            paper(iterations + 1, d_model, warmup),
            rtol=1e-6,
        )


def test_rises_linearly_then_decays_with_the_peak_at_warmup():
    schedule = InverseSqrtSchedule(512, warmup_steps=50, scale=2.0)
    rates = np.array([float(schedule(i)) for i in range(200)])
    peak = int(np.argmax(rates))
    assert peak == 49  # iteration 49 is step 50 = warmup_steps
    np.testing.assert_allclose(rates[peak], 2.0 / np.sqrt(512 * 50), rtol=1e-6)
    np.testing.assert_allclose(np.diff(rates[:peak]), rates[0], rtol=1e-4)
    assert np.all(np.diff(rates[peak:]) < 0)
    assert rates[0] > 0  # the first update is not wasted


def test_serialization_and_use_in_an_optimizer():
    schedule = InverseSqrtSchedule(64, warmup_steps=10, scale=0.5)
    restored = keras.saving.deserialize_keras_object(
        keras.saving.serialize_keras_object(schedule)
    )
    assert isinstance(restored, InverseSqrtSchedule)
    assert restored.get_config() == schedule.get_config()
    optimizer = keras.optimizers.Adam(schedule)
    variable = keras.Variable(np.ones(3, "float32"))
    optimizer.apply_gradients([(keras.ops.ones(3, "float32"), variable)])
    np.testing.assert_allclose(
        float(optimizer.learning_rate), 0.5 * paper(2, 64, 10), rtol=1e-6
    )


def test_bad_arguments():
    with pytest.raises(ValueError, match="warmup_steps"):
        InverseSqrtSchedule(512, warmup_steps=0)
