"""A recurrent decoder cell that attends over an encoder memory each step."""

import keras
from keras import ops

from keras_attention.arguments import int_argument
from keras_attention.layers.attention import Attention
from keras_attention.lora import LoRAGRUCell, LoRALSTMCell
from keras_attention.scores.base import PACKAGE

STYLES = ("bahdanau", "luong")
#: Names of the wrapped cell's states, by cell type.
CELL_STATES = {"lstm": ("h", "c"), "gru": ("h",)}
#: Names of the states that follow the previous output and the cell's states.
EXTRA_STATES = ("memory", "keys", "memory_mask", "step", "weights", "coverage")


@keras.saving.register_keras_serializable(package=PACKAGE)
class AttentionDecoderCell(keras.layers.Layer):
    """LSTM/GRU cell with attention over an encoder memory (Bahdanau, Luong).

    Keras 3's `RNN` has no `constants`, so the encoder memory travels in the
    recurrent state. `initial_state(memory, ...)` returns the list named by
    `state_names`: the previous step's output `(B, output_size)` (zeros at
    first), the wrapped cell's states (`h`, and `c` for an LSTM), the
    *constant* states `memory` and `keys` (the memory's projection by the
    score, `Score.project_key`, computed once rather than at every step)
    and `memory_mask` `(B, Tv)`, then the step counter `(B, 1)`, the last
    attention weights `(B, Tv)` and their running sum (the coverage, used
    by the coverage penalty and by doubly stochastic regularisation). The
    cell returns the constant states unchanged; `named_states(states)`
    reads the list as a dict.

    Every state is 2-D `(B, width)`, and the previous output comes first:
    that is what Keras's JAX `RNN` assumes when it skips a padded step (it
    keeps every state with one `(B, 1)` mask and repeats `states[0]` as
    the step's output; TensorFlow repeats the previous output too, so both
    backends agree). `memory` `(B, Tv, D)` and `keys` `(B, Tv, K)` are
    therefore held flat, `(B, Tv * D)` and `(B, Tv * K)`, and reshaped in
    the step. In a functional model use the cell through `AttentionDecoder`
    (which builds that state inside a layer call, so gradients reach the
    score's key weights); in eager code, e.g. step-by-step decoding, call
    `initial_state` and then the cell.

    - `style="bahdanau"`: attend with the previous state `s_{t-1}`, feed the
      context into the cell: `s_t = f([y_{t-1}; c_t], s_{t-1})`; the output
      is `[s_t; c_t]` (Bahdanau et al. 2014).
    - `style="luong"`: run the cell first, attend with `h_t`, output the
      attentional hidden `h~_t = tanh(W_c [c_t; h_t])`, and feed `h~_{t-1}`
      into the next input (input feeding; Luong et al. 2015).

    Args:
        units: int. Size of the LSTM/GRU state.
        memory_dim: int. Last dimension of the encoder memory.
        cell: str. `"lstm"` or `"gru"`. Defaults to `"lstm"`.
        style: str. `"bahdanau"` or `"luong"`. Defaults to `"bahdanau"`.
        score: alignment function: a name, config or score layer (see
            `keras_attention.scores`). Defaults to `"additive"`.
        window: int or None. Luong local attention half-width `D`.
            Defaults to `None` (global attention).
        local: str. `"monotonic"` (local-m, `p_t = t`) or `"predictive"`
            (local-p). Defaults to `"monotonic"`.
        input_feeding: bool. Luong style only: concatenate `h~_{t-1}` to
            the input. Defaults to `True`.
        dropout: float. Dropout on the attention weights. Defaults to `0.0`.
        **kwargs: base layer arguments.

    Call arguments:
        inputs: tensor `(B, input_dim)`: the embedded previous token.
        states: list of tensors made by `initial_state` (or returned by the
            previous step).
        training: bool.

    Returns:
        `(output, new_states)`; `output` is `(B, output_size)`.

    Example:
    >>> import keras, numpy as np
    >>> cell = AttentionDecoderCell(8, memory_dim=6, style="luong", score="general")
    >>> memory = np.random.rand(2, 5, 6).astype("float32")
    >>> states = cell.initial_state(memory)
    >>> output, states = cell(np.random.rand(2, 4).astype("float32"), states)
    >>> tuple(output.shape)
    (2, 8)

    Reference:
        Bahdanau et al., 2014, "Neural Machine Translation by Jointly
        Learning to Align and Translate". Luong et al., 2015, "Effective
        Approaches to Attention-based Neural Machine Translation".
    """

    def __init__(
        self,
        units,
        memory_dim,
        cell="lstm",
        style="bahdanau",
        score="additive",
        window=None,
        local="monotonic",
        input_feeding=True,
        dropout=0.0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        units = int_argument("units", units)
        memory_dim = int_argument("memory_dim", memory_dim)
        if cell not in ("lstm", "gru"):
            raise ValueError(f"`cell` must be 'lstm' or 'gru'. Received: cell={cell!r}")
        if style not in STYLES:
            raise ValueError(
                f"`style` must be one of {STYLES}. Received: style={style!r}"
            )
        self.units = units
        self.memory_dim = memory_dim
        self.cell = cell
        self.style = style
        self.score = score
        self.window = window
        self.local = local
        self.input_feeding = input_feeding
        self.dropout = dropout
        self.num_cell_states = len(CELL_STATES[cell])
        # Step inputs may carry the embedding's padding mask; padded steps
        # are handled by `keras.layers.RNN`, so the cell accepts and drops it.
        self.supports_masking = True

    @property
    def output_size(self):
        if self.style == "bahdanau":
            return self.units + self.memory_dim
        return self.units

    @property
    def state_names(self):
        """Names of the states, in the order of the state list."""
        return ("output", *CELL_STATES[self.cell], *EXTRA_STATES)

    @property
    def state_size(self):
        # The memory states have no fixed length; Keras only reads these
        # sizes for symbolic `return_state` shapes, which the memory never
        # needs, so `memory_dim` stands in for them.
        cell_states = [self.units] * self.num_cell_states
        # output, cell states, memory, keys, memory_mask, step, weights, coverage
        return [self.output_size, *cell_states, *[self.memory_dim] * 2, 1, 1, 1, 1]

    def build(self, inputs_shape):
        input_dim = inputs_shape[-1]
        if self.style == "bahdanau":
            cell_input = input_dim + self.memory_dim
        else:
            cell_input = input_dim + (self.units if self.input_feeding else 0)
        cell_cls = LoRALSTMCell if self.cell == "lstm" else LoRAGRUCell
        self.rnn_cell = cell_cls(self.units, dtype=self.dtype_policy, name=self.cell)
        self.rnn_cell.build((inputs_shape[0], cell_input))
        self._build_attention()
        self.combine = None
        if self.style == "luong":
            self.combine = keras.layers.Dense(
                self.units,
                activation="tanh",
                use_bias=False,
                dtype=self.dtype_policy,
                name="attentional_hidden",
            )
            self.combine.build((inputs_shape[0], self.memory_dim + self.units))

    def attention_weights(self, states):
        """The last step's attention weights `(B, Tv)` held in `states`."""
        return states[self.state_names.index("weights")]

    def named_states(self, states):
        """The state list as a dict keyed by `state_names`.

        `memory` and `keys` come back with their sequence axis,
        `(B, Tv, D)` and `(B, Tv, K)`; the other states as they are held.
        """
        self._build_attention()
        named = dict(zip(self.state_names, states))
        named["memory"], named["keys"] = self._unflatten_memory(
            named["memory"], named["keys"], named["memory_mask"]
        )
        return named

    def _unflatten_memory(self, memory, keys, memory_mask):
        """The flat `memory` and `keys` states back to `(B, Tv, D or K)`."""
        batch, length = ops.shape(memory_mask)
        return (
            ops.reshape(memory, (batch, length, self.memory_dim)),
            ops.reshape(keys, (batch, length, self._key_width)),
        )

    @staticmethod
    def _flatten(x):
        """`(B, Tv, D)` to the 2-D state `(B, Tv * D)`."""
        shape = ops.shape(x)
        return ops.reshape(x, (shape[0], shape[1] * shape[2]))

    def _build_attention(self):
        """Creates the attention sublayer; it needs only known sizes."""
        if getattr(self, "attention", None) is not None:
            return
        self.attention = Attention(
            score=self.score,
            window=self.window,
            local=self.local,
            dropout=self.dropout,
            dtype=self.dtype_policy,
            name="attention",
        )
        self.attention.build((None, 1, self.units), (None, None, self.memory_dim))
        # The projected keys' width `K` (a static size, so the `keys` state
        # keeps a known shape in graphs with unknown lengths).
        probe = ops.zeros((1, 1, self.memory_dim), self.compute_dtype)
        self._key_width = int(self.attention.score_layer.project_key(probe).shape[-1])

    def initial_state(self, memory, memory_mask=None, cell_states=None):
        """Returns the full initial state list for this cell.

        Args:
            memory: tensor `(B, Tv, memory_dim)`: the encoder outputs.
            memory_mask: optional boolean `(B, Tv)`; `True` = a real token.
            cell_states: optional list of the wrapped cell's initial states
                (e.g. a projection of the encoder's final state); zeros
                otherwise.

        Returns:
            A list of 2-D tensors named by `state_names`, to pass as
            `states` to a single step (or as `initial_state` to
            `keras.layers.RNN` inside a layer's `call`).
        """
        if any(
            isinstance(t, keras.KerasTensor)
            for t in keras.tree.flatten([memory, memory_mask, cell_states])
        ):
            raise ValueError(
                "initial_state() reads the score's weights, so it must run "
                "inside a layer call, not on symbolic keras.Input tensors "
                "(the weights would be frozen into the graph). Use "
                "`AttentionDecoder(cell)(inputs, memory)` in functional models."
            )
        dtype = self.compute_dtype
        memory = ops.cast(memory, dtype)
        # Zeros shaped from the memory itself, so symbolic batch sizes work.
        column = ops.zeros_like(memory[:, 0, :1])

        def zeros(width):
            return column + ops.zeros((width,), dtype=dtype)

        if memory_mask is None:
            memory_mask = ops.ones_like(memory[:, :, 0])
        if cell_states is None:
            cell_states = [zeros(self.units) for _ in range(self.num_cell_states)]
        cell_states = list(cell_states)
        if len(cell_states) != self.num_cell_states:
            raise ValueError(
                f"A {self.cell} cell has {self.num_cell_states} states. "
                f"Received: {len(cell_states)} cell_states"
            )
        # One dtype for every state: JAX's scan carries them unchanged.
        cell_states = [ops.cast(state, dtype) for state in cell_states]
        per_position = ops.zeros_like(memory[:, :, 0])
        self._build_attention()
        keys = ops.cast(self.attention.score_layer.project_key(memory), dtype)
        return [
            zeros(self.output_size),
            *cell_states,
            self._flatten(memory),
            self._flatten(keys),
            ops.cast(memory_mask, dtype),
            zeros(1),
            per_position,
            per_position,
        ]

    def call(self, inputs, states, training=None):
        n = self.num_cell_states
        feed = states[0]
        cell_states = list(states[1 : 1 + n])
        flat_memory, flat_keys, memory_mask, step, _, coverage = states[1 + n :]
        memory = self._unflatten_memory(flat_memory, flat_keys, memory_mask)
        if self.style == "bahdanau":
            context, weights = self._attend(
                cell_states[0], memory, memory_mask, step, training
            )
            cell_input = ops.concatenate([inputs, context], axis=-1)
            hidden, new_cell_states = self.rnn_cell(
                cell_input, cell_states, training=training
            )
            output = ops.concatenate([hidden, context], axis=-1)
        else:
            cell_input = inputs
            if self.input_feeding:
                cell_input = ops.concatenate([inputs, feed], axis=-1)
            hidden, new_cell_states = self.rnn_cell(
                cell_input, cell_states, training=training
            )
            context, weights = self._attend(hidden, memory, memory_mask, step, training)
            output = self.combine(ops.concatenate([context, hidden], axis=-1))
        if not isinstance(new_cell_states, (list, tuple)):
            new_cell_states = [new_cell_states]
        weights = ops.cast(weights, self.compute_dtype)
        new_states = [
            output,
            *new_cell_states,
            flat_memory,
            flat_keys,
            memory_mask,
            step + 1,
            weights,
            coverage + weights,
        ]
        return output, new_states

    def _attend(self, query, memory, memory_mask, step, training):
        positions = None
        if self.window is not None and self.local == "monotonic":
            positions = ops.cast(step, "int32")
        memory, keys = memory
        context, weights = self.attention(
            ops.expand_dims(query, 1),
            memory,
            value_mask=ops.cast(memory_mask, "bool"),
            projected_key=keys,
            return_attention_scores=True,
            training=training,
            query_positions=positions,
        )
        return ops.squeeze(context, 1), ops.squeeze(weights, 1)

    def get_config(self):
        config = super().get_config()
        score = self.score
        if isinstance(score, keras.layers.Layer):
            score = keras.saving.serialize_keras_object(score)
        config.update(
            units=self.units,
            memory_dim=self.memory_dim,
            cell=self.cell,
            style=self.style,
            score=score,
            window=self.window,
            local=self.local,
            input_feeding=self.input_feeding,
            dropout=self.dropout,
        )
        return config


@keras.saving.register_keras_serializable(package=PACKAGE)
class AttentionDecoder(keras.layers.Layer):
    """Runs an `AttentionDecoderCell` over a sequence (teacher forcing).

    The layer builds the cell's initial state from the encoder memory
    inside its own `call` (Keras 3's `RNN` has no `constants`), then runs
    `keras.layers.RNN`. Padding masks: the input sequence's mask (e.g. from
    `Embedding(mask_zero=True)`) skips padded steps (they keep every state
    and repeat the previous output, zeros before the first real step, on
    TensorFlow and JAX alike), and the memory's mask hides padded source
    positions; both are taken from Keras's implicit masks when not given.

    Args:
        cell: an `AttentionDecoderCell` (or its config).
        return_state: bool. Also return the final states. Defaults to
            `False`.
        **kwargs: base layer arguments.

    Call arguments:
        inputs: tensor `(B, T, input_dim)`: embedded target tokens.
        memory: tensor `(B, Tv, memory_dim)`: encoder outputs.
        inputs_mask: optional boolean `(B, T)`.
        memory_mask: optional boolean `(B, Tv)`.
        initial_state: optional list of the wrapped LSTM/GRU's states.
        training: bool.

    Returns:
        The outputs `(B, T, cell.output_size)` (and the final states).

    Example:
    >>> import keras, numpy as np
    >>> cell = AttentionDecoderCell(8, memory_dim=6)
    >>> y = AttentionDecoder(cell)(np.zeros((2, 3, 4)), np.ones((2, 5, 6)))
    >>> tuple(y.shape)
    (2, 3, 14)

    Reference:
        Bahdanau et al., 2014; Luong et al., 2015.
    """

    def __init__(self, cell, return_state=False, **kwargs):
        super().__init__(**kwargs)
        if isinstance(cell, dict):
            cell = keras.saving.deserialize_keras_object(cell)
        if not isinstance(cell, AttentionDecoderCell):
            raise ValueError(
                "`cell` must be an AttentionDecoderCell. "
                f"Received: cell={type(cell).__name__}"
            )
        self.return_state = return_state
        # The cell is tracked once, through the RNN.
        self.rnn = keras.layers.RNN(
            cell, return_sequences=True, return_state=return_state, name="rnn"
        )
        self.supports_masking = True

    @property
    def cell(self):
        return self.rnn.cell

    def build(self, inputs_shape, memory_shape=None):
        if memory_shape is not None and memory_shape[-1] != self.cell.memory_dim:
            raise ValueError(
                f"The memory's last dimension must be memory_dim="
                f"{self.cell.memory_dim}. Received: memory.shape={memory_shape}"
            )
        if not self.cell.built:
            self.cell.build((inputs_shape[0], inputs_shape[-1]))
        if not self.rnn.built:
            self.rnn.build(inputs_shape)

    def call(
        self,
        inputs,
        memory,
        inputs_mask=None,
        memory_mask=None,
        initial_state=None,
        training=None,
    ):
        states = self.cell.initial_state(memory, memory_mask, initial_state)
        return self.rnn(
            inputs, initial_state=states, mask=inputs_mask, training=training
        )

    def get_config(self):
        config = super().get_config()
        config.update(
            cell=keras.saving.serialize_keras_object(self.cell),
            return_state=self.return_state,
        )
        return config
