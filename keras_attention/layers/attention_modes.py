"""Attention's local (Luong's local-m and local-p) and hard modes.

`Attention` scores every key; its `window` restricts the keys to a window
around a position (`local_window`), and `mode="hard"` selects one key
(`hard_weights`) instead of averaging them.

Modes:

- `mode="soft"` (Bahdanau, Luong): the weights are the softmax of the
  scores, with optional dropout on the weights while training.
- `mode="hard"` (Xu et al. 2015, stochastic hard attention): each query
  attends to a single value position. While training the position is
  sampled from the soft distribution; with `hard_estimator="reinforce"`
  no gradient flows through the sample, and the model trains the score
  with REINFORCE using the log-probability of the sampled positions
  (`return_log_prob=True`). With `hard_estimator="gumbel"` the position
  is `argmax(logits + Gumbel noise)` and the weights are the
  straight-through estimator `one_hot + y - stop_gradient(y)` where
  `y = softmax((logits + noise) / temperature)`: the forward pass uses
  the one-hot weights, the backward pass the gradient of `y`. At
  inference (`training` falsy) the position is the argmax of the soft
  distribution. The returned attention weights are the one-hot
  selections (zeros for a row with nothing to attend to); the soft
  distribution they were drawn from is returned with
  `return_distribution=True`. `dropout` is not used in hard mode. With
  no value position at all (`Tv = 0`) both modes return a zero context,
  empty weights and a log-probability of 0.

Local attention (Luong et al. 2015, section 3.2), with `window=D`: the
query at row `t` attends only to value positions `s` with
`|s - p_t| <= D`, where positions count from 0 and `S` is the source
length, the number of valid value positions of each sequence (the sum
of the value mask, assuming padding at the end) or `Tv` without a mask.

- `local="monotonic"` (local-m): `p_t = min(t, S - 1)`. The query rows
  are aligned with the start of the value sequence (row `t` is centred
  on value position `t`, as in Luong's `p_t = t`) whatever `Tq` and `Tv`
  are; rows past the end of the source attend to its last `D + 1`
  positions instead of nothing. Pass `query_positions` to centre rows
  elsewhere, e.g. the step index when decoding one query at a time
  (they are clipped to `S - 1` in the same way).
- `local="predictive"` (local-p): `p_t = (S - 1) sigmoid(v_p^T tanh(W_p
  q_t))`, Luong's eq. 9 with 0-based positions, so that `p_t` spans
  exactly the valid positions `[0, S - 1]` (Luong writes `S sigmoid(.)`
  for 1-based positions). The softmax weights inside the window are
  multiplied by the Gaussian `exp(-(s - p_t)^2 / (2 sigma^2))` with
  `sigma = D / 2` (eq. 10) and, as in the paper, not renormalised, so
  rows sum to less than 1. `W_p` (`position_kernel`, shape
  `(Dq, local_units)`) and `v_p` (`position_scale`, `(local_units,)`)
  are weights of `Attention`. Hard mode samples from the renormalised
  product, i.e. the softmax of `score - (s - p_t)^2 / (2 sigma^2)`,
  which is also what `return_distribution` gives in both modes.
"""

import keras
from keras import ops

from keras_attention.layers.masking import masked_softmax


def local_window(
    query,
    value,
    value_mask,
    query_positions,
    window,
    local,
    position_kernel,
    position_scale,
):
    """The window mask `(B|1, Tq, Tv)` and the local-p log prior of Luong's attention.

    `local` is `"monotonic"` (local-m: centred on `query_positions`, or on
    each query's own position) or `"predictive"` (local-p: centred where
    `position_kernel` and `position_scale` predict). The log prior is `-(s - p_t)^2 / (2 sigma^2)` (float32), or `None`
    for local-m.
    """
    value_length = ops.shape(value)[1]
    if value_mask is None:
        length = ops.cast(value_length, "float32")
    else:
        length = ops.sum(ops.cast(value_mask, "float32"), axis=-1, keepdims=True)
    if local == "monotonic":
        if query_positions is None:
            centre = ops.arange(ops.shape(query)[1])
        else:
            centre = ops.convert_to_tensor(query_positions)
        centre = ops.cast(centre, "float32")
        if len(centre.shape) == 1:
            centre = ops.expand_dims(centre, 0)
        centre = ops.minimum(centre, length - 1.0)
    else:
        query = ops.cast(query, "float32")
        hidden = ops.tanh(ops.matmul(query, position_kernel))
        gate = ops.sigmoid(ops.einsum("btu,u->bt", hidden, position_scale))
        centre = (length - 1.0) * gate
    positions = ops.cast(ops.arange(value_length), "float32")
    distance = positions[None, None, :] - ops.expand_dims(centre, -1)
    window_mask = ops.less_equal(ops.abs(distance), float(window))
    log_prior = None
    if local == "predictive":
        sigma = window / 2.0
        log_prior = -ops.square(distance) / (2.0 * sigma**2)
    return window_mask, log_prior


def hard_weights(logits, mask, training, estimator, temperature, seed_generator):
    """One-hot weights and log-probabilities of hard attention's positions.

    `estimator` is `"reinforce"` (a sampled position in training) or
    `"gumbel"` (straight-through Gumbel-Softmax at `temperature`); outside
    training the most probable position is taken.

    The position is chosen among `0, ..., Tv`, where `Tv` is an extra
    candidate at `-3e38`: never chosen while a real position exists, the
    only one when `Tv = 0` (also when that is known only at run time),
    and its one-hot over the `Tv` real positions is empty: a zero
    context and a log-probability of 0, as soft attention gives.
    """
    value_length = ops.shape(logits)[-1]
    filled = logits
    if mask is not None:
        filled = ops.where(mask, logits, ops.full_like(logits, -1e30))
    log_distribution = ops.log_softmax(filled, axis=-1)
    soft_sample = None
    if training and estimator == "gumbel":
        uniform = keras.random.uniform(
            ops.shape(logits), minval=1e-20, maxval=1.0, seed=seed_generator
        )
        filled = filled - ops.log(-ops.log(uniform))
        soft_sample = masked_softmax(filled / temperature, mask)
    # The extra candidate is finite (below the -1e30 fill of masked
    # positions): a row of only -inf has no distribution to sample
    # (PyTorch's `multinomial` rejects it).
    candidates = ops.pad(
        ops.cast(filled, "float32"),
        ((0, 0), (0, 0), (0, 1)),
        constant_values=-3e38,
    )
    if training and estimator == "reinforce":
        flat = ops.reshape(candidates, (-1, value_length + 1))
        index = keras.random.categorical(flat, 1, seed=seed_generator)
        index = ops.reshape(index, ops.shape(logits)[:-1])
    else:
        index = ops.argmax(candidates, axis=-1)
    positions = ops.arange(value_length, dtype=index.dtype)
    one_hot = ops.cast(ops.equal(ops.expand_dims(index, -1), positions), "float32")
    if mask is not None:  # a row with nothing to attend to selects nothing
        row_valid = ops.any(mask, axis=-1, keepdims=True)
        one_hot = one_hot * ops.cast(row_valid, "float32")
    one_hot = ops.stop_gradient(one_hot)
    log_prob = ops.sum(one_hot * log_distribution, axis=-1)
    weights = one_hot
    if soft_sample is not None:
        # Straight through: forward value `one_hot`, gradient of `soft_sample`.
        weights = one_hot + (soft_sample - ops.stop_gradient(soft_sample))
    return weights, log_prob
