"""`TranslationTask`: the user verbs every translation model shares."""

import numpy as np

from zoo import quiet
from zoo.base import raw_inputs as inputs
from zoo.base.generation import (
    GenerativeTask,
    as_texts,
    best_sequences,
    chunk_seed,
    decoding_options,
    make_search,
    repeated,
    sampling_options,
    sampling_seed,
)
from zoo.base.truncation import warn_unfinished
from zoo.data import bible
from zoo.serving.export import read_metadata

# Imported for its registration: a translator's preset stores its preprocessor.
from zoo.translation import preprocessor, summary  # noqa: F401
from zoo.translation.data import evaluate_translations
from zoo.translation.export import export_translator

tf = quiet.LazyModule("tensorflow", "Translating text (the WordPiece tokenizers)")


class TranslationTask(GenerativeTask):
    """The translation kind: a generative task that reads and writes text.

    Its user verb is `translate()` (`python -m zoo translate`); its export
    is `zoo.translation.export.export_translator`; `evaluate_split` scores
    sacreBLEU BLEU and chrF on the Bible verses.

    Subclasses (`zoo.Seq2Seq`, `zoo.Transformer`) supply the network,
    `encode(encoder_token_ids, max_length)` and `next(prompt, cache, index)`
    (see `zoo.base.generation.GenerativeTask`) and a
    `zoo.translation.TranslationPreprocessor`; this class turns sentences
    into source ids, decodes them with `generate` in batches of similar
    length, and turns the ids back into sentences, with the attention
    alignments when asked.

    `predict` keeps Keras's meaning (the next-token logits of prepared
    inputs, `{"encoder_token_ids", "decoder_token_ids"}`, or of raw
    `(source, target)` pairs read by the preprocessor); given source
    sentences alone it raises a `ValueError` that says to call `translate`,
    since a translation is a search, not one forward pass.

    Example:
    >>> import zoo
    >>> vocab = ["[PAD]", "[UNK]", "[START]", "[END]", "light", "luz"]
    >>> pre = zoo.TranslationPreprocessor(vocab, vocab, sequence_length=8)
    >>> model = zoo.Seq2Seq(6, 6, embedding_dim=4, units=4, preprocessor=pre)
    >>> isinstance(model, TranslationTask)
    True
    >>> type(model.translate("light", max_length=3)).__name__
    'str'
    >>> model.predict(["light"])
    Traceback (most recent call last):
    ...
    ValueError: predict() gives the next-token logits of prepared inputs (the preprocessor's output); to translate source sentences call `model.translate(texts)`. Received: x=['light']
    """

    kind = "translation"
    verbs = ("translate",)

    def export_serving(self, filepath, **options):
        """Writes the translator export (`export_translator`); its description.

        `model.export(path)` calls it; the options are `export_translator`'s.

        Example:
        >>> import tempfile
        >>> import zoo
        >>> vocab = ["[PAD]", "[UNK]", "[START]", "[END]", "light", "luz"]
        >>> pre = zoo.TranslationPreprocessor(vocab, vocab, sequence_length=8)
        >>> model = zoo.Seq2Seq(6, 6, embedding_dim=4, units=4, preprocessor=pre)
        >>> model.export_serving(tempfile.mkdtemp(), beam_width=0)
        Traceback (most recent call last):
        ...
        ValueError: `beam_width` must be an int >= 1. Received: beam_width=0
        """
        export_translator(self, filepath, **options)
        return read_metadata(filepath)

    def evaluate_split(
        self, split="test", limit=None, beam_width=4, sword_path=None, data_path=None
    ):
        """Greedy and beam BLEU/chrF on a Bible split (`evaluate_translations`).

        The verses are read from the SWORD modules at `sword_path` (default:
        the Debian folder); see `Task.evaluate_split` for the arguments.

        Example:
        >>> import zoo
        >>> vocab = ["[PAD]", "[UNK]", "[START]", "[END]", "light", "luz"]
        >>> pre = zoo.TranslationPreprocessor(vocab, vocab, sequence_length=8)
        >>> model = zoo.Seq2Seq(6, 6, embedding_dim=4, units=4, preprocessor=pre)
        >>> model.evaluate_split("nope")
        Traceback (most recent call last):
        ...
        ValueError: split must be one of ['train', 'validation', 'test', 'all']. Received: split='nope'
        """
        options = {} if sword_path is None else {"sword_path": sword_path}
        pairs = [(en, es) for en, es, _ in bible.load_pairs(split, **options)]
        return evaluate_translations(self, pairs, beam_width, limit)

    @classmethod
    def metrics_summary(cls, metrics):
        """BLEU and chrF of each decoding in a preset's test metrics.

        Example:
        >>> TranslationTask.metrics_summary(
        ...     {"test": {"beam4": {"bleu": 20.5, "chrf": 44.25}}})
        'beam4: BLEU 20.50 chrF 44.25'
        """
        return summary.metrics_summary(metrics)

    def translate(
        self,
        texts,
        beam_width=4,
        max_length=None,
        length_penalty=0.6,
        coverage_penalty=0.0,
        batch_size=64,
        return_attention=False,
        sampler=None,
        num_return_sequences=1,
    ):
        """Translates source sentences, by a search or by drawing (sampling).

        Sentences are decoded in batches of similar source length; the
        output keeps the input order.

        Args:
            texts: str or list of str.
            beam_width: int. `1` (or `None`) decodes greedily. Defaults to `4`.
            max_length: int. Longest output in subwords; defaults to the
                preprocessor's `target_sequence_length`.
            length_penalty: float. GNMT length penalty alpha. Defaults to
                `0.6`.
            coverage_penalty: float. GNMT coverage penalty beta, from the
                model's attention. Defaults to `0.0`.
            batch_size: int. Sentences decoded together. Defaults to `64`.
            return_attention: bool. Also return, per sentence, a dict with
                the alignment matrix `weights` `(target, source)` (the
                attention of each generated subword over the source
                subwords) and the `source_tokens` / `target_tokens` labels.
                Defaults to `False`.
            sampler: optional `keras_attention.decoding` sampler
                (`TopKSampler(k=5)`, `TopPSampler(p=0.9)`, `RandomSampler()`,
                or `zoo.base.generation.make_sampler(top_k, top_p,
                temperature, seed)`): draws each subword instead of the beam
                search (`beam_width` and the penalties are then unused), as
                keras-hub's `generate(..., sampler=...)`. Its seed
                reproduces a call (same inputs and `batch_size`); without
                one each call draws anew. Defaults to `None`.
            num_return_sequences: int. Translations per sentence,
                consecutive in the output as in Hugging Face's `generate`:
                a `sampler`'s draws, or without one the best finished
                hypotheses of the beam search, best first (at most
                `beam_width`). Defaults to `1`.

        Returns:
            A list of strings (a string for a single input and one
            sequence; `num_return_sequences` strings per input, in a row),
            and the alignments when asked (one per string).

        Example:
        >>> import zoo
        >>> model = zoo.Seq2Seq.from_preset("seq2seq_bahdanau_bible_en_es")
        >>> model.translate("Jesus wept.")
        'Y Jesús lloró.'
        >>> text, alignment = model.translate("Jesus wept.", return_attention=True)
        >>> alignment["source_tokens"], alignment["weights"].shape
        (['Jesus', 'wept', '.', '[END]'], (5, 4))
        """
        pre = self.generation_preprocessor("translate()")
        texts, single = as_texts(texts)
        beam_width, max_length, batch_size = decoding_options(
            beam_width, max_length, batch_size, pre.target_sequence_length
        )
        sampler, count = sampling_options(sampler, num_return_sequences, beam_width)
        if not texts:
            return ([], []) if return_attention else []
        search = make_search(
            beam_width,
            sampler=sampler,
            num_return_sequences=count,
            length_penalty=length_penalty,
            coverage_penalty=coverage_penalty,
        )
        seed = sampling_seed(sampler)
        pad = pre.source_pad_id
        ids = [
            row[row != pad]
            for row in np.asarray(pre(tf.constant(texts))["encoder_token_ids"])
        ]
        # A sampler draws each output of a sentence from its own row; a beam
        # search returns a sentence's best `count` from one row.
        per_row = 1 if sampler is not None else count
        ids = repeated(ids, count // per_row)
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        outputs, alignments = (
            [None] * (len(ids) * per_row),
            [None] * (len(ids) * per_row),
        )
        generated = []
        for begin in range(0, len(order), batch_size):
            chunk = order[begin : begin + batch_size]
            batch = np.full((len(chunk), max(len(ids[i]) for i in chunk)), pad, "int32")
            for row, i in enumerate(chunk):
                batch[row, : len(ids[i])] = ids[i]
            tokens = self.generate_with(
                search,
                batch,
                max_length,
                batch_size=min(batch_size, len(ids)),  # one shape per call
                seed=chunk_seed(seed, len(generated)),
            )
            tokens = best_sequences(tokens, count)
            generated.append(tokens)
            rows = [i * per_row + k for i in chunk for k in range(per_row)]
            for i, text in zip(rows, pre.detokenize(tokens[:, 1:])):
                outputs[i] = text
            if return_attention:
                batch = repeated(batch, per_row)
                for i, alignment in zip(rows, self.alignments(batch, tokens)):
                    alignments[i] = alignment
        warn_unfinished(generated, pre.end_id, max_length, "translations")
        if single and count == 1:
            outputs, alignments = outputs[0], alignments[0]
        return (outputs, alignments) if return_attention else outputs

    def padded_source(self, inputs, multiple):
        """Source ids padded with `[PAD]` to a length that divides by `multiple`.

        What `generate` pads under JAX so that batches of near source
        lengths share one compiled search (see
        `GenerativeTask.padded_source`); the encoder and the attention
        mask the padding as they mask any.

        Args:
            inputs: int array `(batch, S)` of source ids, or the
                preprocessor's dict holding `encoder_token_ids`.
            multiple: int >= 1.

        Returns:
            The inputs with `(batch, S')` ids, `S'` the least multiple of
            `multiple` that is `>= S`.

        Example:
        >>> import zoo
        >>> vocab = ["[PAD]", "[UNK]", "[START]", "[END]", "light", "luz"]
        >>> pre = zoo.TranslationPreprocessor(vocab, vocab, sequence_length=8)
        >>> model = zoo.Seq2Seq(6, 6, embedding_dim=4, units=4, preprocessor=pre)
        >>> model.padded_source(np.array([[4, 4, 3]], "int32"), 4)
        array([[4, 4, 3, 0]], dtype=int32)
        >>> model.padded_source({"encoder_token_ids": [[4, 3, 0]]}, 4)
        {'encoder_token_ids': array([[4, 3, 0, 0]])}
        """
        if isinstance(inputs, dict):
            ids = self.padded_source(inputs["encoder_token_ids"], multiple)
            return {**inputs, "encoder_token_ids": ids}
        ids = np.asarray(inputs)
        extra = -ids.shape[-1] % multiple
        pad = self.generation_preprocessor().source_pad_id
        return np.pad(ids, [(0, 0), (0, extra)], constant_values=pad)

    def alignments(self, encoder_token_ids, tokens):
        """The labelled attention of generated tokens, one dict per sentence.

        Args:
            encoder_token_ids: int array `(batch, S)`, the source ids.
            tokens: int array `(batch, T + 1)` from `generate`.

        Returns:
            A list of dicts: `weights` `(target, source)` cropped to the
            sentence's real tokens (up to `[END]`), `source_tokens` and
            `target_tokens` (see `TranslationPreprocessor.alignment`).

        Example:
        >>> import zoo
        >>> vocab = ["[PAD]", "[UNK]", "[START]", "[END]", "light", "luz"]
        >>> pre = zoo.TranslationPreprocessor(vocab, vocab, sequence_length=8)
        >>> model = zoo.Seq2Seq(6, 6, embedding_dim=4, units=4, preprocessor=pre)
        >>> source = np.array([[4, 3, 0]], "int32")  # light [END] [PAD]
        >>> tokens = np.array([[2, 5, 3, 0]], "int32")  # [START] luz [END] [PAD]
        >>> alignment = model.alignments(source, tokens)[0]
        >>> alignment["source_tokens"], alignment["target_tokens"]
        (['light', '[END]'], ['luz', '[END]'])
        >>> weights = alignment["weights"]  # (target, source), padding cut
        >>> weights.shape, bool(np.allclose(weights.sum(-1), 1.0))
        ((2, 2), True)
        """
        weights = self.token_attention(encoder_token_ids, tokens)
        encoder_token_ids = np.asarray(encoder_token_ids)
        return [
            self.preprocessor.alignment(encoder_token_ids[b], tokens[b, 1:], weights[b])
            for b in range(len(tokens))
        ]

    def predict(self, x, batch_size=None, **kwargs):
        """Next-token logits of prepared inputs (Keras's `predict`).

        Args:
            x: `{"encoder_token_ids", "decoder_token_ids"}` int arrays, or a
                `tf.data.Dataset` of them. Raw sentences (alone or in
                pairs, whose targets `predict` drops) lack the decoder
                input: call `translate`.
            batch_size: optional int, as in `keras.Model.predict`.
            **kwargs: `keras.Model.predict` arguments.

        Returns:
            float array `(batch, target_length, target_vocabulary_size)`.

        Raises:
            ValueError: `x` holds source sentences (a str, a list or array
                of str, or raw pairs): call `translate`, which searches for
                the output, instead.

        Example:
        >>> import zoo
        >>> vocab = ["[PAD]", "[UNK]", "[START]", "[END]", "light", "luz"]
        >>> pre = zoo.TranslationPreprocessor(vocab, vocab, sequence_length=8)
        >>> model = zoo.Seq2Seq(6, 6, embedding_dim=4, units=4, preprocessor=pre)
        >>> x, labels, _ = pre(tf.constant(["light"]), tf.constant(["luz"]))
        >>> x["decoder_token_ids"].numpy().tolist()  # [START] luz
        [[2, 5]]
        >>> model.predict(x, verbose=0).shape  # a next-token distribution per input
        (1, 2, 6)
        >>> model.predict("light")
        Traceback (most recent call last):
        ...
        ValueError: predict() gives the next-token logits of prepared inputs (the preprocessor's output); to translate source sentences call `model.translate(texts)`. Received: x='light'
        """
        if _source_sentences(x):
            raise ValueError(
                "predict() gives the next-token logits of prepared inputs (the "
                "preprocessor's output); to translate source sentences "
                f"call `model.translate(texts)`. Received: x={_shown(x)}"
            )
        return super().predict(x, batch_size=batch_size, **kwargs)


def _source_sentences(x):
    """Whether `x` is one sentence or a flat sequence / array of sentences."""
    if isinstance(x, (str, bytes)):
        return True
    if isinstance(x, np.ndarray):
        return x.dtype.kind in "USO" and x.ndim <= 1
    if inputs.is_dataset(x):
        spec = x.element_spec
        return isinstance(spec, tf.TensorSpec) and spec.dtype == tf.string
    if quiet.tensorflow_imported() and isinstance(x, tf.Tensor):
        return x.dtype == tf.string and x.shape.rank <= 1
    if isinstance(x, (list, tuple)):
        return len(x) > 0 and all(isinstance(t, (str, bytes)) for t in x)
    return False


def _shown(x):
    text = repr(x if not isinstance(x, tuple) else list(x))
    return text if len(text) <= 80 else text[:77] + "..."
