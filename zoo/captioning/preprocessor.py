"""Raw images and captions <-> a captioner's inputs (inside `tf.data` too)."""

import keras
import numpy as np

from zoo import quiet
from zoo.base import raw_inputs as inputs
from zoo.base.preprocessor import Preprocessor
from zoo.base.raw_inputs import checked_images
from zoo.base.teacher_forcing import teacher_forcing
from zoo.base.truncation import warn_truncated
from zoo.data import vocabulary as vocabularies

keras_hub = quiet.LazyModule(
    "keras_hub", "Tokenizing captions (keras-hub's WordPiece tokenizer)", "keras-hub"
)
tf = quiet.LazyModule(
    "tensorflow", "Tokenizing captions (keras-hub's WordPiece tokenizer)"
)

RESERVED_TOKENS = vocabularies.DEFAULT_RESERVED_TOKENS
#: The channel counts an image may have: gray, RGB, RGBA.
CHANNELS = (1, 3, 4)


def image_batch(images, name="images"):
    """`(batch (B, H, W[, C]), single)` from one image or a batch of images.

    A 2-D array is one gray image; a 3-D array is one image when its last
    axis is a channel count (1, 3 or 4), else a batch of gray images; a 4-D
    array is a batch.

    Example:
    >>> batch, single = image_batch(np.zeros((84, 84, 3), "uint8"))
    >>> batch.shape, single
    ((1, 84, 84, 3), True)
    >>> image_batch(np.zeros((5, 84, 84), "uint8"))[0].shape
    (5, 84, 84)
    """
    images = checked_images(images, name)
    if images.ndim == 2 or (images.ndim == 3 and images.shape[-1] in CHANNELS):
        return images[None], True
    if images.ndim in (3, 4):
        return images, False
    raise ValueError(
        f"`{name}` must be one image (H, W[, C]) or a batch (B, H, W[, C]). "
        f"Received: shape={images.shape}"
    )


@keras.saving.register_keras_serializable(package="zoo")
class CaptionPreprocessor(Preprocessor):
    """Converts images and WordPiece-tokenizes captions for a captioner.

    Images of any size and channel count (`(batch, H, W)` gray, or
    `(batch, H, W, C)` with 1, 3 or 4 channels; uint8 in `[0, 255]` or
    floats in `[0, 1]`) become float32 `images` in `[0, 1]` of
    `image_size` and `channels`: resized (bilinear) when the size differs,
    RGB made gray by luminance (`tf.image.rgb_to_grayscale`), gray repeated
    to RGB, and an alpha channel dropped. `ShowAttendTell` fills in an
    `image_size` or `channels` left `None` from its `image_shape`. The
    caption becomes `decoder_token_ids` (`[START] tokens [PAD]...`) and the
    labels (`tokens [END] [PAD]...`, one step ahead), with a sample weight
    that is 0 on padding. A caption longer than `sequence_length - 1`
    subwords is cut (its last label is still `[END]`); each eager call
    that cuts captions warns (`UserWarning`) with the count and the
    `sequence_length` that would keep the longest whole, while inside
    `tf.data` (`fit`, `evaluate`) captions are cut silently
    (`zoo.base.truncation`): call the preprocessor on a batch of training
    captions to check them, and raise `sequence_length` to keep such
    captions. The vocabulary is a keras-hub `WordPieceTokenizer`, packed
    with keras-hub's `StartEndPacker`; it is saved as an asset beside the
    preset.

    Args:
        tokenizer: a `keras_hub.tokenizers.WordPieceTokenizer` or a
            vocabulary (list of tokens or path to a file, one per line).
        sequence_length: int >= 2. Decoder input length in subwords
            (`[START]` and at most `sequence_length - 1` caption subwords);
            settable later. Defaults to `24`.
        image_size: optional `(height, width)` to resize images to. Defaults
            to `None` (keep the size, or the model's size).
        lowercase: bool. Lowercase captions before tokenizing. Defaults to
            `True`.
        trim_padding: bool. Cut each batch to its longest caption. Defaults
            to `True`.
        channels: optional int, 1 or 3. Channels of the prepared images.
            Defaults to `None` (keep them, or the model's).
        **kwargs: base layer arguments.

    Call arguments:
        x: images, uint8 or float tensor `(batch, H, W[, C])`.
        y: optional string tensor `(batch,)` of captions.
        sample_weight: ignored.

    Returns:
        `{"images"}` alone without `y`, else `(features, labels,
        sample_weight)` with features `{"images", "decoder_token_ids"}`.

    Example:
    >>> import tensorflow as tf
    >>> pre = CaptionPreprocessor(
    ...     ["[PAD]", "[UNK]", "[START]", "[END]", "a", "bag"],
    ...     image_size=(84, 84), channels=1)
    >>> rgba = np.full((1, 28, 28, 4), 255, "uint8")  # any size and channels
    >>> x, y, w = pre(rgba, tf.constant(["a bag"]))
    >>> tuple(x["images"].shape), round(float(tf.reduce_max(x["images"])), 3)
    ((1, 84, 84, 1), 1.0)
    >>> x["decoder_token_ids"].numpy().tolist()  # [START] a bag
    [[2, 4, 5]]
    >>> y.numpy().tolist(), w.numpy().tolist()  # a bag [END], no padding
    ([[4, 5, 3]], [[1.0, 1.0, 1.0]])
    >>> pre.sequence_length = 2  # one subword: "a bag" is cut, with a warning
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     x, y, w = pre(rgba, tf.constant(["a bag"]))
    >>> y.numpy().tolist(), str(caught[0].message)[:59]
    ([[4, 3]], '1 of 1 captions were longer than sequence_length=2 subwords')

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
        channels=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.lowercase = lowercase
        self.trim_padding = trim_padding
        self.sequence_length = sequence_length
        self.image_size = image_size
        self.channels = channels
        self.tokenizer = vocabularies.as_tokenizer(
            tokenizer, lowercase, name="tokenizer"
        )

    @property
    def sequence_length(self):
        """int >= 2: the decoder input length (settable).

        Example:
        >>> pre = CaptionPreprocessor(sequence_length=16)
        >>> pre.sequence_length = 32
        >>> pre.sequence_length
        32
        >>> pre.sequence_length = 1
        Traceback (most recent call last):
        ...
        ValueError: `sequence_length` must be an int >= 2. Received: sequence_length=1
        """
        return self._sequence_length

    @sequence_length.setter
    def sequence_length(self, value):
        if isinstance(value, bool) or not isinstance(value, int) or value < 2:
            raise ValueError(
                f"`sequence_length` must be an int >= 2. Received: sequence_length={value!r}"
            )
        self._sequence_length = value

    @property
    def image_size(self):
        """`(height, width)` of the prepared images, or `None` (settable).

        Example:
        >>> pre = CaptionPreprocessor(image_size=[84, 84])
        >>> pre.image_size
        (84, 84)
        >>> pre.image_size = 84
        Traceback (most recent call last):
        ...
        ValueError: `image_size` must be None or (height, width). Received: image_size=84
        """
        return self._image_size

    @image_size.setter
    def image_size(self, value):
        if value is not None:
            size = tuple(value) if hasattr(value, "__len__") else (value,)
            if len(size) != 2 or not all(
                isinstance(s, (int, np.integer)) and s >= 1 for s in size
            ):
                raise ValueError(
                    "`image_size` must be None or (height, width). "
                    f"Received: image_size={value!r}"
                )
            value = tuple(int(s) for s in size)
        self._image_size = value

    @property
    def channels(self):
        """1, 3 or `None`: the channels of the prepared images (settable).

        Example:
        >>> pre = CaptionPreprocessor(channels=3)
        >>> pre.channels = 1
        >>> tuple(pre.images(np.zeros((1, 8, 8, 3), "uint8")).shape)
        (1, 8, 8, 1)
        """
        return self._channels

    @channels.setter
    def channels(self, value):
        if value is not None and (isinstance(value, bool) or value not in (1, 3)):
            raise ValueError(
                f"`channels` must be None, 1 or 3. Received: channels={value!r}"
            )
        self._channels = value

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
        """int. The `[START]` id (the first decoder input).

        Example:
        >>> pre = CaptionPreprocessor(["[PAD]", "[UNK]", "[START]", "[END]", "a", "bag"])
        >>> pre.start_id
        2
        """
        return self._id("[START]")

    @property
    def end_id(self):
        """int. The `[END]` id (the last label; generation stops at it).

        Example:
        >>> pre = CaptionPreprocessor(["[PAD]", "[UNK]", "[START]", "[END]", "a", "bag"])
        >>> pre.end_id
        3
        """
        return self._id("[END]")

    @property
    def pad_id(self):
        """int. The `[PAD]` id (weight 0 in the loss).

        Example:
        >>> pre = CaptionPreprocessor(["[PAD]", "[UNK]", "[START]", "[END]", "a", "bag"])
        >>> pre.pad_id
        0
        >>> CaptionPreprocessor().pad_id  # the vocabulary comes later
        Traceback (most recent call last):
        ...
        ValueError: The tokenizer has no vocabulary yet: pass one, or load the preprocessor from a preset.
        """
        return self._id("[PAD]")

    @property
    def vocabulary_size(self):
        """int. The number of tokens, reserved ones included.

        Example:
        >>> pre = CaptionPreprocessor(["[PAD]", "[UNK]", "[START]", "[END]", "a", "bag"])
        >>> pre.vocabulary_size
        6
        """
        return self.tokenizer.vocabulary_size()

    def images(self, x):
        """Float32 images `(batch, H, W, C)` in `[0, 1]`, converted and resized.

        Args:
            x: uint8 or float tensor `(batch, H, W)` or `(batch, H, W, C)`
                with `C` in 1, 3, 4.

        Example:
        >>> pre = CaptionPreprocessor(image_size=(4, 4), channels=3)
        >>> tuple(pre.images(np.zeros((2, 8, 6), "uint8")).shape)
        (2, 4, 4, 3)
        """
        x = tf.convert_to_tensor(x)
        if x.shape.rank == 3:
            x = x[..., None]
        if x.shape.rank != 4 or x.shape[-1] not in CHANNELS:
            raise ValueError(
                "Images must be (batch, H, W) or (batch, H, W, C) with C in "
                f"{CHANNELS}. Received: shape={tuple(x.shape)}"
            )
        if x.dtype == tf.uint8:
            x = tf.cast(x, "float32") / 255.0
        else:
            x = tf.cast(x, "float32")
        if x.shape[-1] == 4:
            x = x[..., :3]  # alpha dropped
        if self.channels == 1 and x.shape[-1] == 3:
            x = tf.image.rgb_to_grayscale(x)
        elif self.channels == 3 and x.shape[-1] == 1:
            x = tf.image.grayscale_to_rgb(x)
        if self.image_size is not None and tuple(x.shape[1:3]) != self.image_size:
            x = tf.image.resize(x, self.image_size)
        return x

    def input_form(self, spec):
        """Images, one or a batch, with optional captions: `zoo.base.raw_inputs`'s contract.

        Args:
            spec: the element spec as `(x,)`, `(x, y)` or `(x, y, w)`.

        Returns:
            `"samples"`, `"batches"` or None (prepared inputs: a dict `x`).

        Example:
        >>> pre = CaptionPreprocessor()
        >>> pre.input_form((tf.TensorSpec((8, 8, 3), tf.uint8), tf.TensorSpec((), tf.string)))
        'samples'
        >>> pre.input_form((tf.TensorSpec((None, 8, 8), tf.uint8),))
        'batches'
        """
        return inputs.image_form(spec, channels=CHANNELS)

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
        tokens = self.tokenizer(tf.convert_to_tensor(y))
        warn_truncated(tokens, self.sequence_length, "sequence_length", "captions")
        ids = packer(tokens)
        if self.trim_padding:
            used = tf.reduce_max(
                tf.reduce_sum(tf.cast(ids != self.pad_id, "int32"), axis=-1)
            )
            ids = ids[:, : tf.maximum(used, 2)]
        decoder, labels, weights = teacher_forcing(ids, self.pad_id, self.end_id)
        features["decoder_token_ids"] = decoder
        return features, labels, weights

    def detokenize(self, token_ids):
        """Maps ids `(batch, length)` (no `[START]`) to strings, up to `[END]`.

        Example:
        >>> pre = CaptionPreprocessor(["[PAD]", "[UNK]", "[START]", "[END]", "a", "bag"])
        >>> pre.detokenize([[4, 5, 3, 0], [5, 3, 4, 4]])
        ['a bag', 'bag']
        """
        return vocabularies.decode(
            self.tokenizer, token_ids, self.end_id, RESERVED_TOKENS
        )

    def tokens(self, token_ids):
        """Maps ids to their subword strings (plot labels, noun lookup).

        Example:
        >>> pre = CaptionPreprocessor(["[PAD]", "[UNK]", "[START]", "[END]", "a", "bag"])
        >>> pre.tokens([2, 4, 5, 3])
        ['[START]', 'a', 'bag', '[END]']
        """
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
            channels=self.channels,
        )
        return config


def fitted(preprocessor, image_shape):
    """The preprocessor, its open image size and channels set to the model's."""
    if preprocessor is None:
        return None
    if getattr(preprocessor, "image_size", 0) is None:
        preprocessor.image_size = tuple(image_shape[:2])
    if getattr(preprocessor, "channels", 0) is None and image_shape[2] in (1, 3):
        preprocessor.channels = image_shape[2]
    return preprocessor
