"""The one generation front end of the zoo's generative models.

`GenerativeTask` owns the decoding loop for every model that writes tokens
(`Seq2Seq`, `Transformer`, `ShowAttendTell`): a model supplies
`encode(inputs, max_length) -> cache` and
`next(prompt, cache, index) -> (logits, attention, cache)`, and inherits
`generate` (greedy or beam search with GNMT length and coverage penalties,
from `keras_attention.decoding`) and `token_attention` (the attention of
chosen tokens, for alignment plots). The user verbs (`translate`,
`caption`) are thin: preprocess raw input, `generate`, detokenize.

The decoding arguments of those verbs (`beam_width`, `max_length`,
`batch_size`) are checked once (`decoding_options`, with
`keras_attention.arguments.int_argument`), so a bad value gets the same
clear error from every model. Those checks, and the choice of a search or a
sampler, are in `zoo.base.search_options`; this module re-exports them.
"""

import keras
import numpy as np
from keras import ops, tree

from keras_attention.decoding import RandomSampler
from zoo.base.search_options import (  # noqa: F401 (names of this module too)
    as_texts,
    best_sequences,
    chunk_seed,
    decoding_options,
    make_sampler,
    make_search,
    repeated,
    sampling_options,
    sampling_seed,
)
from zoo.base.task import Task

#: Under JAX, where the compiled search is compiled again for each new input
#: shape, `generate` pads the source to a length that divides by this
#: (`GenerativeTask.padded_source`), so that batches of near source lengths
#: share one compilation. The models mask the padding as any other.
SOURCE_LENGTH_MULTIPLE = 16


class GenerativeTask(Task):
    """A `Task` that writes token sequences: one search loop for every model.

    A subclass implements two methods with one meaning for every model:

    - `encode(inputs, max_length) -> cache`: encodes prepared inputs (source
      token ids `(batch, S)`, or images) once; `cache` is a nested structure
      of tensors with a leading batch axis. `max_length` is the number of
      decoding steps (for a key/value cache; ignore it if unneeded).
    - `next(prompt, cache, index) -> (logits, attention, cache)`: reads the
      token at `index - 1` of `prompt` and returns the `(batch, vocabulary)`
      logits of position `index`, the step's attention weights over the
      source positions `(batch, S)` (float32; a Transformer averages its
      last decoder layer's cross-attention over the heads) and the updated
      cache (the `keras_attention.decoding` convention, as in keras-hub's
      samplers).

    It inherits `generate` (the search owns the loop, so length and
    coverage penalties work for every model) and `token_attention` (the
    attention of chosen tokens, by re-running `next` once over them). Its
    `preprocessor` supplies `start_id`, `end_id`, `pad_id` and
    `sequence_length` (the default number of decoding steps).

    The search runs compiled, once per search configuration (traced again
    only for new shapes): inside one `tf.function` on TensorFlow, one
    `jax.jit` on JAX (the model's variables passed in, read through a
    `keras.StatelessScope`, as keras-hub's `CausalLM` generates; the
    source padded to a multiple of `SOURCE_LENGTH_MULTIPLE` positions, see
    `padded_source`, and the batch to the caller's `batch_size` rows, so
    that few shapes compile); on PyTorch it runs eagerly without recording
    gradients.

    Example:
    >>> import keras, numpy as np
    >>> from keras import ops
    >>> class Counter(GenerativeTask):
    ...     # Predicts `previous + 1`, attends to source position `index - 1`.
    ...     def __init__(self, **kwargs):
    ...         ids = keras.Input((None,), dtype="int32", name="token_ids")
    ...         super().__init__(ids, keras.layers.Embedding(8, 8)(ids), **kwargs)
    ...     def encode(self, inputs, max_length):
    ...         return {"source": ops.convert_to_tensor(inputs)}
    ...     def next(self, prompt, cache, index):
    ...         token = ops.take(prompt, index - 1, axis=1)
    ...         logits = ops.one_hot(token + 1, 8) * 10.0
    ...         width = ops.shape(cache["source"])[1]
    ...         attention = ops.one_hot(ops.full_like(token, index - 1), width)
    ...         return logits, attention, cache
    >>> class Ids:
    ...     start_id, end_id, pad_id, sequence_length = 1, 4, 0, 6
    >>> model = Counter()
    >>> model.preprocessor = Ids()
    >>> tokens, attention = model.generate(  # 6 steps over 6 source positions
    ...     np.ones((1, 6), "int32"), return_attention=True)
    >>> tokens
    array([[1, 2, 3, 4, 0, 0, 0]], dtype=int32)
    >>> attention.shape, attention[0, :3].argmax(-1).tolist()
    ((1, 6, 6), [0, 1, 2])
    """

    #: Keys of the dict `encode` returns that `next` reads and never changes
    #: (encoder outputs, cross-attention keys/values). The search gets them
    #: as its `static_cache`: a beam search tiles them once instead of
    #: reordering them between beams at every step.
    static_cache_keys = ()

    #: On TensorFlow, a search (not a sampler) of `generate` drops its
    #: finished rows (greedy) or examples (beam) every this many steps, so
    #: that the others step without them, as CTranslate2 does: the same
    #: ids, in less time (`keras_attention.decoding.search.shrinking_loop`;
    #: not under JAX and PyTorch, whose compiled loops keep static shapes).
    #: `None` keeps every row to the end.
    drop_finished_every = None

    #: Optional method `resize_cache(cache, index) -> cache`: the cache of
    #: `next` with room for the steps before `index` only, so that a search
    #: that drops finished rows also attends over the positions written so
    #: far, padded every `drop_finished_every` steps (the search's
    #: `resize_cache`). `None`: the cache keeps its `encode` size.
    resize_cache = None

    def search_options(self, search):
        """The call options this model gives `search` on this backend.

        `drop_finished` (and `resize_cache`) for a greedy or beam search on
        TensorFlow where `drop_finished_every` is set; nothing otherwise.

        Example:
        >>> import keras
        >>> ids = keras.Input((None,), dtype="int32")
        >>> model = GenerativeTask(ids, keras.layers.Embedding(8, 4)(ids))
        >>> from keras_attention.decoding import GreedySearch
        >>> model.search_options(GreedySearch())
        {}
        """
        if (
            self.drop_finished_every is None
            or isinstance(search, RandomSampler)
            or keras.backend.backend() != "tensorflow"
        ):
            return {}
        options = {"drop_finished": self.drop_finished_every}
        if self.resize_cache is not None:
            options["resize_cache"] = self.resize_cache
        return options

    def encode(self, inputs, max_length):
        """Encodes prepared inputs once; returns the cache of `next`.

        Args:
            inputs: the prepared source (token ids `(batch, S)`, images).
            max_length: int. The number of decoding steps.

        Returns:
            A nested structure of tensors, batch-first.

        Example (a caller needs only the contract; `zoo.Seq2Seq` implements
        it with its decoder state):
        >>> import numpy as np, zoo
        >>> from keras import tree
        >>> model = zoo.Seq2Seq(6, 6, embedding_dim=4, units=4)
        >>> cache = model.encode(np.array([[4, 4, 3], [4, 3, 0]]), max_length=5)
        >>> sorted({int(t.shape[0]) for t in tree.flatten(cache)})  # batch-first
        [2]
        """
        raise NotImplementedError(f"{type(self).__name__} must implement encode().")

    def next(self, prompt, cache, index):
        """One decoding step: `(logits (batch, V), attention (batch, S), cache)`.

        Args:
            prompt: int tensor `(batch, max_length + 1)`.
            cache: the structure `encode` returned, as updated by `next`.
            index: int scalar. The position whose logits are returned; the
                step reads the token at `index - 1`.

        Example (a greedy decoding written by hand, what `generate` runs as
        one compiled loop):
        >>> import numpy as np, zoo
        >>> from keras import ops
        >>> model = zoo.Seq2Seq(6, 6, embedding_dim=4, units=4)
        >>> source = np.array([[4, 4, 3]])
        >>> prompt = np.array([[2, 0, 0, 0]], "int32")  # [START], 3 steps
        >>> cache = model.encode(source, max_length=3)
        >>> for index in range(1, 4):
        ...     logits, attention, cache = model.next(prompt, cache, index)
        ...     prompt[:, index] = ops.convert_to_numpy(ops.argmax(logits, axis=-1))
        >>> tuple(logits.shape), tuple(attention.shape)  # (batch, V), (batch, S)
        ((1, 6), (1, 3))
        """
        raise NotImplementedError(f"{type(self).__name__} must implement next().")

    def padded_source(self, inputs, multiple):
        """`inputs` with the source padded to a length that divides by `multiple`.

        Under JAX `generate` pads the inputs of its compiled search with
        it (`SOURCE_LENGTH_MULTIPLE`), so that batches of near source
        lengths share one compilation. A kind whose inputs have a source
        length (token ids) pads it with the id the model masks; this
        default keeps the inputs as they are (images have one shape).

        Args:
            inputs: the prepared source, as `encode` takes it.
            multiple: int >= 1.

        Returns:
            The inputs, in the form `encode` takes.

        Example:
        >>> import keras, numpy as np
        >>> ids = keras.Input((None,), dtype="int32")
        >>> model = GenerativeTask(ids, keras.layers.Embedding(8, 4)(ids))
        >>> images = np.zeros((2, 8, 8, 1), "float32")
        >>> model.padded_source(images, 16) is images
        True
        """
        return inputs

    def generation_preprocessor(self, verb="generate()"):
        """The preprocessor that knows the special token ids, or a ValueError.

        Args:
            verb: str. The calling verb, named in the error.

        Example:
        >>> import zoo
        >>> vocab = ["[PAD]", "[UNK]", "[START]", "[END]", "light", "luz"]
        >>> model = zoo.Seq2Seq(6, 6, embedding_dim=4, units=4)
        >>> model.generation_preprocessor("translate()")
        Traceback (most recent call last):
        ...
        ValueError: translate() needs a preprocessor (its start/end/pad token ids and sequence length). Received: preprocessor=None
        >>> model.preprocessor = zoo.TranslationPreprocessor(vocab, vocab, sequence_length=8)
        >>> pre = model.generation_preprocessor()
        >>> pre.start_id, pre.end_id, pre.pad_id
        (2, 3, 0)
        """
        if getattr(self, "preprocessor", None) is None:
            raise ValueError(
                f"{verb} needs a preprocessor (its start/end/pad token ids and "
                "sequence length). Received: preprocessor=None"
            )
        return self.preprocessor

    def generate(
        self,
        inputs,
        beam_width=1,
        max_length=None,
        length_penalty=0.0,
        coverage_penalty=0.0,
        return_attention=False,
        batch_size=None,
        sampler=None,
    ):
        """Generates token ids from prepared inputs: a greedy or beam search, or draws.

        Args:
            inputs: the prepared source, as `encode` takes it (e.g. token ids
                `(batch, S)` from the preprocessor, or images).
            beam_width: int. `1` (or `None`) decodes greedily. Defaults to `1`.
            max_length: int. Decoding steps; defaults to the preprocessor's
                `sequence_length`.
            length_penalty: float. GNMT length penalty alpha (beam search
                only). Defaults to `0.0`.
            coverage_penalty: float. GNMT coverage penalty beta (beam search
                only), computed from the attention `next` returns. Defaults
                to `0.0`.
            return_attention: bool. Also return the attention of the chosen
                tokens (see `token_attention`). Defaults to `False`.
            batch_size: int. The rows the compiled search runs: under JAX,
                where each new shape compiles the search again, a batch
                with fewer rows runs padded with copies of its last row
                (they end with it, and are dropped from the output), so
                that the chunks of one long input (`translate`, `caption`)
                share a compilation. Ignored by the other backends and by
                a larger batch. Defaults to the batch's own rows.
            sampler: optional `keras_attention.decoding` sampler
                (`RandomSampler`, `TopKSampler`, `TopPSampler`): draws each
                token instead of searching (`beam_width` and the penalties
                are then unused). Defaults to `None`.

        Returns:
            int32 NumPy array `(batch, max_length + 1)` that starts with the
            start token and holds the pad id after each sequence's end
            token; with `return_attention`, also a float32 array
            `(batch, max_length, S)`.

        Example:
        >>> import numpy as np, zoo
        >>> vocab = ["[PAD]", "[UNK]", "[START]", "[END]", "light", "luz"]
        >>> pre = zoo.TranslationPreprocessor(vocab, vocab, sequence_length=8)
        >>> model = zoo.Seq2Seq(6, 6, embedding_dim=4, units=4, preprocessor=pre)
        >>> ids = np.array([[4, 3, 0], [4, 4, 3]])  # "light", "light light"
        >>> tokens, attention = model.generate(ids, max_length=3, return_attention=True)
        >>> tokens.shape, tokens[:, 0].tolist(), attention.shape  # [START] = 2
        ((2, 4), [2, 2], (2, 3, 3))
        >>> len(pre.detokenize(tokens[:, 1:]))  # the ids back to sentences
        2
        """
        pre = self.generation_preprocessor()
        batch = int(ops.shape(tree.flatten(inputs)[0])[0])
        beam_width, max_length, batch_size = decoding_options(
            beam_width,
            max_length,
            batch if batch_size is None else batch_size,
            pre.sequence_length,
        )
        sampler, _ = sampling_options(sampler, 1)
        search = make_search(
            beam_width,
            sampler=sampler,
            length_penalty=length_penalty,
            coverage_penalty=coverage_penalty,
        )
        tokens = self.generate_with(search, inputs, max_length, batch_size)
        if return_attention:
            return tokens, self.token_attention(inputs, tokens)
        return tokens

    def generate_with(self, search, inputs, max_length, batch_size, seed=None):
        """`generate`'s token ids, from a search made and arguments checked.

        What a verb that decodes its input in chunks (`translate`,
        `caption`) calls for each chunk, having checked its arguments once
        (`decoding_options`) and made its search once (`make_search`).

        Args:
            search: a `GreedySearch`, `BeamSearch` or sampler
                (`keras_attention.decoding.RandomSampler` and subclasses).
            inputs: the prepared source, as `encode` takes it.
            max_length: int >= 1. Decoding steps.
            batch_size: int >= 1. The rows the compiled search runs (see
                `generate`).
            seed: optional int. A sampler's seed for this call, an input
                of the compiled search (one compilation for every seed);
                defaults to `sampling_seed(search)`. Ignored by a search.

        Returns:
            int32 NumPy array `(batch, max_length + 1)`, as `generate`;
            for a `BeamSearch(return_all_beams=True)` (`make_search` with
            `num_return_sequences > 1`) every hypothesis, best first,
            `(batch, beam_width, max_length + 1)`.

        Example:
        >>> import numpy as np, zoo
        >>> vocab = ["[PAD]", "[UNK]", "[START]", "[END]", "light", "luz"]
        >>> pre = zoo.TranslationPreprocessor(vocab, vocab, sequence_length=8)
        >>> model = zoo.Seq2Seq(6, 6, embedding_dim=4, units=4, preprocessor=pre)
        >>> ids = np.array([[4, 3, 0], [4, 4, 3]])
        >>> tokens = model.generate_with(
        ...     make_search(2, length_penalty=0.0), ids, 3, batch_size=2)
        >>> bool((tokens == model.generate(ids, beam_width=2, max_length=3)).all())
        True
        """
        pre = self.generation_preprocessor()
        batch = int(ops.shape(tree.flatten(inputs)[0])[0])
        prompt = np.full((batch, max_length + 1), pre.pad_id, "int32")
        prompt[:, 0] = pre.start_id
        run = self._search_function(search, pre.end_id, pre.pad_id)
        rows = max(batch, batch_size)
        if not isinstance(search, RandomSampler):
            return ops.convert_to_numpy(run(inputs, prompt, rows))
        if seed is None:
            seed = sampling_seed(search)
        seed = ops.convert_to_tensor(seed, "int32")
        return ops.convert_to_numpy(run(inputs, prompt, rows, seed))

    def _search_function(self, search, end_id, pad_id):
        """`run(inputs, prompt, rows[, seed]) -> tokens`, compiled once per search.

        A sampler's seed is an input (`seed`), not part of the key.
        """
        config = search.get_config()
        config.pop("seed", None)
        key = (type(search).__name__, tuple(sorted(config.items())))
        key += (int(end_id), int(pad_id))
        functions = self.__dict__.setdefault("_zoo_search_functions", {})
        if key not in functions:
            options = self.search_options(search)

            def run(inputs, prompt, *seed):
                tokens = self.run_search(
                    search,
                    inputs,
                    prompt,
                    stop_token_ids=[int(end_id)],
                    pad_token_id=int(pad_id),
                    **({"seed": seed[0]} if seed else {}),
                    **options,
                )
                if getattr(search, "return_all_beams", False):
                    return tokens[0]  # The hypotheses; not their scores.
                return tokens

            functions[key] = _compiled(self, run)
        return functions[key]

    def run_search(self, search, inputs, prompt, cache=None, **kwargs):
        """Runs a `keras_attention.decoding` search over `encode` and `next`.

        The cache entries named in `static_cache_keys` go to the search as
        its `static_cache`; `next` still sees the whole cache.

        Args:
            search: a `GreedySearch` or `BeamSearch`.
            inputs: the prepared source, as `encode` takes it.
            prompt: int tensor `(batch, max_length + 1)` holding the start
                token at position 0.
            cache: optional. What `encode(inputs, max_length)` returned,
                for a caller that needs it again (e.g. to re-run `next` over
                the chosen tokens); `None` encodes `inputs` here.
            **kwargs: the search's other call arguments (`stop_token_ids`,
                `pad_token_id`, `return_scores`, a sampler's `seed`).

        Returns:
            What the search returns (the token ids, and the scores with
            `return_scores=True`).

        Example (a beam search run eagerly, with its scores):
        >>> import numpy as np, zoo
        >>> from keras_attention.decoding import BeamSearch
        >>> model = zoo.Seq2Seq(6, 6, embedding_dim=4, units=4)
        >>> prompt = np.array([[2, 0, 0, 0]] * 2, "int32")  # [START], 3 steps
        >>> tokens, scores = model.run_search(
        ...     BeamSearch(beam_width=2), np.array([[4, 4, 3], [4, 3, 0]]), prompt,
        ...     stop_token_ids=[3], pad_token_id=0, return_scores=True)
        >>> tuple(tokens.shape), tuple(scores.shape)
        ((2, 4), (2,))
        """
        if cache is None:
            cache = self.encode(inputs, ops.shape(prompt)[1] - 1)
        static_keys = []
        if isinstance(cache, dict):
            static_keys = [key for key in self.static_cache_keys if key in cache]
        if not static_keys:
            return search(self.next, prompt, cache=cache, index=1, **kwargs)
        static = {key: cache[key] for key in static_keys}

        def next(prompt, cache, index, static):
            logits, attention, cache = self.next(prompt, {**cache, **static}, index)
            cache = {key: value for key, value in cache.items() if key not in static}
            return logits, attention, cache

        cache = {key: value for key, value in cache.items() if key not in static}
        return search(next, prompt, cache=cache, index=1, static_cache=static, **kwargs)

    def token_attention(self, inputs, tokens):
        """The attention of given tokens: `next` re-run, teacher-forced, once.

        The re-run is compiled as the search is (see the class docstring),
        its batch padded to a power of two rows on JAX: few shapes compile.

        Args:
            inputs: the prepared source, as for `generate`.
            tokens: int array `(batch, T + 1)` starting with the start token
                (as `generate` returns it).

        Returns:
            float32 NumPy array `(batch, T, S)`: row `t` is the attention of
            the step that produced `tokens[:, t + 1]`.

        Example (the alignment of a given translation, e.g. a reference):
        >>> import numpy as np, zoo
        >>> model = zoo.Seq2Seq(6, 6, embedding_dim=4, units=4)
        >>> source = np.array([[4, 4, 3]])  # light light [END]
        >>> tokens = np.array([[2, 5, 5, 3]])  # [START] luz luz [END]
        >>> weights = model.token_attention(source, tokens)
        >>> weights.shape, bool(np.allclose(weights.sum(-1), 1.0, atol=1e-5))
        ((1, 3, 3), True)
        """
        tokens = np.asarray(tokens, "int32")
        if getattr(self, "preprocessor", None) is None:  # no pad id: eagerly
            return ops.convert_to_numpy(self._replayed_attention(inputs, tokens))
        functions = self.__dict__.setdefault("_zoo_search_functions", {})
        if "token_attention" not in functions:
            functions["token_attention"] = _compiled(self, self._replayed_attention)
        # Batch sizes rounded up to a power of two: few compilations on JAX.
        rows = 1 << (len(tokens) - 1).bit_length()
        weights = ops.convert_to_numpy(
            functions["token_attention"](inputs, tokens, rows)
        )
        if keras.backend.backend() == "jax":  # JAX's source padding, cut
            source = tree.flatten(inputs)[0]
            padded = self.padded_source(inputs, SOURCE_LENGTH_MULTIPLE)
            extra = tree.flatten(padded)[0].shape[-1] - source.shape[-1]
            weights = weights[..., : weights.shape[-1] - extra]
        return weights

    def _replayed_attention(self, inputs, tokens):
        """`token_attention`'s loop: `next` over `tokens`, `(batch, T, S)`."""
        steps = ops.shape(tokens)[1] - 1
        cache = self.encode(inputs, steps)
        _, attention, cache = self.next(tokens, cache, 1)
        attention = ops.cast(attention, "float32")
        rows = ops.zeros((ops.shape(attention)[0], steps, ops.shape(attention)[1]))
        rows = ops.slice_update(rows, (0, 0, 0), attention[:, None])

        def step(index, state):
            rows, cache = state
            _, attention, cache = self.next(tokens, cache, index)
            update = ops.cast(attention, "float32")[:, None]
            return ops.slice_update(rows, (0, index - 1, 0), update), cache

        return ops.fori_loop(2, steps + 1, step, (rows, cache))[0]


def padded_rows(x, rows):
    """`x` with `rows` rows along its first axis: its last row repeated.

    What the compiled search of `GenerativeTask.generate` runs under JAX
    (see its `batch_size`): a copied row decodes as its original does and
    ends with it, so it adds no step; the copies are dropped after.

    Args:
        x: an array (or tensor) with at least one row.
        rows: int >= `len(x)`.

    Returns:
        A NumPy array `(rows, ...)`, or `x` itself if it has `rows` rows.

    Example:
    >>> padded_rows(np.array([[4, 3], [5, 3]]), 4).tolist()
    [[4, 3], [5, 3], [5, 3], [5, 3]]
    """
    if len(x) == rows:
        return x
    x = np.asarray(x)
    return np.concatenate([x, np.repeat(x[-1:], rows - len(x), axis=0)])


def _compiled(model, run):
    """`run(inputs, prompt, *seed)` compiled, as `(inputs, prompt, rows, *seed)`.

    See `GenerativeTask`; `rows` is the batch size a JAX search runs;
    `seed` (a sampler's, a scalar int32 tensor) is an input of the
    compiled function.
    """
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        graph = tf.function(run, reduce_retracing=True)
        return lambda inputs, prompt, rows, *seed: graph(
            inputs, ops.convert_to_tensor(prompt), *seed
        )
    if backend == "jax":
        import jax

        variables = model.variables

        @jax.jit
        def jitted_search(values, inputs, prompt, *seed):
            with keras.StatelessScope(state_mapping=list(zip(variables, values))):
                return run(inputs, prompt, *seed)

        def padded_run(inputs, prompt, rows, *seed):
            # One shape for near source lengths and for a call's chunks.
            inputs = model.padded_source(inputs, SOURCE_LENGTH_MULTIPLE)
            # Prepared inputs may be TensorFlow's tensors (`tf.data`).
            inputs, padded = tree.map_structure(
                lambda x: ops.convert_to_tensor(padded_rows(x, rows)), (inputs, prompt)
            )
            tokens = jitted_search([v.value for v in variables], inputs, padded, *seed)
            return tokens[: len(prompt)]

        return padded_run
    if backend == "torch":
        import torch

        def without_gradients(inputs, prompt, rows, *seed):
            with torch.no_grad():
                return run(inputs, ops.convert_to_tensor(prompt), *seed)

        return without_gradients
    return lambda inputs, prompt, rows, *seed: run(
        inputs, ops.convert_to_tensor(prompt), *seed
    )
