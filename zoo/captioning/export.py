"""Exports a captioner (`CaptioningTask`) as a SavedModel that captions images.

The SavedModel needs TensorFlow only (no zoo, Keras, keras-hub or
tensorflow-text) and holds the whole way from raw images to text: the
preprocessor's conversion and resize, the encoder, the greedy or beam
search (`zoo.base.generation`'s search, a `tf.while_loop`) and the
detokenization. Its signatures:

- `serve` (also `serving_default`): `image`, uint8
  `(batch, height, width, channels)`, any size, 1, 3 or 4 channels;
- `serve_bytes`: `image_bytes`, string `(batch,)` of encoded PNG / JPEG /
  GIF / BMP files, of any sizes (an alpha channel is dropped);

both returning `caption` string `(batch,)` (what `caption` returns, with
the beam width and penalties fixed at export), `score` float32 `(batch,)`
(the search's score: the caption's log-probability, `[END]` included,
divided by the length penalty), `length` int32 `(batch,)` (generated
subwords, `[END]` included), `tokens` string `(batch, max_length)` (those
subwords, empty after the end) and `attention` float32
`(batch, max_length, grid_height, grid_width)` (where the decoder looked
for each of them, as `caption(..., return_attention=True)` gives it) and
`output_truncated` bool `(batch,)` (True where the search reached
`max_length` before `[END]`: the caption stops mid-sentence).

Example:
>>> import tempfile
>>> import numpy as np
>>> import tensorflow as tf
>>> from zoo.show_attend_tell import CaptionPreprocessor, ShowAttendTell
>>> vocabulary = ["[PAD]", "[UNK]", "[START]", "[END]", "a", "bag", "##s"]
>>> model = ShowAttendTell(
...     len(vocabulary), annotation_dim=8, embedding_dim=4, units=8, seed=0,
...     preprocessor=CaptionPreprocessor(vocabulary, sequence_length=4))
>>> path = export_captioner(model, tempfile.mkdtemp(), beam_width=2)
>>> serve = tf.saved_model.load(path).signatures["serving_default"]
>>> outputs = serve(image=tf.zeros((1, 50, 40, 3), tf.uint8))
>>> sorted(outputs), tuple(outputs["attention"].shape)
(['attention', 'caption', 'length', 'output_truncated', 'score', 'tokens'], (1, 4, 7, 7))
>>> outputs["caption"].numpy()[0].decode() == model.caption(
...     np.zeros((50, 40, 3), "uint8"), beam_width=2)
True
"""

from zoo import quiet
from zoo.base import backends
from zoo.base.generation import decoding_options, make_search
from zoo.captioning.preprocessor import CHANNELS, RESERVED_TOKENS
from zoo.serving import image_export

tf = quiet.LazyModule("tensorflow", "Exporting a captioner (a SavedModel)")

SUFFIX = "##"


def export_captioner(
    model,
    path,
    beam_width=3,
    max_length=None,
    length_penalty=0.0,
    coverage_penalty=0.0,
):
    """Writes `model` as a SavedModel with the `serve` and `serve_bytes` signatures.

    The decoding settings are those of `model.caption` and are fixed in the
    export; its captions equal `model.caption(images, beam_width=...,
    max_length=..., length_penalty=..., coverage_penalty=...)`.

    Args:
        model: a captioner (`zoo.captioning.CaptioningTask`, e.g.
            `zoo.ShowAttendTell`) with its preprocessor.
        path: str or path-like. The SavedModel directory to write.
        beam_width: int. `1` decodes greedily. Defaults to `3` (as
            `caption`).
        max_length: int. Longest caption in subwords; defaults to the
            preprocessor's sequence length.
        length_penalty: float. GNMT length penalty. Defaults to `0.0`.
        coverage_penalty: float. GNMT coverage penalty. Defaults to `0.0`.

    Returns:
        The path, as a str.

    Raises:
        ValueError: a bad decoding argument, or a model without a
            preprocessor.
        zoo.base.backends.BackendError: not on the TensorFlow backend.
    """
    backends.require_tensorflow("export_captioner() (a TensorFlow SavedModel)")
    pre = model.generation_preprocessor("export_captioner()")
    beam_width, max_length, _ = decoding_options(
        beam_width, max_length, 1, pre.sequence_length
    )
    search = make_search(
        beam_width, length_penalty=length_penalty, coverage_penalty=coverage_penalty
    )
    height, width = pre.image_size
    channels = pre.channels or model.image_shape[-1]
    grid_height, grid_width = model.grid_shape
    vocabulary = list(pre.tokenizer.get_vocabulary())
    specials = [vocabulary.index(t) for t in RESERVED_TOKENS if t in vocabulary]
    start_id, end_id, pad_id = pre.start_id, pre.end_id, pre.pad_id

    def prepared(images):
        """uint8 `(B, H, W, C)` -> float32 `(B, height, width, channels)`."""

        def convert(images):
            def as_sized():
                count = images.shape[-1]
                sized = image_export.with_static_shape(
                    images, [None, height, width, count]
                )
                return pre.images(sized)

            same_size = tf.logical_and(
                tf.equal(tf.shape(images)[1], height),
                tf.equal(tf.shape(images)[2], width),
            )
            # The preprocessor resizes when the static size differs.
            return tf.cond(same_size, as_sized, lambda: pre.images(images))

        converted = image_export.by_channels(images, {c: convert for c in CHANNELS})
        return image_export.with_static_shape(
            converted, [None, height, width, channels]
        )

    # One function called by both signatures: the search is traced once.
    @tf.function(
        input_signature=[tf.TensorSpec([None, height, width, channels], tf.float32)],
        autograph=False,
    )
    def captions(images):
        batch = tf.shape(images)[0]
        prompt = tf.concat(
            [
                tf.fill([batch, 1], tf.constant(start_id, tf.int32)),
                tf.fill([batch, max_length], tf.constant(pad_id, tf.int32)),
            ],
            axis=1,
        )
        cache = model.encode(images, max_length)
        tokens, score = model.run_search(
            search,
            images,
            prompt,
            cache=cache,
            stop_token_ids=[end_id],
            pad_token_id=pad_id,
            return_scores=True,
        )
        tokens = tf.cast(tokens, tf.int32)
        ids = tokens[:, 1:]
        is_end = tf.equal(ids, end_id)
        before_end = tf.equal(tf.cumsum(tf.cast(is_end, tf.int32), axis=1), 0)
        length = tf.where(
            tf.reduce_any(is_end, axis=1),
            tf.cast(tf.argmax(tf.cast(is_end, tf.int32), axis=1), tf.int32) + 1,
            max_length,
        )
        generated = tf.range(max_length)[None, :] < length[:, None]
        words = tf.gather(tf.constant(vocabulary), ids)
        return {
            "caption": detokenize(words, before_end & ~_isin(ids, specials)),
            "score": tf.cast(score, tf.float32),
            "length": length,
            "tokens": tf.where(generated, words, ""),
            "attention": attention(tokens, cache),
            "output_truncated": tf.logical_not(tf.reduce_any(is_end, axis=1)),
        }

    def attention(tokens, cache):
        """The attention of the chosen tokens, teacher-forced (`token_attention`)."""
        rows = tf.TensorArray(tf.float32, size=max_length)

        def body(index, cache, rows):
            _, weights, cache = model.next(tokens, cache, index)
            return index + 1, cache, rows.write(index - 1, tf.cast(weights, tf.float32))

        _, _, rows = tf.while_loop(
            lambda index, *_: index <= max_length,
            body,
            (tf.constant(1), cache, rows),
        )
        rows = tf.transpose(rows.stack(), [1, 0, 2])
        return tf.reshape(rows, [-1, max_length, grid_height, grid_width])

    def serve(image):
        return captions(prepared(image))

    def serve_bytes(image_bytes):
        def one(encoded):
            return prepared(image_export.decode(encoded)[None])[0]

        images = tf.map_fn(
            one,
            image_bytes,
            fn_output_signature=tf.TensorSpec([height, width, channels], tf.float32),
        )
        return captions(images)

    description = {
        "kind": "captioning",
        "model": type(model).__name__,
        "beam_width": beam_width,
        "max_length": max_length,
        "length_penalty": float(length_penalty),
        "coverage_penalty": float(coverage_penalty),
        "image_size": [height, width],
        "grid_shape": [grid_height, grid_width],
        "channels": list(CHANNELS),
    }
    return image_export.write_archive(path, serve, serve_bytes, description)


def _isin(ids, values):
    """Whether each id is one of `values`."""
    if not values:
        return tf.zeros_like(ids, tf.bool)
    return tf.reduce_any(tf.equal(ids[..., None], tf.constant(values, ids.dtype)), -1)


def detokenize(words, keep):
    """Joins the kept WordPiece subwords of each row as keras-hub does.

    A subword `##x` after the first kept one is glued to the word before
    it; any other subword (a leading `##x`, a bare `##`) starts a new word,
    as `keras_hub.tokenizers.WordPieceTokenizer.detokenize` joins them.

    Args:
        words: string tensor `(batch, length)`.
        keep: bool tensor `(batch, length)`.

    Returns:
        String tensor `(batch,)`.

    Example:
    >>> words = tf.constant([["##a", "b", "##c", "##", "x"], ["d", "##e", "f", "g", "h"]])
    >>> keep = tf.constant([[True] * 5, [True, True, False, True, False]])
    >>> [t.decode() for t in detokenize(words, keep).numpy()]
    ['##a bc ## x', 'de g']
    """
    kept = tf.ragged.boolean_mask(words, keep)
    flat = kept.flat_values
    first = tf.equal(tf.ragged.range(kept.row_lengths()).flat_values, 0)
    suffix = tf.strings.regex_full_match(flat, f"{SUFFIX}.+") & ~first
    pieces = tf.where(
        suffix,
        tf.strings.regex_replace(flat, f"^{SUFFIX}", ""),
        tf.where(first, flat, tf.strings.join([" ", flat])),
    )
    return tf.strings.reduce_join(kept.with_flat_values(pieces), axis=-1)
