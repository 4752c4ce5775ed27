"""`CaptioningTask`: the captioning kind, what every image captioner shares.

A family's captioner subclasses `CaptioningTask` and gets the user verbs
(`caption`, `attention_maps`), the `python -m zoo caption` command, the
SavedModel export (`zoo.captioning.export`), the held-out evaluation on the
scenes (`zoo.captioning.evaluation`) and the metrics line of its presets.
"""

from keras import ops

from zoo.base.generation import (
    GenerativeTask,
    best_sequences,
    chunk_seed,
    decoding_options,
    make_search,
    repeated,
    sampling_options,
    sampling_seed,
)
from zoo.base.truncation import warn_unfinished
from zoo.captioning import evaluation, summary
from zoo.captioning.export import export_captioner
from zoo.captioning.preprocessor import image_batch
from zoo.data import scenes
from zoo.serving.export import read_metadata


class CaptioningTask(GenerativeTask):
    """The captioning kind: a generative task from images to text.

    A subclass (`zoo.ShowAttendTell`) supplies the network and, as every
    `zoo.base.generation.GenerativeTask`, `encode(images, max_length)` (the
    decoder's starting cache for prepared images) and
    `next(prompt, cache, index) -> (logits, attention, cache)`, where
    `attention` `(batch, cells)` is the attention of the step over the
    image's grid of cells, row by row. It also has:

    - `preprocessor`: a `zoo.captioning.CaptionPreprocessor` (images in,
      captions as subword ids, and back);
    - `image_shape`: `(height, width, channels)` of the prepared images;
    - `grid_shape`: `(rows, columns)` of the attended grid, so that
      `rows * columns == cells`.

    On these this class builds `caption` (raw images of any size and
    channel count -> captions, with per-word attention maps when asked),
    `attention_maps` (the maps of given captions), `export_serving`
    (`zoo.captioning.export.export_captioner`), `evaluate_split` (BLEU-1..4
    and the share of nouns whose attention peak falls in the named item's
    box, `zoo.captioning.evaluation.evaluate_scenes`) and `metrics_summary`.
    A subclass registers itself with `keras.saving` under its own name; this
    class is not serialized.

    Example:
    >>> import zoo
    >>> CaptioningTask.kind, CaptioningTask.verbs
    ('captioning', ('caption',))
    >>> issubclass(zoo.ShowAttendTell, CaptioningTask)
    True
    """

    kind = "captioning"
    verbs = ("caption",)

    def caption(
        self,
        images,
        beam_width=3,
        return_attention=False,
        max_length=None,
        length_penalty=0.0,
        batch_size=64,
        coverage_penalty=0.0,
        sampler=None,
        num_return_sequences=1,
    ):
        """Captions images of any size and channel count, searched or drawn.

        Args:
            images: one image `(H, W)` or `(H, W, C)`, or a batch
                `(B, H, W)` / `(B, H, W, C)`; `C` is 1, 3 or 4 (see
                `preprocessor.image_batch`), integers in `[0, 255]`, floats in
                `[0, 1]`, or floats in `[0, 255]` as
                `keras.utils.img_to_array` gives (read so when their maximum
                exceeds 1: `zoo.base.raw_inputs.checked_images`). Converted by the
                preprocessor (resize included).
            beam_width: int. `1` decodes greedily. Defaults to `3`.
            return_attention: bool. Also return, per image, a dict with the
                generated `tokens` (the last one `[END]` when the caption
                ended) and their attention maps `weights`
                `(len(tokens), H_grid, W_grid)`. Defaults to `False`.
            max_length: int. Longest caption in subwords; defaults to the
                preprocessor's sequence length.
            length_penalty: float. GNMT length penalty of the beam search.
                Defaults to `0.0`.
            batch_size: int. Images decoded together. Defaults to `64`.
            coverage_penalty: float. GNMT coverage penalty of the beam
                search, over the grid cells. Defaults to `0.0`.
            sampler: optional `keras_attention.decoding` sampler
                (`TopKSampler(k=5)`, `TopPSampler(p=0.9)`, `RandomSampler()`):
                draws each word instead of the beam search (`beam_width`
                and the penalties are then unused), as keras-hub's
                `generate(..., sampler=...)`; its seed reproduces a call.
                Defaults to `None`.
            num_return_sequences: int. Captions per image, consecutive
                in the output as in Hugging Face's `generate`: a
                `sampler`'s draws, or without one the best finished
                hypotheses of the beam search, best first (at most
                `beam_width`). Defaults to `1`.

        Returns:
            A list of strings (one string for one image and one sequence;
            `num_return_sequences` strings per image, in a row), and the
            attention dicts when asked (one per string).

        Example:
        >>> import zoo
        >>> from zoo.data import scenes
        >>> image = scenes.load("test", num_scenes=2, sample=True)["images"][1]
        >>> model = zoo.from_preset("show_attend_tell_fashion_scenes")
        >>> text, maps = model.caption(image, beam_width=1, return_attention=True)
        >>> text, maps["tokens"], maps["weights"].shape
        ('a coat', ['a', 'coat', '[END]'], (3, 7, 7))
        """
        pre = self.generation_preprocessor("caption()")
        beam_width, max_length, batch_size = decoding_options(
            beam_width, max_length, batch_size, pre.sequence_length
        )
        sampler, count = sampling_options(sampler, num_return_sequences, beam_width)
        images, single = image_batch(images)
        # A sampler draws each caption of an image from its own row; a beam
        # search returns an image's best `count` from one row.
        per_row = 1 if sampler is not None else count
        images = repeated(images, count // per_row)
        search = make_search(
            beam_width,
            sampler=sampler,
            num_return_sequences=count,
            length_penalty=length_penalty,
            coverage_penalty=coverage_penalty,
        )
        seed = sampling_seed(sampler)
        texts, maps, chunks = [], [], []
        for start in range(0, len(images), batch_size):
            prepared = pre.images(images[start : start + batch_size])
            tokens = self.generate_with(
                search,
                prepared,
                max_length,
                batch_size=min(batch_size, len(images)),  # one shape per call
                seed=chunk_seed(seed, len(chunks)),
            )
            tokens = best_sequences(tokens, count)
            chunks.append(tokens)
            texts.extend(pre.detokenize(tokens[:, 1:]))
            if return_attention:
                prepared = ops.repeat(prepared, per_row, axis=0)
                attention = self.token_attention(prepared, tokens)
                maps.extend(self._attention_dicts(tokens, attention))
        warn_unfinished(chunks, pre.end_id, max_length, "captions")
        if single and count == 1:
            texts, maps = texts[0], (maps[0] if maps else maps)
        return (texts, maps) if return_attention else texts

    def attention_maps(self, images, tokens):
        """The attention maps of given captions (`token_attention` re-run).

        Args:
            images: the images `(B, H, W[, C])` (any form `caption` takes).
            tokens: int array `(B, T)` starting with `[START]` (as returned
                by `generate`).

        Returns:
            A list of dicts `{"tokens": [...], "weights": (n, h, w)}`, one
            per image, up to and including `[END]`.

        Example:
        >>> import numpy as np
        >>> import zoo
        >>> from zoo.data import scenes
        >>> image = scenes.load("test", num_scenes=2, sample=True)["images"][1]
        >>> model = zoo.from_preset("show_attend_tell_fashion_scenes")
        >>> pre = model.preprocessor
        >>> ids = [[pre.start_id] + [pre.tokenizer.token_to_id(w) for w in
        ...        ("a", "coat", "[END]")]]
        >>> maps = model.attention_maps(image, np.array(ids))
        >>> maps[0]["tokens"], maps[0]["weights"].shape
        (['a', 'coat', '[END]'], (3, 7, 7))
        """
        pre = self.generation_preprocessor("attention_maps()")
        prepared = pre.images(image_batch(images)[0])
        return self._attention_dicts(tokens, self.token_attention(prepared, tokens))

    def _attention_dicts(self, tokens, attention):
        """Per image: the tokens up to `[END]` and their `(n, h, w)` maps."""
        pre = self.preprocessor
        results = []
        for row, weights in zip(tokens, attention):
            generated = [int(t) for t in row[1:]]
            if pre.end_id in generated:
                length = generated.index(pre.end_id) + 1
            else:
                length = len(generated)
            results.append(
                {
                    "tokens": pre.tokens(generated[:length]),
                    "weights": weights[:length].reshape(length, *self.grid_shape),
                }
            )
        return results

    # The kind's export, evaluation and metrics -----------------------------

    def export_serving(self, filepath, **options):
        """Writes the captioner export (`export_captioner`); its description.

        `model.export(path)` calls it; the options are `export_captioner`'s.

        Example:
        >>> import tempfile
        >>> import zoo
        >>> vocabulary = ["[PAD]", "[UNK]", "[START]", "[END]", "a", "bag"]
        >>> model = zoo.ShowAttendTell(
        ...     len(vocabulary), annotation_dim=8, embedding_dim=4, units=8,
        ...     preprocessor=zoo.CaptionPreprocessor(vocabulary, sequence_length=4))
        >>> model.export_serving(tempfile.mkdtemp(), beam_width=0)
        Traceback (most recent call last):
        ...
        ValueError: `beam_width` must be an int >= 1. Received: beam_width=0
        """
        export_captioner(self, filepath, **options)
        return read_metadata(filepath)

    def evaluate_split(
        self, split="test", limit=None, beam_width=3, sword_path=None, data_path=None
    ):
        """BLEU-1..4 and attention correctness on a split of the scenes.

        The scenes are generated from the Fashion-MNIST split (test images
        for the test split), seeded, as the training scripts do; a split is
        its default number of scenes, which `limit` can only lower. Greedy
        decoding and `beam_width` are scored. See `Task.evaluate_split` for
        the arguments.

        Example:
        >>> import zoo
        >>> vocabulary = ["[PAD]", "[UNK]", "[START]", "[END]", "a", "bag"]
        >>> model = zoo.ShowAttendTell(
        ...     len(vocabulary), annotation_dim=8, embedding_dim=4, units=8,
        ...     preprocessor=zoo.CaptionPreprocessor(vocabulary, sequence_length=4))
        >>> model.evaluate_split("dev")
        Traceback (most recent call last):
        ...
        ValueError: `split` must be one of ['train', 'validation', 'test']. Received: split='dev'
        """
        if split not in scenes.DEFAULT_SIZES:
            raise ValueError(
                f"`split` must be one of {list(scenes.DEFAULT_SIZES)}. "
                f"Received: split={split!r}"
            )
        count = scenes.DEFAULT_SIZES[split]
        if limit is not None:
            count = min(limit, count)
        test = scenes.load(split, num_scenes=count, path=data_path)
        return evaluation.evaluate_scenes(
            self, test, beam_widths=sorted({1, beam_width})
        )

    @classmethod
    def metrics_summary(cls, metrics):
        """BLEU-4 and attention correctness of each decoding in `metrics`.

        Example:
        >>> CaptioningTask.metrics_summary({"test": {"beam3": {
        ...     "bleu4": 61.234, "attention": {"peak": 80.0, "either": 90.0}}}})
        'beam3: BLEU-4 61.23, attention peak on the named item 80.0%'
        """
        return summary.metrics_summary(metrics)
