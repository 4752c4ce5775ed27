"""Show-Attend-Tell's extra training terms: doubly stochastic and REINFORCE.

`ShowAttendTell.compute_loss` adds them to the compiled caption loss as a
global-batch mean (`zoo.base.task.global_batch_mean`), so a mirrored step
has the gradients of one device (`add_loss` terms were counted once per
replica in every replica's loss).
"""

import keras
from keras import ops


def doubly_stochastic_terms(coverage):
    """`sum_i (1 - sum_t alpha_{t,i})^2` per caption, `(B,)` float32.

    Args:
        coverage: tensor `(B, L)`: `sum_t alpha_{t,i}` over the real steps.

    Example:
    >>> import numpy as np
    >>> np.asarray(doubly_stochastic_terms(np.array([[1.0, 0.5]])))
    array([0.25], dtype=float32)

    Reference:
        Xu et al., 2015, "Show, Attend and Tell", section 4.2.1, eq. 14.
    """
    coverage = ops.cast(coverage, "float32")
    return ops.sum(ops.square(1.0 - coverage), axis=-1)


def doubly_stochastic_penalty(coverage, strength=1.0):
    """`strength * sum_i (1 - sum_t alpha_{t,i})^2`, averaged over the batch.

    With fewer words than grid locations the coverage sums to the number of
    words, so the term also pulls the attention towards spreading out: keep
    `strength` small when the attention should stay on the objects.

    Args:
        coverage: tensor `(B, L)`: `sum_t alpha_{t,i}` over the real steps.
        strength: float. The paper's `lambda`. Defaults to `1.0`.

    Returns:
        A float32 scalar.

    Example:
    >>> import numpy as np
    >>> float(doubly_stochastic_penalty(np.array([[1.0, 0.5]])))
    0.25
    """
    return strength * ops.mean(doubly_stochastic_terms(coverage))


def caption_labels(decoder_token_ids, end_token_id, pad_token_id=0):
    """The labels of a teacher-forced caption, from its decoder input.

    `decoder_token_ids` is `[START] w_1 ... w_n [PAD]...`; the labels are
    `w_1 ... w_n [END] [PAD]...`.

    Returns:
        `(labels, weights)`: int `(B, T)` and float32 `(B, T)` (1 on real
        steps).
    """
    ids = ops.convert_to_tensor(decoder_token_ids)
    valid = ops.not_equal(ids, pad_token_id)
    following = ops.concatenate(
        [ids[:, 1:], ops.full_like(ids[:, :1], pad_token_id)], axis=1
    )
    labels = ops.where(
        ops.logical_and(valid, ops.equal(following, pad_token_id)),
        ops.cast(end_token_id, ids.dtype),
        following,
    )
    return labels, ops.cast(valid, "float32")


def caption_log_likelihood(logits, decoder_token_ids, end_token_id, pad_token_id=0):
    """`log p(y | s, a)` per caption, `(B,)`: the REINFORCE reward."""
    labels, weights = caption_labels(decoder_token_ids, end_token_id, pad_token_id)
    log_probs = ops.log_softmax(ops.cast(logits, "float32"), axis=-1)
    picked = ops.take_along_axis(
        log_probs, ops.expand_dims(ops.cast(labels, "int32"), -1), axis=-1
    )[..., 0]
    return ops.sum(picked * weights, axis=-1)


@keras.saving.register_keras_serializable(package="zoo")
class ReinforceBaseline(keras.layers.Layer):
    """REINFORCE terms for stochastic hard attention, with a moving baseline.

    The reward of the sampled locations `s` is the caption's log-likelihood
    `R = log p(y | s, a)`. `terms(reward, log_prob, entropy)` returns per
    caption

        -(weight * stop_gradient(R - b) * sum_t log p(s_t)
          + entropy_weight * sum_t H[alpha_t])

    as `x - stop_gradient(x)`: the value 0 (the logged loss stays the
    caption loss) with that gradient, the paper's eq. 12 (the compiled
    cross-entropy gives its first term). The baseline `b` is a moving
    average of the rewards, `b <- decay * b + (1 - decay) * mean(R)` (the
    first batch sets it), updated each time `terms` runs.

    Args:
        weight: float. The paper's `lambda_r`. Defaults to `1.0`.
        entropy_weight: float. The paper's `lambda_e`. Defaults to `0.01`.
        decay: float in `[0, 1)`. Baseline decay. Defaults to `0.9`.
        **kwargs: base layer arguments.

    Example:
    >>> import numpy as np
    >>> baseline = ReinforceBaseline(decay=0.9)
    >>> baseline.build()
    >>> log_prob, entropy = np.array([-1.0, -2.0]), np.array([0.5, 0.5])
    >>> terms = baseline.terms(np.array([-2.0, -4.0]), log_prob, entropy)
    >>> bool(np.all(ops.convert_to_numpy(terms) == 0))  # the value 0: a gradient
    True
    >>> round(float(baseline.baseline), 4)  # the first batch's mean reward
    -3.0
    >>> _ = baseline.terms(np.array([-1.0, -1.0]), log_prob, entropy)
    >>> round(float(baseline.baseline), 4)  # 0.9 * -3 + 0.1 * -1
    -2.8

    Reference:
        Xu et al., 2015, "Show, Attend and Tell", section 4.1 (eqs. 10-12);
        Williams, 1992, "Simple Statistical Gradient-Following Algorithms".
    """

    def __init__(self, weight=1.0, entropy_weight=0.01, decay=0.9, **kwargs):
        super().__init__(**kwargs)
        if not 0 <= decay < 1:
            raise ValueError(f"`decay` must be in [0, 1). Received: decay={decay!r}")
        self.weight = float(weight)
        self.entropy_weight = float(entropy_weight)
        self.decay = float(decay)

    def build(self, *args):
        self.baseline = self.add_weight(
            name="baseline",
            shape=(),
            initializer="zeros",
            trainable=False,
            aggregation="mean",
            autocast=False,
        )
        self.initialized = self.add_weight(
            name="initialized",
            shape=(),
            initializer="zeros",
            trainable=False,
            aggregation="mean",
            autocast=False,
        )

    def terms(self, reward, log_prob, entropy):
        """Per-caption surrogate terms `(B,)`; updates the baseline.

        Args:
            reward: float `(B,)`. Each caption's log-likelihood `R`.
            log_prob: float `(B,)`. `sum_t log p(s_t)` of the sampled
                locations.
            entropy: float `(B,)`. `sum_t H[alpha_t]`.

        Example (the gradient: `-weight * (R - b)` for `log_prob`):
        >>> import tensorflow as tf
        >>> baseline = ReinforceBaseline(entropy_weight=0.01)
        >>> baseline.build()
        >>> log_prob, entropy = tf.Variable([-1.0, -2.0]), tf.Variable([0.5, 0.5])
        >>> with tf.GradientTape() as tape:
        ...     loss = tf.reduce_sum(baseline.terms([-2.0, -4.0], log_prob, entropy))
        >>> by_log_prob, by_entropy = tape.gradient(loss, [log_prob, entropy])
        >>> by_log_prob.numpy().tolist()  # the baseline b is -3 (the mean reward)
        [-1.0, 1.0]
        >>> [round(float(g), 6) for g in by_entropy]  # -entropy_weight
        [-0.01, -0.01]
        """
        reward = ops.stop_gradient(ops.cast(reward, "float32"))
        mean_reward = ops.mean(reward)
        baseline = ops.where(self.initialized > 0, self.baseline, mean_reward)
        advantage = reward - baseline
        log_prob = ops.reshape(ops.cast(log_prob, "float32"), (-1,))
        entropy = ops.reshape(ops.cast(entropy, "float32"), (-1,))
        surrogate = self.weight * advantage * log_prob + self.entropy_weight * entropy
        self.baseline.assign(self.decay * baseline + (1 - self.decay) * mean_reward)
        self.initialized.assign(1.0)
        return -(surrogate - ops.stop_gradient(surrogate))

    def get_config(self):
        config = super().get_config()
        config.update(
            weight=self.weight, entropy_weight=self.entropy_weight, decay=self.decay
        )
        return config
