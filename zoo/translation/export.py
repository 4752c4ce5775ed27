"""A translation task as a TensorFlow SavedModel: sentences in, sentences out.

`export_translator(task, path)` writes a SavedModel (through
`keras.export.ExportArchive`) whose graph holds the whole of
`TranslationTask.translate`: WordPiece tokenization and packing (the
preprocessor's keras-hub tokenizers, i.e. tensorflow-text ops), the encoder,
the greedy or beam search loop (`keras_attention.decoding`) and the
detokenization with the punctuation glued back. The artefact needs only
`tensorflow` and `tensorflow_text` to run:

    import tensorflow as tf
    import tensorflow_text  # registers the tokenizer ops

    translator = tf.saved_model.load(path)
    out = translator.signatures["serving_default"](text=tf.constant(["Jesus wept."]))
    out["translation"], out["score"]  # tf.string (batch,), float32 (batch,)
    out["input_truncated"], out["output_truncated"]  # bool (batch,)

Signatures:

- `serving_default` (also the endpoint `serve`): `text` tf.string
  `(batch,)` -> `{"translation": tf.string (batch,), "score": float32
  (batch,), "input_truncated": bool (batch,), "output_truncated": bool
  (batch,)}`, with the beam width and output length fixed at export.
  Nothing is cut silently: `input_truncated` is True where the sentence
  was longer than the model's `source_sequence_length` subwords (only its
  first `source_sequence_length - 1` were translated; `translate` warns of
  the same), `output_truncated` where the search reached `max_length`
  before the end token (the translation stops mid-sentence).
- `translate`: `text`, `beam_width` (int32 scalar, in `[1,
  beam_width_limit]`) and `max_length` (int32 scalar, in `[1,
  max_length_limit]`): the same with both chosen per call; beam width 1 is
  the greedy search, as in `translate`. The limits (16 and 256 by default)
  bound what one call can take, and are recorded in the description's
  `limits`.
- `sample`: `text`, `max_length` (as `translate`), `top_k` (int32, `>= 0`;
  `0` is no top-k cut, as in Hugging Face's `generate`), `top_p` (float32
  in `(0, 1]`; `1` is no nucleus cut), `temperature` (float32, finite and
  `> 0`), `seed` (int32 `>= 0`) and `num_return_sequences` (int32 in
  `[1, num_return_sequences_limit]`, 16 by default): the translations drawn
  by `keras_attention.decoding.TopPSampler(p=top_p, k=top_k,
  temperature=temperature)`, `num_return_sequences` per sentence in a row
  (the outputs have `batch * num_return_sequences` rows). A seed
  reproduces a call; `score` is the model's log-probability `log P(Y)`.
  The description records the limit in `sample_limits`.

Both refuse a `text` that is not a batch of sentences (rank 1).

The translations equal `task.translate(texts, beam_width=...)` for the same
settings when `translate` decodes the batch as one chunk (up to its
`batch_size`, 64 by default; it decodes larger lists in chunks of similar
length, whose float rounding may differ). `score` is what the search ranks
by: GNMT's `log P(Y) / lp(Y) + cp(Y)` for a beam, the log-probability
`log P(Y)` for the greedy search (`keras_attention.decoding`'s scores).

The export also writes `assets.extra/zoo_export.json` (the settings baked in
and the signatures), read by `zoo.serving.export.load`.

Reference:
    OpenNMT-tf's `SavedModelExporter` / `serve_function` (a translation
    model exported with its vocabulary lookup and beam search in the
    graph), and Keras's `keras.export.ExportArchive`.
"""

import os

import keras

from keras_attention.arguments import int_argument
from keras_attention.decoding import BeamSearch, TopPSampler
from zoo import quiet
from zoo.base import backends
from zoo.base.generation import decoding_options, make_search
from zoo.serving.export import write_metadata
from zoo.translation.preprocessor import RESERVED_TOKENS

tf = quiet.LazyModule("tensorflow", "Exporting a translator (a SavedModel)")

# `glue_punctuation` in RE2, the regex engine of `tf.strings.regex_replace`:
# Python's Unicode `\w` becomes `[\pL\pN_]` (RE2's `\w` is ASCII only) and
# the hyphen rule, written with a lookahead in Python (RE2 has none), joins
# `a - b` with both words captured; a second pass joins what the first left
# in chains such as `a - b - c`.
_SPACE_BEFORE = r" ([.,;:!?)\]»”’])"
_SPACE_AFTER = r"([(\[¿¡«“]) "
_SPACED_HYPHEN = r"([\pL\pN_]) - ([\pL\pN_])"


def glue_punctuation_graph(texts):
    """`zoo.translation.glue_punctuation` on a string tensor, in TF ops.

    Args:
        texts: tf.string tensor of any shape.

    Returns:
        The texts with the spaces around punctuation removed, as
        `glue_punctuation` removes them.

    Example:
    >>> import tensorflow as tf
    >>> out = glue_punctuation_graph(tf.constant(["¿ quién fue a Beth - lehem ?"]))
    >>> out.numpy()[0].decode()
    '¿quién fue a Beth-lehem?'
    """
    texts = tf.strings.regex_replace(texts, _SPACE_BEFORE, r"\1")
    texts = tf.strings.regex_replace(texts, _SPACE_AFTER, r"\1")
    for _ in range(2):
        texts = tf.strings.regex_replace(texts, _SPACED_HYPHEN, r"\1-\2")
    return texts


class _Translator:
    """`texts -> (translations, scores)` of a task, traced into the export."""

    def __init__(self, task, length_penalty, coverage_penalty):
        pre = task.generation_preprocessor("export_translator()")
        self.task = task
        self.preprocessor = pre
        self.length_penalty = length_penalty
        self.coverage_penalty = coverage_penalty
        tokenizer = pre.target_tokenizer
        self.special_ids = tf.constant(
            [tokenizer.token_to_id(t) for t in RESERVED_TOKENS], tf.int32
        )

    def decode(self, source, search, max_length, **kwargs):
        """Token ids `(batch, max_length + 1)` and scores of a search."""
        pre = self.preprocessor
        batch = tf.shape(source)[0]
        prompt = tf.concat(
            [
                tf.fill([batch, 1], tf.constant(pre.start_id, tf.int32)),
                tf.fill([batch, max_length], tf.constant(pre.pad_id, tf.int32)),
            ],
            axis=1,
        )
        tokens, scores = self.task.run_search(
            search,
            source,
            prompt,
            stop_token_ids=[int(pre.end_id)],
            pad_token_id=int(pre.pad_id),
            return_scores=True,
            **kwargs,
        )
        return tf.cast(tokens, tf.int32), tf.cast(scores, tf.float32)

    def detokenize(self, tokens):
        """Generated ids (after `[START]`) -> sentences, as `detokenize` does."""
        end = self.preprocessor.end_id
        before_end = tf.cumsum(tf.cast(tokens == end, tf.int32), axis=1) == 0
        special = tf.reduce_any(
            tokens[:, :, None] == self.special_ids[None, None, :], axis=-1
        )
        kept = tf.ragged.boolean_mask(tokens, before_end & ~special)
        texts = self.preprocessor.target_tokenizer.detokenize(kept)
        return glue_punctuation_graph(texts)

    def __call__(self, text, beam_width, max_length, sampling=None):
        """Translations, scores and truncation flags of `text` (tf.string `(batch,)`).

        `sampling` (the `sample` signature's): `(sampler, seed, count)`,
        drawing `count` translations per sentence instead of searching.
        """
        source, input_truncated = self.preprocessor.pack_source(text)
        source = tf.cast(source, tf.int32)
        # Greedy for width 1 as in `translate`, a beam for the others.
        search = make_search(
            beam_width,
            length_penalty=self.length_penalty,
            coverage_penalty=self.coverage_penalty,
        )
        options = {}
        if sampling is not None:
            search, seed, count = sampling
            source = tf.repeat(source, count, axis=0)
            input_truncated = tf.repeat(input_truncated, count, axis=0)
            options["seed"] = seed
        options.update(self.task.search_options(search))
        tokens, scores = self.decode(source, search, max_length, **options)
        generated = tokens[:, 1:]
        ended = tf.reduce_any(generated == self.preprocessor.end_id, axis=1)
        return {
            "translation": self.detokenize(generated),
            "score": scores,
            "input_truncated": input_truncated,
            "output_truncated": tf.logical_not(ended),
        }


def _within(value, name, limit, minimum=1):
    """`value` (an int32 scalar tensor), checked in `[minimum, limit]` when the graph runs.

    `limit=None`: no upper bound.
    """
    value = tf.ensure_shape(value, [])
    checks = [
        tf.debugging.assert_greater_equal(
            value,
            tf.constant(minimum, tf.int32),
            message=f"`{name}` must be an int >= {minimum}",
        )
    ]
    if limit is not None:
        checks.append(
            tf.debugging.assert_less_equal(
                value,
                tf.constant(limit, tf.int32),
                message=f"`{name}` must be <= {limit} (this export's limit)",
            )
        )
    with tf.control_dependencies(checks):
        return tf.identity(value)


def _positive(value, name, maximum=None):
    """`value` (a float32 scalar tensor), checked finite, `> 0` and `<= maximum`."""
    value = tf.ensure_shape(value, [])
    accepted = "a finite float > 0" + ("" if maximum is None else f" and <= {maximum}")
    message = f"`{name}` must be {accepted}"
    checks = [
        tf.debugging.assert_all_finite(value, message=message),
        tf.debugging.assert_greater(value, tf.constant(0.0), message=message),
    ]
    if maximum is not None:
        checks.append(
            tf.debugging.assert_less_equal(
                value, tf.constant(maximum, tf.float32), message=message
            )
        )
    with tf.control_dependencies(checks):
        return tf.identity(value)


def _sampling(vocabulary_size, top_k, top_p, temperature, seed, count, count_limit):
    """The `sample` signature's `(sampler, seed, count)`, checked in the graph."""
    top_k = _within(top_k, "top_k", None, minimum=0)
    top_k = tf.where(top_k == 0, vocabulary_size, tf.minimum(top_k, vocabulary_size))
    sampler = TopPSampler(
        p=_positive(top_p, "top_p", maximum=1.0),
        k=top_k,
        temperature=_positive(temperature, "temperature"),
    )
    seed = _within(seed, "seed", None, minimum=0)
    return sampler, seed, _within(count, "num_return_sequences", count_limit)


def _sentences(text):
    """`text`, checked to be a batch of sentences (rank 1) when the graph runs.

    A loaded signature does not check its inputs' shapes: without this, a
    `(2, 2)` tensor would be translated as 4 sentences.
    """
    return tf.ensure_shape(text, [None])


def export_translator(
    task,
    path,
    beam_width=4,
    max_length=None,
    length_penalty=0.6,
    coverage_penalty=0.0,
    verbose=False,
    beam_width_limit=16,
    max_length_limit=None,
    num_return_sequences_limit=16,
):
    """Writes a translation task as a SavedModel with the search in the graph.

    Args:
        task: a `zoo.TranslationTask` (`zoo.Seq2Seq`, `zoo.Transformer`)
            with its preprocessor.
        path: str or path-like. The SavedModel directory to write.
        beam_width: int >= 1. The beam of `serving_default` (`1`: greedy).
            Defaults to `4`, as `translate`.
        max_length: int >= 1. The longest output of `serving_default`, in
            subwords. Defaults to the preprocessor's
            `target_sequence_length`, as `translate`.
        length_penalty: float. GNMT length penalty alpha of both
            signatures. Defaults to `0.6`, as `translate`.
        coverage_penalty: float. GNMT coverage penalty beta of both
            signatures. Defaults to `0.0`, as `translate`.
        verbose: bool. Print the endpoints written. Defaults to `False`.
        beam_width_limit: int. The largest `beam_width` the `translate`
            signature accepts (a larger one fails with an error naming the
            limit; `zoo.serving.server` refuses it with a 400). Bounds the memory
            of one call with `max_length_limit`. Defaults to `16`.
        max_length_limit: int. The largest `max_length` of `translate`
            and `sample`. Defaults to `max(256, max_length)`.
        num_return_sequences_limit: int. The largest `num_return_sequences`
            of `sample`. Defaults to `16`.

    Returns:
        The path, as a str. `assets.extra/zoo_export.json` there describes
        the export (`kind: "translation"`, the model class, the
        `serving_default` settings, the signatures).

    Raises:
        TypeError: `task` is not a `zoo.TranslationTask`, or a setting is
            not an int.
        ValueError: the task has no preprocessor, or a setting is out of
            range.
        zoo.base.backends.BackendError: the backend is not TensorFlow.
    """
    if getattr(task, "kind", None) != "translation":
        raise TypeError(
            "`task` must be a zoo.TranslationTask (zoo.Seq2Seq, zoo.Transformer). "
            f"Received: task={task!r}"
        )
    backends.require_tensorflow("export_translator() (a TensorFlow SavedModel)")
    pre = task.generation_preprocessor("export_translator()")
    beam_width, max_length, _ = decoding_options(
        beam_width, max_length, 1, pre.target_sequence_length
    )
    if max_length_limit is None:
        max_length_limit = max(256, max_length)
    beam_width_limit = int_argument("beam_width_limit", beam_width_limit)
    max_length_limit = int_argument("max_length_limit", max_length_limit)
    count_limit = int_argument("num_return_sequences_limit", num_return_sequences_limit)
    if beam_width > beam_width_limit or max_length > max_length_limit:
        raise ValueError(
            "`beam_width` and `max_length` must lie within `beam_width_limit` "
            f"and `max_length_limit`. Received: beam_width={beam_width}, "
            f"max_length={max_length}, beam_width_limit={beam_width_limit}, "
            f"max_length_limit={max_length_limit}"
        )
    # Checks the penalties now rather than while tracing.
    BeamSearch(2, length_penalty=length_penalty, coverage_penalty=coverage_penalty)
    translator = _Translator(task, length_penalty, coverage_penalty)
    text = tf.TensorSpec([None], tf.string, name="text")

    def serve(text):
        return translator(_sentences(text), beam_width, max_length)

    def translate(text, beam_width, max_length):
        beam_width = _within(beam_width, "beam_width", beam_width_limit)
        max_length = _within(max_length, "max_length", max_length_limit)
        return translator(_sentences(text), beam_width, max_length)

    vocabulary_size = pre.target_tokenizer.vocabulary_size()

    def sample(text, max_length, top_k, top_p, temperature, seed, num_return_sequences):
        max_length = _within(max_length, "max_length", max_length_limit)
        sampling = _sampling(
            vocabulary_size,
            top_k,
            top_p,
            temperature,
            seed,
            num_return_sequences,
            count_limit,
        )
        return translator(_sentences(text), 1, max_length, sampling=sampling)

    # The endpoints' variables are tracked as they are used; `track(task)`
    # would store every weight a second time (as Keras variables).
    archive = keras.export.ExportArchive()
    archive.add_endpoint("serve", serve, [text])
    archive.add_endpoint(
        "translate",
        translate,
        [
            text,
            tf.TensorSpec([], tf.int32, name="beam_width"),
            tf.TensorSpec([], tf.int32, name="max_length"),
        ],
    )
    archive.add_endpoint(
        "sample",
        sample,
        [
            text,
            tf.TensorSpec([], tf.int32, name="max_length"),
            tf.TensorSpec([], tf.int32, name="top_k"),
            tf.TensorSpec([], tf.float32, name="top_p"),
            tf.TensorSpec([], tf.float32, name="temperature"),
            tf.TensorSpec([], tf.int32, name="seed"),
            tf.TensorSpec([], tf.int32, name="num_return_sequences"),
        ],
    )
    archive.write_out(path, verbose=verbose)
    write_metadata(
        path,
        {
            "kind": "translation",
            "model": type(task).__name__,
            "beam_width": beam_width,
            "max_length": max_length,
            "length_penalty": float(length_penalty),
            "coverage_penalty": float(coverage_penalty),
            "source_sequence_length": pre.source_sequence_length,
            "signatures": ["serve", "translate", "sample"],
            "limits": {"beam_width": beam_width_limit, "max_length": max_length_limit},
            "sample_limits": {"num_return_sequences": count_limit},
        },
    )
    return os.fspath(path)
