"""Turns (source, target) sentence pairs into padded subword ids."""

import re

import keras
import numpy as np

from zoo import quiet
from zoo.base import raw_inputs as inputs
from zoo.base.preprocessor import Preprocessor
from zoo.base.teacher_forcing import teacher_forcing
from zoo.base.truncation import cut_rows, warn_truncated
from zoo.data import vocabulary as vocabularies

keras_hub = quiet.LazyModule(
    "keras_hub", "Tokenizing text (keras-hub's WordPiece tokenizer)", "keras-hub"
)
tf = quiet.LazyModule("tensorflow", "Tokenizing text (keras-hub's WordPiece tokenizer)")

RESERVED_TOKENS = vocabularies.DEFAULT_RESERVED_TOKENS
# WordPiece detokenization puts a space around every piece that was split
# off; punctuation is glued back to the word it belongs to.
_SPACE_BEFORE = re.compile(r" ([.,;:!?)\]»”’])")
_SPACE_AFTER = re.compile(r"([(\[¿¡«“]) ")
# A hyphen between two words joins them ("Beth-lehem"): in the Bible texts
# every hyphen is word-internal (658 in the Spanish training books, none
# spaced).
_SPACED_HYPHEN = re.compile(r"(\w) - (?=\w)")
# The truncation warning's advice, after the side's own setting.
_SETS_BOTH = " (or `preprocessor.sequence_length`, which sets both)"


def glue_punctuation(text):
    """Removes the spaces WordPiece detokenization puts around punctuation.

    Args:
        text: str. Subwords joined by spaces, as `WordPieceTokenizer.
            detokenize` returns them.

    Returns:
        The text with closing punctuation glued to the word before it,
        opening punctuation to the word after it, and hyphens to both.

    Example:
    >>> glue_punctuation("¿ quién fue a Beth - lehem ?")
    '¿quién fue a Beth-lehem?'
    """
    text = _SPACE_AFTER.sub(r"\1", _SPACE_BEFORE.sub(r"\1", text))
    return _SPACED_HYPHEN.sub(r"\1-", text)


@keras.saving.register_keras_serializable(package="zoo")
class TranslationPreprocessor(Preprocessor):
    """WordPiece-tokenizes and packs translation pairs inside `tf.data`.

    The source becomes `encoder_token_ids` (`tokens [END] [PAD]...`); the
    target becomes `decoder_token_ids` (`[START] tokens [PAD]...`) and the
    labels (`tokens [END] [PAD]...`, shifted by one), with a sample weight
    that is 0 on padding so it never counts in the loss or the metrics.
    Vocabularies are keras-hub `WordPieceTokenizer`s; they are saved as
    assets (`vocabulary.txt`) beside the preset, never inside the config.

    Args:
        source_tokenizer: a `keras_hub.tokenizers.WordPieceTokenizer` or a
            vocabulary (list of tokens or path to a file, one per line).
        target_tokenizer: the same for the target language.
        source_sequence_length: int >= 2. Longest encoder input in subwords,
            `[END]` included. Longer sources are truncated (see
            Truncation below). Settable. Defaults to `64`.
        target_sequence_length: int >= 2. Longest decoder input (and the
            default number of decoding steps), the same way. Settable.
            Defaults to `64`.
        sequence_length: optional int >= 2. Sets both lengths at once (it
            overrides the two above). Defaults to `None`.
        lowercase: bool. Lowercase text before tokenizing (vocabularies
            given as lists). Defaults to `False` (cased output).
        trim_padding: bool. Cut each batch to its longest row instead of
            the full sequence length, so padding does not dominate RNN
            time. Defaults to `True`.
        **kwargs: base layer arguments.

    Call arguments:
        x: string tensor `(batch,)` of source sentences.
        y: optional string tensor `(batch,)` of target sentences.
        sample_weight: ignored unless `y` is `None` (passed through).

    Returns:
        `{"encoder_token_ids"}` alone without `y`, else
        `(features, labels, sample_weight)`.

    Truncation: a source (or target) longer than its sequence length is
    cut. Each eager call that cuts sentences (`translate`, direct calls)
    warns (`UserWarning`) with the count, the setting and the length that
    would keep the longest whole; inside `tf.data` (`fit`, `evaluate`) and
    traced functions (exports) rows are cut silently (`zoo.base.truncation`).
    Raise the limit with `preprocessor.sequence_length = n` (both sides) or
    `source_sequence_length` / `target_sequence_length`: a model with an
    RNN or sinusoidal positions reads longer inputs as is.

    Example:
    >>> import tensorflow as tf
    >>> vocab = ["[PAD]", "[UNK]", "[START]", "[END]", "in", "the", "beginning",
    ...          "en", "el", "principio"]
    >>> pre = TranslationPreprocessor(vocab, vocab, 8, 8)
    >>> x, y, w = pre(tf.constant(["in the beginning"]), tf.constant(["en el principio"]))
    >>> x["encoder_token_ids"].numpy().tolist()  # tokens [END]
    [[4, 5, 6, 3]]
    >>> x["decoder_token_ids"].numpy().tolist()  # [START] tokens
    [[2, 7, 8, 9]]
    >>> y.numpy().tolist(), w.numpy().tolist()  # tokens [END], no padding
    ([[7, 8, 9, 3]], [[1.0, 1.0, 1.0, 1.0]])
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     short = TranslationPreprocessor(vocab, vocab, sequence_length=3)
    ...     ids = short(tf.constant(["in the beginning"]))["encoder_token_ids"]
    >>> ids.numpy().tolist()
    [[4, 5, 3]]
    >>> print(str(caught[0].message)[:70])
    1 of 1 source sentences were longer than source_sequence_length=3 subw
    >>> short.sequence_length = 8  # raises both lengths
    >>> short(tf.constant(["in the beginning"]))["encoder_token_ids"].numpy().tolist()
    [[4, 5, 6, 3]]

    Reference:
        Wu et al., 2016, "Google's Neural Machine Translation System"
        (WordPiece).
    """

    def __init__(
        self,
        source_tokenizer=None,
        target_tokenizer=None,
        source_sequence_length=64,
        target_sequence_length=64,
        lowercase=False,
        trim_padding=True,
        sequence_length=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if sequence_length is not None:
            _check_length("sequence_length", sequence_length)
            source_sequence_length = target_sequence_length = sequence_length
        self.lowercase = lowercase
        self.trim_padding = trim_padding
        self.source_tokenizer = vocabularies.as_tokenizer(
            source_tokenizer, lowercase, name="source_tokenizer"
        )
        self.target_tokenizer = vocabularies.as_tokenizer(
            target_tokenizer, lowercase, name="target_tokenizer"
        )
        self.source_sequence_length = source_sequence_length
        self.target_sequence_length = target_sequence_length

    @property
    def source_sequence_length(self):
        """int. Longest encoder input in subwords (`[END]` included); settable.

        Example:
        >>> pre = TranslationPreprocessor(source_sequence_length=32)
        >>> pre.source_sequence_length, pre.target_sequence_length
        (32, 64)
        >>> pre.source_sequence_length = 1
        Traceback (most recent call last):
        ...
        ValueError: `source_sequence_length` must be an int >= 2. Received: source_sequence_length=1
        """
        return self._source_sequence_length

    @source_sequence_length.setter
    def source_sequence_length(self, value):
        self._source_sequence_length = _check_length("source_sequence_length", value)

    @property
    def target_sequence_length(self):
        """int. Longest decoder input in subwords (`[START]` included); settable.

        Example:
        >>> pre = TranslationPreprocessor(target_sequence_length=32)
        >>> pre.target_sequence_length = 48
        >>> pre.target_sequence_length, pre.source_sequence_length
        (48, 64)
        """
        return self._target_sequence_length

    @target_sequence_length.setter
    def target_sequence_length(self, value):
        self._target_sequence_length = _check_length("target_sequence_length", value)

    @property
    def sequence_length(self):
        """int. The target length (decoding steps); setting it sets both.

        Example:
        >>> pre = TranslationPreprocessor(source_sequence_length=16)
        >>> pre.sequence_length = 128
        >>> pre.source_sequence_length, pre.target_sequence_length
        (128, 128)
        """
        return self.target_sequence_length

    @sequence_length.setter
    def sequence_length(self, value):
        _check_length("sequence_length", value)
        self.source_sequence_length = self.target_sequence_length = value

    def _ids(self, tokenizer):
        if tokenizer.vocabulary is None:
            raise ValueError(
                f"{tokenizer.name} has no vocabulary yet: pass one, or load the "
                "preprocessor from a preset."
            )
        return [tokenizer.token_to_id(t) for t in RESERVED_TOKENS]

    def packers(self):
        """keras-hub `StartEndPacker`s for the source and the target.

            Made on demand (they hold only token ids) because the vocabularies
            may arrive after construction, from preset assets.

            Returns:
                `(source_packer, target_packer)`: the source packer appends
                `[END]`; the target packer, one position longer, adds `[START]`
                and `[END]` (for the decoder inputs and the shifted labels).

            Example:
        >>> vocab = ["[PAD]", "[UNK]", "[START]", "[END]", "in", "the", "beginning",
        ...          "en", "el", "principio"]
            >>> source, target = TranslationPreprocessor(vocab, vocab, 4, 4).packers()
            >>> source([[4, 5]]).numpy().tolist(), target([[7, 8]]).numpy().tolist()
            ([[4, 5, 3, 0]], [[2, 7, 8, 3, 0]])
        """
        pad, _, _, end = self._ids(self.source_tokenizer)
        t_pad, _, t_start, t_end = self._ids(self.target_tokenizer)
        source = keras_hub.layers.StartEndPacker(
            self.source_sequence_length, end_value=end, pad_value=pad
        )
        target = keras_hub.layers.StartEndPacker(
            self.target_sequence_length + 1,
            start_value=t_start,
            end_value=t_end,
            pad_value=t_pad,
        )
        return source, target

    def build(self, *args, **kwargs):
        self.built = True

    @property
    def target_start_id(self):
        """int. The target `[START]` id (also `start_id`).

            Example:
        >>> vocab = ["[PAD]", "[UNK]", "[START]", "[END]", "in", "the", "beginning",
        ...          "en", "el", "principio"]
            >>> pre = TranslationPreprocessor(vocab, vocab)
            >>> pre.target_start_id, pre.start_id
            (2, 2)
        """
        return self.target_tokenizer.token_to_id("[START]")

    @property
    def target_end_id(self):
        """int. The target `[END]` id (also `end_id`).

            Example:
        >>> vocab = ["[PAD]", "[UNK]", "[START]", "[END]", "in", "the", "beginning",
        ...          "en", "el", "principio"]
            >>> pre = TranslationPreprocessor(vocab, vocab)
            >>> pre.target_end_id, pre.end_id
            (3, 3)
        """
        return self.target_tokenizer.token_to_id("[END]")

    @property
    def target_pad_id(self):
        """int. The target `[PAD]` id (also `pad_id`).

            Example:
        >>> vocab = ["[PAD]", "[UNK]", "[START]", "[END]", "in", "the", "beginning",
        ...          "en", "el", "principio"]
            >>> pre = TranslationPreprocessor(vocab, vocab)
            >>> pre.target_pad_id, pre.pad_id
            (0, 0)
        """
        return self.target_tokenizer.token_to_id("[PAD]")

    @property
    def source_pad_id(self):
        """int. The source `[PAD]` id (what encoder masks leave out).

        Example:
        >>> TranslationPreprocessor(["[PAD]", "[UNK]", "[START]", "[END]"]).source_pad_id
        0
        """
        return self.source_tokenizer.token_to_id("[PAD]")

    # The names `zoo.base.generation.GenerativeTask` reads (the target side).
    start_id = target_start_id
    end_id = target_end_id
    pad_id = target_pad_id

    def input_form(self, spec):
        """Source strings, one or a batch: the `zoo.base.raw_inputs` contract.

        Args:
            spec: the element spec as `(x,)`, `(x, y)` or `(x, y, w)`.

        Returns:
            `"samples"`, `"batches"` or None (prepared inputs: token ids).

        Example:
        >>> pre = TranslationPreprocessor()
        >>> pre.input_form((tf.TensorSpec((), tf.string), tf.TensorSpec((), tf.string)))
        'samples'
        >>> pre.input_form((tf.TensorSpec((None, 8), tf.int32),)) is None
        True
        """
        return inputs.text_form(spec)

    def pack_source(self, x):
        """Encoder ids of source sentences, and which of them were cut.

        What `call` does to `x` (and warns of, eagerly), with the rows cut
        to `source_sequence_length` as a tensor: the exports return it.

        Args:
            x: a string or a batch of strings.

        Returns:
            `(encoder_token_ids, truncated)`: int ids `(batch, length)` and
            bool `(batch,)`, True where the sentence did not fit.

        Example:
        >>> vocab = ["[PAD]", "[UNK]", "[START]", "[END]", "in", "the", "beginning"]
        >>> pre = TranslationPreprocessor(vocab, vocab, sequence_length=3)
        >>> import warnings
        >>> with warnings.catch_warnings(record=True):
        ...     ids, cut = pre.pack_source(["in the beginning", "in"])
        >>> ids.numpy().tolist(), cut.numpy().tolist()
        ([[4, 5, 3], [4, 3, 0]], [True, False])
        """
        source_packer = self.packers()[0]
        tokens = self.source_tokenizer(tf.convert_to_tensor(x))
        warn_truncated(
            tokens,
            self.source_sequence_length,
            "source_sequence_length",
            "source sentences",
            hint=_SETS_BOTH,
        )
        truncated = cut_rows(tokens, self.source_sequence_length)
        source = source_packer(tokens)
        if truncated is None:  # a dense tokenizer output: cut already
            truncated = tf.zeros(tf.shape(source)[:1], tf.bool)
        if self.trim_padding:
            source = _trim(source)
        return source, truncated

    def call(self, x, y=None, sample_weight=None):
        source, _ = self.pack_source(x)
        features = {"encoder_token_ids": source}
        if y is None:
            return features
        target_packer = self.packers()[1]
        tokens = self.target_tokenizer(tf.convert_to_tensor(y))
        warn_truncated(
            tokens,
            self.target_sequence_length,
            "target_sequence_length",
            "target sentences",
            hint=_SETS_BOTH,
        )
        target = target_packer(tokens)
        if self.trim_padding:
            target = _trim(target)
        decoder, labels, weights = teacher_forcing(
            target, self.target_pad_id, self.target_end_id
        )
        features["decoder_token_ids"] = decoder
        return features, labels, weights

    def detokenize(self, token_ids):
        """Maps target ids to strings, stopping at `[END]`, dropping specials.

            Args:
                token_ids: int array `(batch, length)` (without `[START]`).

            Returns:
                A list of Python strings, punctuation glued back
                (`glue_punctuation`).

            Example:
        >>> vocab = ["[PAD]", "[UNK]", "[START]", "[END]", "in", "the", "beginning",
        ...          "en", "el", "principio"]
            >>> pre = TranslationPreprocessor(vocab, vocab)
            >>> pre.detokenize([[7, 8, 9, 3, 0], [8, 3, 9, 9, 0]])
            ['en el principio', 'el']
        """
        texts = vocabularies.decode(
            self.target_tokenizer, token_ids, self.target_end_id, RESERVED_TOKENS
        )
        return [glue_punctuation(text) for text in texts]

    def target_tokens(self, token_ids):
        """Maps target ids to their subword strings (for plot labels).

            Example:
        >>> vocab = ["[PAD]", "[UNK]", "[START]", "[END]", "in", "the", "beginning",
        ...          "en", "el", "principio"]
            >>> TranslationPreprocessor(vocab, vocab).target_tokens([2, 9, 3])
            ['[START]', 'principio', '[END]']
        """
        return [self.target_tokenizer.id_to_token(int(i)) for i in token_ids]

    def source_tokens(self, token_ids):
        """Maps source ids to their subword strings (for plot labels).

            Example:
        >>> vocab = ["[PAD]", "[UNK]", "[START]", "[END]", "in", "the", "beginning",
        ...          "en", "el", "principio"]
            >>> TranslationPreprocessor(vocab, vocab).source_tokens([4, 6, 3])
            ['in', 'beginning', '[END]']
        """
        return [self.source_tokenizer.id_to_token(int(i)) for i in token_ids]

    def alignment(self, source_ids, generated_ids, weights):
        """Crops attention weights to one sentence's real tokens and labels them.

            Args:
                source_ids: int array `(source_length,)`, the encoder ids (padded
                    with the source `[PAD]`).
                generated_ids: int array `(target_length,)`, the generated ids
                    after `[START]`; they are cut after the first `[END]`.
                weights: array `(..., target_length, source_length)`.

            Returns:
                A dict: `weights` cropped to `(..., target, source)` and the
                `source_tokens` / `target_tokens` subword labels.

            Example:
        >>> vocab = ["[PAD]", "[UNK]", "[START]", "[END]", "in", "the", "beginning",
        ...          "en", "el", "principio"]
            >>> pre = TranslationPreprocessor(vocab, vocab)
            >>> weights = np.ones((5, 4)) / 4  # 5 decoding steps, 4 source ids
            >>> crop = pre.alignment(np.array([4, 6, 3, 0]), [7, 9, 3, 0, 0], weights)
            >>> crop["weights"].shape, crop["source_tokens"], crop["target_tokens"]
            ((3, 3), ['in', 'beginning', '[END]'], ['en', 'principio', '[END]'])
        """
        generated = [int(i) for i in generated_ids]
        end = self.target_end_id
        length = generated.index(end) + 1 if end in generated else len(generated)
        pad = self.source_tokenizer.token_to_id("[PAD]")
        source_length = int((np.asarray(source_ids) != pad).sum())
        return {
            "weights": weights[..., :length, :source_length],
            "source_tokens": self.source_tokens(source_ids[:source_length]),
            "target_tokens": self.target_tokens(generated[:length]),
        }

    def save_assets(self, dir_path):
        vocabularies.save_tokenizer_assets(
            dir_path, (self.source_tokenizer, self.target_tokenizer)
        )

    def load_assets(self, dir_path):
        vocabularies.load_tokenizer_assets(
            dir_path, (self.source_tokenizer, self.target_tokenizer)
        )

    def get_config(self):
        config = super().get_config()
        config.update(
            source_tokenizer=keras.saving.serialize_keras_object(self.source_tokenizer),
            target_tokenizer=keras.saving.serialize_keras_object(self.target_tokenizer),
            source_sequence_length=self.source_sequence_length,
            target_sequence_length=self.target_sequence_length,
            lowercase=self.lowercase,
            trim_padding=self.trim_padding,
        )
        return config


def _check_length(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 2:
        raise ValueError(f"`{name}` must be an int >= 2. Received: {name}={value!r}")
    return value


def _trim(ids):
    """Drops the padding columns that no row of the batch uses (pad id 0)."""
    used = tf.reduce_max(tf.reduce_sum(tf.cast(ids != 0, "int32"), axis=-1))
    return ids[:, : tf.maximum(used, 1)]
