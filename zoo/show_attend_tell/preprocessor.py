"""Turns (image, caption) pairs into model inputs inside `tf.data`."""

import keras
import keras_hub
import tensorflow as tf

from zoo.data import vocabulary as vocabularies
from zoo.teacher_forcing import teacher_forcing

RESERVED_TOKENS = vocabularies.DEFAULT_RESERVED_TOKENS


@keras.saving.register_keras_serializable(package="zoo")
class CaptionPreprocessor(keras.layers.Layer):
    """Scales images and WordPiece-tokenizes captions for `ShowAttendTell`.

    Images (uint8 in `[0, 255]`, `(batch, H, W)` or `(batch, H, W, C)`)
    become float32 `images` in `[0, 1]`, resized to `image_size` when it is
    given and differs. The caption becomes `decoder_token_ids`
    (`[START] tokens [PAD]...`) and the labels (`tokens [END] [PAD]...`, one
    step ahead), with a sample weight that is 0 on padding. The vocabulary
    is a keras-hub `WordPieceTokenizer`, packed with keras-hub's
    `StartEndPacker`; it is saved as an asset beside the preset.

    Args:
        tokenizer: a `keras_hub.tokenizers.WordPieceTokenizer` or a
            vocabulary (list of tokens or path to a file, one per line).
        sequence_length: int. Longest decoder input in subwords. Defaults to
            `24`.
        image_size: optional `(height, width)` to resize images to. Defaults
            to `None` (keep the size).
        lowercase: bool. Lowercase captions before tokenizing. Defaults to
            `True`.
        trim_padding: bool. Cut each batch to its longest caption. Defaults
            to `True`.
        **kwargs: base layer arguments.

    Call arguments:
        x: images, uint8 or float tensor `(batch, H, W[, C])`.
        y: optional string tensor `(batch,)` of captions.
        sample_weight: ignored.

    Returns:
        `{"images"}` alone without `y`, else `(features, labels,
        sample_weight)` with features `{"images", "decoder_token_ids"}`.

    Example:
    >>> import numpy as np
    >>> import tensorflow as tf
    >>> pre = CaptionPreprocessor(["[PAD]", "[UNK]", "[START]", "[END]", "a", "bag"])
    >>> images = np.full((1, 84, 84), 255, "uint8")
    >>> x, y, w = pre(images, tf.constant(["a bag"]))
    >>> tuple(x["images"].shape), float(tf.reduce_max(x["images"]))
    ((1, 84, 84, 1), 1.0)
    >>> x["decoder_token_ids"].numpy().tolist()  # [START] a bag
    [[2, 4, 5]]
    >>> y.numpy().tolist(), w.numpy().tolist()  # a bag [END], no padding
    ([[4, 5, 3]], [[1.0, 1.0, 1.0]])

    Reference:
        Xu et al., 2015, "Show, Attend and Tell".
    """

    def __init__(
        self,
        tokenizer=None,
        sequence_length=24,
        image_size=None,
        lowercase=True,
        trim_padding=True,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if not isinstance(sequence_length, int) or sequence_length < 2:
            raise ValueError(
                "`sequence_length` must be an int >= 2. "
                f"Received: sequence_length={sequence_length!r}"
            )
        if image_size is not None:
            image_size = tuple(int(s) for s in image_size)
            if len(image_size) != 2 or min(image_size) < 1:
                raise ValueError(
                    "`image_size` must be None or (height, width). "
                    f"Received: image_size={image_size!r}"
                )
        self.lowercase = lowercase
        self.trim_padding = trim_padding
        self.sequence_length = sequence_length
        self.image_size = image_size
        self.tokenizer = self._tokenizer(tokenizer)

    def _tokenizer(self, value):
        if isinstance(value, dict):
            value = keras.saving.deserialize_keras_object(value)
        if isinstance(value, keras_hub.tokenizers.Tokenizer):
            return value
        if value is None:
            return keras_hub.tokenizers.WordPieceTokenizer(
                lowercase=self.lowercase, strip_accents=False, name="tokenizer"
            )
        return vocabularies.tokenizer(value, lowercase=self.lowercase, name="tokenizer")

    def build(self, *args, **kwargs):
        self.built = True

    def _id(self, token):
        if self.tokenizer.vocabulary is None:
            raise ValueError(
                "The tokenizer has no vocabulary yet: pass one, or load the "
                "preprocessor from a preset."
            )
        return self.tokenizer.token_to_id(token)

    @property
    def start_id(self):
        return self._id("[START]")

    @property
    def end_id(self):
        return self._id("[END]")

    @property
    def pad_id(self):
        return self._id("[PAD]")

    @property
    def vocabulary_size(self):
        return self.tokenizer.vocabulary_size()

    def images(self, x):
        """Float32 images `(batch, H, W, C)` in `[0, 1]`."""
        x = tf.convert_to_tensor(x)
        if x.shape.rank == 3:
            x = x[..., None]
        if x.dtype == tf.uint8:
            x = tf.cast(x, "float32") / 255.0
        else:
            x = tf.cast(x, "float32")
        if self.image_size is not None and tuple(x.shape[1:3]) != self.image_size:
            x = tf.image.resize(x, self.image_size)
        return x

    def call(self, x, y=None, sample_weight=None):
        features = {"images": self.images(x)}
        if y is None:
            return features
        packer = keras_hub.layers.StartEndPacker(
            self.sequence_length + 1,
            start_value=self.start_id,
            end_value=self.end_id,
            pad_value=self.pad_id,
        )
        ids = packer(self.tokenizer(tf.convert_to_tensor(y)))
        if self.trim_padding:
            used = tf.reduce_max(
                tf.reduce_sum(tf.cast(ids != self.pad_id, "int32"), axis=-1)
            )
            ids = ids[:, : tf.maximum(used, 2)]
        decoder, labels, weights = teacher_forcing(ids, self.pad_id, self.end_id)
        features["decoder_token_ids"] = decoder
        return features, labels, weights

    def detokenize(self, token_ids):
        """Maps ids `(batch, length)` (no `[START]`) to strings, up to `[END]`."""
        end = self.end_id
        specials = {self.tokenizer.token_to_id(t) for t in RESERVED_TOKENS}
        texts = []
        for row in keras.ops.convert_to_numpy(token_ids).tolist():
            if end in row:
                row = row[: row.index(end)]
            row = [t for t in row if t not in specials]
            text = self.tokenizer.detokenize(tf.constant([row], "int32"))
            text = keras.ops.convert_to_numpy(text)[0]
            texts.append(text.decode("utf-8") if isinstance(text, bytes) else str(text))
        return texts

    def tokens(self, token_ids):
        """Maps ids to their subword strings (plot labels, noun lookup)."""
        return [self.tokenizer.id_to_token(int(i)) for i in token_ids]

    def save_assets(self, dir_path):
        vocabularies.save_tokenizer_assets(dir_path, (self.tokenizer,))

    def load_assets(self, dir_path):
        vocabularies.load_tokenizer_assets(dir_path, (self.tokenizer,))

    def get_config(self):
        config = super().get_config()
        config.update(
            tokenizer=keras.saving.serialize_keras_object(self.tokenizer),
            sequence_length=self.sequence_length,
            image_size=self.image_size,
            lowercase=self.lowercase,
            trim_padding=self.trim_padding,
        )
        return config
