"""The training objective: masked label-smoothed cross-entropy.

Also `TargetTokens`, a metric counting the real target tokens the loss is
averaged over (to measure training throughput in tokens per second).
"""

import keras
from keras import ops
from keras.src.backend import set_keras_mask


@keras.saving.register_keras_serializable(package="zoo")
class MaskedLabelSmoothingCrossEntropy(keras.losses.Loss):
    """Sparse cross-entropy against a label-smoothed target, padding masked.

    With `K` classes and smoothing `eps`, the target of a token whose label
    is `y` puts `1 - eps + eps / K` on `y` and `eps / K` on every other
    class (Keras's `label_smoothing` convention), so the per-token loss is

        (1 - eps) * (-log p[y]) + eps * mean_k(-log p[k])

    Tokens whose label is `pad_token_id` are masked: the mean is over the
    real tokens only (the loss puts a Keras mask on its per-token values,
    which `keras.losses.Loss` turns into a mean over the unmasked entries;
    a `sample_weight`, such as the preprocessor's, multiplies on top).

    Args:
        label_smoothing: float in `[0, 1)`. Defaults to `0.1` (the paper's).
        pad_token_id: int or None. Label to ignore; `None` masks nothing.
            Defaults to `0`.
        from_logits: bool. Whether `y_pred` are logits. Defaults to `True`.
        **kwargs: `keras.losses.Loss` arguments (`name`, `reduction`,
            `dtype`).

    Call arguments:
        y_true: int tensor `(batch, T)` of labels.
        y_pred: float tensor `(batch, T, K)` of logits (or probabilities).
        sample_weight: optional `(batch, T)` weights.

    Returns:
        The scalar loss (or per-token losses with `reduction=None`).

    Example:
    >>> import numpy as np
    >>> loss = MaskedLabelSmoothingCrossEntropy(0.1)
    >>> round(float(loss([[1, 0]], np.zeros((1, 2, 4)))), 4)  # log(4)
    1.3863

    Reference:
        Szegedy et al., 2016, "Rethinking the Inception Architecture",
        section 7; Vaswani et al., 2017, section 5.4.
    """

    def __init__(self, label_smoothing=0.1, pad_token_id=0, from_logits=True, **kwargs):
        kwargs.setdefault("name", "masked_label_smoothing_cross_entropy")
        super().__init__(**kwargs)
        if not 0 <= label_smoothing < 1:
            raise ValueError(
                "`label_smoothing` must be in [0, 1). "
                f"Received: label_smoothing={label_smoothing}"
            )
        self.label_smoothing = label_smoothing
        self.pad_token_id = pad_token_id
        self.from_logits = from_logits

    def call(self, y_true, y_pred):
        y_true = ops.cast(y_true, "int32")
        y_pred = ops.cast(y_pred, "float32")
        if self.from_logits:
            losses = _smoothed_cross_entropy_from_logits(
                y_pred, y_true, self.label_smoothing
            )
        else:
            scores = ops.log(ops.clip(y_pred, 1e-7, 1.0))
            true_score = ops.squeeze(
                ops.take_along_axis(scores, ops.expand_dims(y_true, -1), axis=-1), -1
            )
            losses = -(1.0 - self.label_smoothing) * true_score - (
                self.label_smoothing * ops.mean(scores, axis=-1)
            )
        if self.pad_token_id is not None:
            mask = ops.not_equal(y_true, self.pad_token_id)
            losses = ops.where(mask, losses, 0.0)
            set_keras_mask(losses, mask)
        return losses

    def get_config(self):
        config = super().get_config()
        config.update(
            label_smoothing=self.label_smoothing,
            pad_token_id=self.pad_token_id,
            from_logits=self.from_logits,
        )
        return config


@keras.saving.register_keras_serializable(package="zoo")
class TargetTokens(keras.metrics.Metric):
    """Counts the real (unpadded) target tokens seen in the epoch.

    Use it as a weighted metric: it sums the sample weights (the
    preprocessor's are 1 on real tokens, 0 on padding), so callbacks can
    read exact token counts from the logs (`zoo/transformer/train.py`
    prints target tokens per second with it).

    Args:
        name: str. Defaults to `"tokens"`.
        **kwargs: `keras.metrics.Metric` arguments.

    Example:
    >>> metric = TargetTokens()
    >>> metric.update_state([[5, 0]], None, sample_weight=[[1.0, 0.0]])
    >>> float(metric.result())
    1.0
    """

    def __init__(self, name="tokens", **kwargs):
        super().__init__(name=name, **kwargs)
        self.count = self.add_variable((), initializer="zeros", name="count")

    def update_state(self, y_true, y_pred, sample_weight=None):
        if sample_weight is None:
            sample_weight = ops.ones_like(y_true, "float32")
        self.count.assign_add(ops.sum(ops.cast(sample_weight, "float32")))

    def result(self):
        # A new tensor, not the variable: logs must not change afterwards.
        return ops.multiply(self.count, 1.0)

    def reset_state(self):
        self.count.assign(0.0)


def _smoothed_cross_entropy_from_logits(logits, labels, label_smoothing):
    """Per-token label-smoothed cross-entropy of float32 logits, fused.

    Forward: `logsumexp(z) - (1 - eps) * z[y] - eps * mean_k(z[k])`, which
    is `-sum_k q_k log softmax(z)_k` for `q = (1 - eps) onehot(y) + eps / K`
    without a `(..., K)` log-softmax tensor. The gradient is written out,
    `upstream * (softmax(z) - (1 - eps) onehot(y) - eps / K)`, from the
    exponentials the forward pass already computed: automatic
    differentiation of the same forward pass builds one `(..., K)` tensor
    per term (the softmax, the broadcast mean, the scattered gather) and
    made the loss the slowest part of a Transformer training step without
    XLA (see `benchmarks/transformer_throughput.py`).
    """
    num_classes = ops.shape(logits)[-1]
    eps = label_smoothing

    @ops.custom_gradient
    def smoothed(z):
        shift = ops.max(z, axis=-1, keepdims=True)
        exps = ops.exp(z - shift)
        total = ops.sum(exps, axis=-1, keepdims=True)
        log_normalizer = ops.squeeze(shift + ops.log(total), -1)
        true_logit = ops.squeeze(
            ops.take_along_axis(z, ops.expand_dims(labels, -1), axis=-1), -1
        )
        loss = log_normalizer - (1.0 - eps) * true_logit
        if eps:
            loss = loss - eps * ops.mean(z, axis=-1)

        def grad(*args, upstream=None):
            if upstream is None:
                (upstream,) = args
            upstream = ops.expand_dims(upstream, -1)
            gradient = exps * (upstream / total)
            if eps:
                gradient = gradient - upstream * (eps / num_classes)
            target = ops.one_hot(labels, num_classes, dtype=gradient.dtype)
            return gradient - target * ((1.0 - eps) * upstream)

        return loss, grad

    return smoothed(logits)
