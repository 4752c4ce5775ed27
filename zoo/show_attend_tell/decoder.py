"""The Show-Attend-Tell LSTM cell: attention over an image grid, gated."""

import keras
from keras import ops

from keras_attention.layers import Attention
from keras_attention.lora import LoRALSTMCell

#: Names of the states after the LSTM's `h` and `c`.
EXTRA_STATES = ("annotations", "keys", "weights", "coverage", "log_prob", "entropy")
ATTENTION_MODES = ("soft", "hard")
FEEDBACK = ("context", "weights")


@keras.saving.register_keras_serializable(package="zoo")
class ShowAttendTellCell(keras.layers.Layer):
    """LSTM cell that attends over image annotations each step (Xu et al.).

    At step `t`, with the previous hidden state `h_{t-1}`:

    - `e_{t,i} = f_att(h_{t-1}, a_i)` with any alignment function of
      `keras_attention.scores` (additive by default, as in the paper), and
      `alpha_t = softmax(e_t)` over the `L` grid locations;
    - soft attention: the context is `sum_i alpha_{t,i} a_i`; hard attention
      (`attention="hard"`): one location `s_t ~ Multinoulli(alpha_t)` is
      sampled while training (the argmax at inference) and the context is
      `a_{s_t}` (`keras_attention.layers.Attention(mode="hard")`);
    - the gating scalar `beta_t = sigmoid(f_beta(h_{t-1}))` scales it:
      `z_t = beta_t * context` (section 4.2.1);
    - the LSTM reads `[E y_{t-1}; z_t]` and `h_{t-1}` and outputs `h_t`
      (`feedback="context"`, the paper); with `feedback="weights"` it reads
      `[E y_{t-1}; alpha_t]` instead: *where* it looked, not *what* it saw,
      so what a word needs from the image must come from that word's own
      context `z_t` (through the deep output). The paper's model can read an
      object one step early (e.g. while emitting "a") and name it from its
      memory, so its attention at the noun itself may be anywhere.

    The annotations travel in the recurrent state (Keras 3's `RNN` has no
    `constants`), with their projection by the score (computed once), the
    step's weights `alpha_t`, their running sum over the steps (the
    coverage `sum_t alpha_{t,i}` of the doubly stochastic regulariser), and,
    for hard attention, the running sums of `log p(s_t)` and of the entropy
    of `alpha_t` that REINFORCE needs. Under `ShowAttendTellDecoder` (or
    `keras.layers.RNN` on TensorFlow) with a padding mask, padded steps
    keep the states, so the sums cover real steps only.

    Args:
        units: int. LSTM size.
        annotation_dim: int. Size `D` of each annotation vector.
        score: alignment function (name, config or score layer). Defaults to
            `"additive"`.
        attention: str. `"soft"` or `"hard"`. Defaults to `"soft"`.
        gating: bool. Use the gating scalar `beta`. Defaults to `True`.
        feedback: str. What the LSTM reads besides the word: `"context"`
            (`z_t`, the paper) or `"weights"` (`alpha_t`). Defaults to
            `"context"`.
        num_locations: int or None. `L`, needed with `feedback="weights"`.
            Defaults to `None`.
        seed: int or None. Seed of hard-attention sampling. Defaults to
            `None`.
        **kwargs: base layer arguments.

    Call arguments:
        inputs: tensor `(B, input_dim)`: the embedded previous word.
        states: list made by `initial_state` (or returned by the last step).
        training: bool.

    Returns:
        `(output, new_states)` with `output = [h_t; z_t]`,
        `(B, units + annotation_dim)`.

    Example:
    >>> import numpy as np
    >>> cell = ShowAttendTellCell(8, annotation_dim=6)
    >>> states = cell.initial_state(np.random.rand(2, 9, 6).astype("float32"))
    >>> output, states = cell(np.zeros((2, 4), "float32"), states)
    >>> tuple(output.shape)
    (2, 14)

    Reference:
        Xu et al., 2015, "Show, Attend and Tell: Neural Image Caption
        Generation with Visual Attention", sections 3.1.2 and 4.
    """

    def __init__(
        self,
        units,
        annotation_dim,
        score="additive",
        attention="soft",
        gating=True,
        feedback="context",
        num_locations=None,
        seed=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if feedback not in FEEDBACK:
            raise ValueError(
                f"`feedback` must be one of {FEEDBACK}. Received: feedback={feedback!r}"
            )
        if feedback == "weights" and not num_locations:
            raise ValueError(
                "`feedback='weights'` needs `num_locations`. "
                f"Received: num_locations={num_locations!r}"
            )
        for name, value in (("units", units), ("annotation_dim", annotation_dim)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(
                    f"`{name}` must be a positive int. Received: {name}={value!r}"
                )
        if attention not in ATTENTION_MODES:
            raise ValueError(
                f"`attention` must be 'soft' or 'hard'. Received: attention={attention!r}"
            )
        if isinstance(score, keras.layers.Layer):
            score = keras.saving.serialize_keras_object(score)
        self.units = units
        self.annotation_dim = annotation_dim
        self.score = score
        self.attention_mode = attention
        self.gating = gating
        self.feedback = feedback
        self.num_locations = num_locations
        self.seed = seed
        self.supports_masking = True
        self.attention = Attention(
            score=score,
            mode=attention,
            seed=seed,
            dtype=self.dtype_policy,
            name="attention",
        )
        self.gate = None
        if gating:
            self.gate = keras.layers.Dense(
                1, activation="sigmoid", dtype=self.dtype_policy, name="beta"
            )
        self.init_h = keras.layers.Dense(
            units, activation="tanh", dtype=self.dtype_policy, name="init_h"
        )
        self.init_c = keras.layers.Dense(
            units, activation="tanh", dtype=self.dtype_policy, name="init_c"
        )

    @property
    def output_size(self):
        """`units + annotation_dim`: the size of `[h_t; z_t]`.

        Example:
        >>> ShowAttendTellCell(8, annotation_dim=6).output_size
        14
        """
        return self.units + self.annotation_dim

    @property
    def state_size(self):
        """The sizes of the state list: `h`, `c`, then `EXTRA_STATES`.

        Example:
        >>> ShowAttendTellCell(8, annotation_dim=6).state_size
        [8, 8, 6, 6, 1, 1, 1, 1]
        """
        # The annotation states have no fixed length; Keras reads these sizes
        # only for symbolic `return_state` shapes.
        d = self.annotation_dim
        return [self.units, self.units, d, d, 1, 1, 1, 1]

    def build(self, inputs_shape):
        self.lstm = LoRALSTMCell(self.units, dtype=self.dtype_policy, name="lstm")
        fed = self.annotation_dim if self.feedback == "context" else self.num_locations
        self.lstm.build((inputs_shape[0], inputs_shape[-1] + fed))
        self._build_state_layers()

    def _build_state_layers(self):
        """Builds the layers that need only known sizes (not the input's)."""
        if not self.attention.built:
            self.attention.build(
                (None, 1, self.units), (None, None, self.annotation_dim)
            )
        for layer in (self.init_h, self.init_c):
            if not layer.built:
                layer.build((None, self.annotation_dim))
        if self.gate is not None and not self.gate.built:
            self.gate.build((None, self.units))

    def initial_state(self, annotations):
        """The state list before the first word.

        `h_0` and `c_0` are MLPs of the mean annotation (section 3.1.2).

        Args:
            annotations: tensor `(B, L, annotation_dim)`.

        Returns:
            A list of tensors: `states` for the first step, or
            `initial_state` for `keras.layers.RNN` inside a layer call.

        Example:
        >>> import numpy as np
        >>> cell = ShowAttendTellCell(8, annotation_dim=6)
        >>> states = cell.initial_state(np.random.rand(2, 9, 6).astype("float32"))
        >>> [tuple(state.shape) for state in states]  # h, c, then EXTRA_STATES
        [(2, 8), (2, 8), (2, 9, 6), (2, 9, 6), (2, 9), (2, 9), (2, 1), (2, 1)]
        """
        self._build_state_layers()
        annotations = ops.cast(annotations, self.compute_dtype)
        mean = ops.mean(annotations, axis=1)
        per_location = ops.zeros_like(annotations[:, :, 0])
        scalar = ops.zeros_like(annotations[:, 0, :1])
        keys = self.attention.score_layer.project_key(annotations)
        return [
            self.init_h(mean),
            self.init_c(mean),
            annotations,
            keys,
            per_location,
            per_location,
            scalar,
            scalar,
        ]

    def attention_weights(self, states):
        """The last step's attention weights `(B, L)` held in `states`.

        Example:
        >>> import numpy as np
        >>> cell = ShowAttendTellCell(8, annotation_dim=6)
        >>> states = cell.initial_state(np.random.rand(2, 9, 6).astype("float32"))
        >>> output, states = cell(np.zeros((2, 4), "float32"), states)
        >>> weights = ops.convert_to_numpy(cell.attention_weights(states))
        >>> weights.shape, bool(np.allclose(weights.sum(-1), 1.0, atol=1e-5))
        ((2, 9), True)
        """
        return states[2 + EXTRA_STATES.index("weights")]

    def call(self, inputs, states, training=None):
        h, c, annotations, keys, _, coverage, log_prob, entropy = states
        query = ops.expand_dims(h, 1)
        if self.attention_mode == "hard":
            context, weights, step_log_prob, distribution = self.attention(
                query,
                annotations,
                projected_key=keys,
                return_attention_scores=True,
                return_log_prob=True,
                return_distribution=True,
                training=training,
            )
            distribution = distribution[:, 0]
            step_entropy = -ops.sum(
                distribution * ops.log(ops.maximum(distribution, 1e-12)),
                axis=-1,
                keepdims=True,
            )
            log_prob = log_prob + ops.cast(step_log_prob, log_prob.dtype)
            entropy = entropy + ops.cast(step_entropy, entropy.dtype)
        else:
            context, weights = self.attention(
                query,
                annotations,
                projected_key=keys,
                return_attention_scores=True,
                training=training,
            )
        context = context[:, 0]
        weights = ops.cast(weights[:, 0], self.compute_dtype)
        if self.gate is not None:
            context = self.gate(h) * context
        fed = context if self.feedback == "context" else weights
        _, (h, c) = self.lstm(
            ops.concatenate([inputs, fed], axis=-1), [h, c], training=training
        )
        new_states = [
            h,
            c,
            annotations,
            keys,
            weights,
            coverage + weights,
            log_prob,
            entropy,
        ]
        return ops.concatenate([h, context], axis=-1), new_states

    def get_config(self):
        config = super().get_config()
        config.update(
            units=self.units,
            annotation_dim=self.annotation_dim,
            score=self.score,
            attention=self.attention_mode,
            gating=self.gating,
            feedback=self.feedback,
            num_locations=self.num_locations,
            seed=self.seed,
        )
        return config


@keras.saving.register_keras_serializable(package="zoo")
class ShowAttendTellDecoder(keras.layers.Layer):
    """Runs a `ShowAttendTellCell` over a caption (teacher forcing).

    Builds the cell's initial state from the annotations inside its own
    call (so gradients reach `f_init` and the score's key weights), then runs
    `keras.layers.RNN`; the caption's padding mask (e.g. from
    `Embedding(mask_zero=True)`) skips padded steps: they keep the states
    and repeat the last output, on every backend (see `_PaddedSteps`).

    Args:
        cell: a `ShowAttendTellCell` (or its config).
        **kwargs: base layer arguments.

    Call arguments:
        inputs: tensor `(B, T, input_dim)`: embedded previous words.
        annotations: tensor `(B, L, annotation_dim)`.
        inputs_mask: optional boolean `(B, T)`.
        training: bool.

    Returns:
        `(outputs, coverage, log_prob, entropy)`: `[h_t; z_t]` per step
        `(B, T, units + annotation_dim)`, `sum_t alpha_t` `(B, L)`, and the
        sums over the steps of `log p(s_t)` and of the attention entropy,
        `(B, 1)` each (zeros for soft attention).

    Example:
    >>> import numpy as np
    >>> decoder = ShowAttendTellDecoder(ShowAttendTellCell(8, annotation_dim=6))
    >>> outputs, coverage, _, _ = decoder(np.zeros((2, 3, 4)), np.ones((2, 9, 6)))
    >>> tuple(outputs.shape), tuple(coverage.shape)
    ((2, 3, 14), (2, 9))

    Reference:
        Xu et al., 2015, "Show, Attend and Tell".
    """

    def __init__(self, cell, **kwargs):
        super().__init__(**kwargs)
        if isinstance(cell, dict):
            cell = keras.saving.deserialize_keras_object(cell)
        if not isinstance(cell, ShowAttendTellCell):
            raise ValueError(
                "`cell` must be a ShowAttendTellCell. "
                f"Received: cell={type(cell).__name__}"
            )
        # Saved first (attributes in name order): weights stay under `cell/`.
        self.cell = cell
        self.rnn = keras.layers.RNN(
            _PaddedSteps(cell, dtype=cell.dtype_policy, name="padded_steps"),
            return_sequences=True,
            return_state=True,
            name="rnn",
        )
        self.supports_masking = True

    def build(self, inputs_shape, annotations_shape=None):
        if not self.cell.built:
            self.cell.build((inputs_shape[0], inputs_shape[-1]))
        if not self.rnn.built:
            self.rnn.build(inputs_shape)

    def call(self, inputs, annotations, inputs_mask=None, training=None):
        states = self.cell.initial_state(annotations)
        outputs, *final = self.rnn(
            inputs,
            initial_state=self.rnn.cell.flat_states(states),
            mask=inputs_mask,
            training=training,
        )
        extra = dict(zip(EXTRA_STATES, self.rnn.cell.cell_states(final)[2:]))
        return outputs, extra["coverage"], extra["log_prob"], extra["entropy"]

    def compute_mask(self, inputs, previous_mask=None):
        return [previous_mask, None, None, None]

    def get_config(self):
        config = super().get_config()
        config.update(cell=keras.saving.serialize_keras_object(self.cell))
        return config


class _PaddedSteps(keras.layers.Layer):
    """A `ShowAttendTellCell` in the form every backend's `keras.layers.RNN` runs.

    At a padded step each backend keeps the states, but they differ in what
    they output: TensorFlow repeats the previous output, JAX repeats
    `states[0]`, and JAX masks each state with a `(B, 1)` mask, which only
    broadcasts over 2-D states. So this cell's states are the last output
    `[h; z]` first (zeros before the first step, as on TensorFlow), then the
    cell's states, each flattened to `(B, size)`; `call` restores their
    shapes, runs the cell and flattens them again.

    Internal to `ShowAttendTellDecoder`, which makes it (never serialized).

    Args:
        cell: the `ShowAttendTellCell` to run.
        **kwargs: base layer arguments.
    """

    def __init__(self, cell, **kwargs):
        super().__init__(**kwargs)
        self.cell = cell
        self.output_size = cell.output_size
        # Placeholders: Keras reads them only for symbolic `return_state`
        # shapes, which the decoder's traced call replaces.
        self.state_size = [cell.output_size, *cell.state_size]
        self.state_shapes = None

    def build(self, inputs_shape):
        if not self.cell.built:
            self.cell.build(inputs_shape)

    def flat_states(self, states):
        """`[zeros (B, output_size), *states flattened]`; records their shapes."""
        self.state_shapes = [tuple(state.shape[1:]) for state in states]
        h, annotations = states[0], states[2]
        no_output = ops.concatenate(
            [ops.zeros_like(h), ops.zeros_like(annotations[:, 0])], axis=-1
        )
        return [no_output, *(_flatten(state) for state in states)]

    def cell_states(self, flat):
        """The cell's states from this cell's (the inverse of `flat_states`)."""
        batch = ops.shape(flat[0])[0]
        return [
            ops.reshape(state, (batch, *(-1 if d is None else d for d in shape)))
            for state, shape in zip(flat[1:], self.state_shapes)
        ]

    def call(self, inputs, states, training=None):
        output, states = self.cell(inputs, self.cell_states(states), training=training)
        return output, [output, *(_flatten(state) for state in states)]


def _flatten(state):
    """`(B, ...)` -> `(B, size)`."""
    return ops.reshape(state, (ops.shape(state)[0], -1))
