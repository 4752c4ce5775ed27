"""Show-Attend-Tell's extra training terms, as pass-through loss layers.

Each layer returns the logits unchanged and adds its term with `add_loss`,
so it sits on the path to the model's output and `fit` adds the term to the
compiled caption loss.
"""

import keras
from keras import ops


def doubly_stochastic_penalty(coverage, strength=1.0):
    """`strength * sum_i (1 - sum_t alpha_{t,i})^2`, averaged over the batch.

    Args:
        coverage: tensor `(B, L)`: `sum_t alpha_{t,i}` over the real steps.
        strength: float. The paper's `lambda`. Defaults to `1.0`.

    Returns:
        A float32 scalar.

    Example:
    >>> float(doubly_stochastic_penalty(np.array([[1.0, 0.5]])))
    0.25

    Reference:
        Xu et al., 2015, "Show, Attend and Tell", section 4.2.1, eq. 14.
    """
    coverage = ops.cast(coverage, "float32")
    return strength * ops.mean(ops.sum(ops.square(1.0 - coverage), axis=-1))


@keras.saving.register_keras_serializable(package="zoo")
class DoublyStochasticRegularization(keras.layers.Layer):
    """Adds `lambda * sum_i (1 - sum_t alpha_{t,i})^2` to the training loss.

    Encourages the model to attend, over the whole caption, to every part
    of the image (doubly stochastic attention). With fewer words than grid
    locations the sum of the coverage is the number of words, so the term
    also pulls the attention towards spreading out: keep `strength` small
    when the attention should stay on the objects.

    Args:
        strength: float >= 0. The paper's `lambda`. Defaults to `1.0`.
        **kwargs: base layer arguments.

    Call arguments:
        logits: the model's logits, returned unchanged.
        coverage: tensor `(B, L)`.

    Returns:
        `logits`.

    Reference:
        Xu et al., 2015, "Show, Attend and Tell", section 4.2.1.
    """

    def __init__(self, strength=1.0, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(strength, (int, float)) or strength < 0:
            raise ValueError(
                f"`strength` must be a float >= 0. Received: strength={strength!r}"
            )
        self.strength = float(strength)
        self.supports_masking = True

    def call(self, logits, coverage):
        if self.strength > 0:
            self.add_loss(doubly_stochastic_penalty(coverage, self.strength))
        return logits

    def compute_mask(self, logits, previous_mask=None):
        return previous_mask

    def get_config(self):
        config = super().get_config()
        config.update(strength=self.strength)
        return config


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


@keras.saving.register_keras_serializable(package="zoo")
class ReinforceLoss(keras.layers.Layer):
    """REINFORCE for stochastic hard attention, with a baseline and entropy.

    The reward of the sampled attention locations `s` is the caption's
    log-likelihood `R = log p(y | s, a)`; the layer adds a surrogate loss
    with the gradient of

        -mean_batch(weight * stop_gradient(R - b) * sum_t log p(s_t)
                    + entropy_weight * sum_t H[alpha_t])

    and the value 0 (so the reported loss is the caption loss): the paper's
    eq. 12 (with the cross-entropy of the
    compiled loss giving its first term), where the baseline `b` is a moving
    average of the rewards, `b <- decay * b + (1 - decay) * mean(R)`,
    updated at every training step.

    Args:
        end_token_id: int. The `[END]` id (to rebuild the labels).
        pad_token_id: int. Defaults to `0`.
        weight: float. The paper's `lambda_r`. Defaults to `1.0`.
        entropy_weight: float. The paper's `lambda_e`. Defaults to `0.01`.
        decay: float in `[0, 1)`. Baseline decay. Defaults to `0.9`.
        **kwargs: base layer arguments.

    Call arguments:
        logits: `(B, T, vocabulary)`, returned unchanged.
        decoder_token_ids: `(B, T)`.
        log_prob: `(B, 1)`: `sum_t log p(s_t)`.
        entropy: `(B, 1)`: `sum_t H[alpha_t]`.
        training: bool. The loss and the baseline update apply only while
            training.

    Returns:
        `logits`.

    Reference:
        Xu et al., 2015, "Show, Attend and Tell", section 4.1 (eqs. 10-12);
        Williams, 1992, "Simple Statistical Gradient-Following Algorithms".
    """

    def __init__(
        self,
        end_token_id,
        pad_token_id=0,
        weight=1.0,
        entropy_weight=0.01,
        decay=0.9,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if not 0 <= decay < 1:
            raise ValueError(f"`decay` must be in [0, 1). Received: decay={decay!r}")
        self.end_token_id = end_token_id
        self.pad_token_id = pad_token_id
        self.weight = float(weight)
        self.entropy_weight = float(entropy_weight)
        self.decay = float(decay)
        self.supports_masking = True

    def build(self, *shapes):
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

    def reward(self, logits, decoder_token_ids):
        """`log p(y | s, a)` per caption, `(B,)`."""
        labels, weights = caption_labels(
            decoder_token_ids, self.end_token_id, self.pad_token_id
        )
        log_probs = ops.log_softmax(ops.cast(logits, "float32"), axis=-1)
        picked = ops.take_along_axis(
            log_probs, ops.expand_dims(ops.cast(labels, "int32"), -1), axis=-1
        )[..., 0]
        return ops.sum(picked * weights, axis=-1)

    def call(self, logits, decoder_token_ids, log_prob, entropy, training=None):
        if not training:
            return logits
        reward = ops.stop_gradient(self.reward(logits, decoder_token_ids))
        mean_reward = ops.mean(reward)
        # The first batch sets the baseline, so it does not start at 0.
        baseline = ops.where(self.initialized > 0, self.baseline, mean_reward)
        advantage = reward - baseline
        log_prob = ops.cast(log_prob[:, 0], "float32")
        entropy = ops.cast(entropy[:, 0], "float32")
        surrogate = self.weight * advantage * log_prob + self.entropy_weight * entropy
        # `x - stop_gradient(x)` is 0 with the gradient of `x`: the reported
        # loss stays the caption cross-entropy, comparable with soft models.
        self.add_loss(-ops.mean(surrogate - ops.stop_gradient(surrogate)))
        self.baseline.assign(self.decay * baseline + (1 - self.decay) * mean_reward)
        self.initialized.assign(1.0)
        return logits

    def compute_mask(self, logits, previous_mask=None):
        return previous_mask

    def get_config(self):
        config = super().get_config()
        config.update(
            end_token_id=self.end_token_id,
            pad_token_id=self.pad_token_id,
            weight=self.weight,
            entropy_weight=self.entropy_weight,
            decay=self.decay,
        )
        return config
