"""Learning-rate schedules (backend-agnostic `keras.ops`)."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_attention")
class InverseSqrtSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warmup, then decay with the inverse square root of the step.

    The schedule of Vaswani et al. (2017), equation (3):

        lr(step) = scale * hidden_dim ** -0.5
                   * min(step ** -0.5, step * warmup_steps ** -1.5)

    with `step = iterations + 1`, so the first update (Keras optimizers call
    the schedule with their iteration count, starting at 0) is not zero. The
    peak, `scale / sqrt(hidden_dim * warmup_steps)`, is reached at
    `step = warmup_steps`.

    Args:
        hidden_dim: int. The model size `d_model`.
        warmup_steps: int. Defaults to `4000`.
        scale: float. Multiplies the whole schedule. Defaults to `1.0`.

    Call arguments:
        step: int or scalar tensor. The optimizer's iteration count.

    Returns:
        The float32 learning rate.

    Example:
    >>> schedule = InverseSqrtSchedule(512, warmup_steps=4000)
    >>> round(float(schedule(3999)), 6)  # the peak
    0.000699

    Reference:
        Vaswani et al., 2017, "Attention Is All You Need", section 5.3.
    """

    def __init__(self, hidden_dim, warmup_steps=4000, scale=1.0):
        super().__init__()
        if hidden_dim < 1 or warmup_steps < 1:
            raise ValueError(
                "`hidden_dim` and `warmup_steps` must be positive. Received: "
                f"hidden_dim={hidden_dim}, warmup_steps={warmup_steps}"
            )
        self.hidden_dim = hidden_dim
        self.warmup_steps = warmup_steps
        self.scale = scale

    def __call__(self, step):
        step = ops.cast(step, "float32") + 1.0
        warmup = ops.cast(self.warmup_steps, "float32")
        rate = ops.minimum(ops.rsqrt(step), step * ops.power(warmup, -1.5))
        return ops.cast(self.scale * self.hidden_dim**-0.5, "float32") * rate

    def get_config(self):
        return {
            "hidden_dim": self.hidden_dim,
            "warmup_steps": self.warmup_steps,
            "scale": self.scale,
        }
