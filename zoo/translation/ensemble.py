"""Decoding with several translators at once: averaged step log-probabilities.

As OpenNMT-py (`translate -model a.pt b.pt`) and fairseq (`--path
a.pt:b.pt`): at each step every member reads the same target prefix and
gives its next-token log-probabilities; the search (greedy or beam, the
`keras_attention.decoding` searches every translator uses) ranks their
mean. The members may differ in architecture and source vocabulary (each
reads the source with its own preprocessor) but must share the target
vocabulary, since they score the same target ids. The search runs
compiled as a single model's does (`zoo.base.generation`: one
`tf.function` on TensorFlow, one `jax.jit` over every member's variables on
JAX), once per search configuration.
"""

import numpy as np
from keras import ops

from keras_attention.decoding.search import token_log_probs
from zoo.base.generation import _compiled, as_texts, decoding_options, make_search
from zoo.base.truncation import warn_unfinished


def ensemble(models):
    """An `Ensemble` of translators: presets (names or folders) or tasks.

    Args:
        models: list of preset names, preset folders or
            `zoo.translation.TranslationTask` objects.

    Returns:
        An `Ensemble`.

    Raises:
        ValueError: no model, or models whose target vocabularies differ.

    Example:
    >>> import zoo
    >>> vocab = ["[PAD]", "[UNK]", "[START]", "[END]", "light", "luz"]
    >>> pre = zoo.TranslationPreprocessor(vocab, vocab, sequence_length=8)
    >>> model = zoo.Seq2Seq(6, 6, embedding_dim=4, units=4, preprocessor=pre)
    >>> pair = ensemble([model, model])
    >>> pair.translate("light", beam_width=2, max_length=3) == model.translate(
    ...     "light", beam_width=2, max_length=3)
    True
    """
    from zoo.base.task import Task

    members = [
        model if hasattr(model, "next") else Task.from_preset(model) for model in models
    ]
    return Ensemble(members)


def _target_vocabulary(model):
    return list(
        model.generation_preprocessor("an ensemble").target_tokenizer.get_vocabulary()
    )


class Ensemble:
    """Translators decoding together on the mean of their step log-probabilities.

    It follows `zoo.base.generation.GenerativeTask`'s contract, so the
    `keras_attention.decoding` searches run it: `encode` gives the tuple of
    the members' caches and `next` the mean log-probabilities, the first
    member's attention and the members' updated caches.

    Args:
        members: list of `zoo.translation.TranslationTask` with one target
            vocabulary.

    Raises:
        ValueError: no member, or target vocabularies that differ (naming
            the two members and their vocabularies).

    Example:
    >>> import zoo
    >>> vocab = ["[PAD]", "[UNK]", "[START]", "[END]", "light", "luz"]
    >>> pre = zoo.TranslationPreprocessor(vocab, vocab, sequence_length=8)
    >>> model = zoo.Seq2Seq(6, 6, embedding_dim=4, units=4, preprocessor=pre)
    >>> Ensemble([model, model]).preprocessor is pre
    True
    >>> other = zoo.TranslationPreprocessor(vocab, vocab[:5] + ["lumière"])
    >>> Ensemble([model, zoo.Seq2Seq(6, 6, units=4, preprocessor=other)])
    Traceback (most recent call last):
    ...
    ValueError: The models of an ensemble must share their target vocabulary: ... they differ at id 5 ('luz' vs 'lumière').
    """

    def __init__(self, members):
        self.members = list(members)
        if not self.members:
            raise ValueError("An ensemble needs at least one model. Received: []")
        first = _target_vocabulary(self.members[0])
        for index, member in enumerate(self.members[1:], 1):
            other = _target_vocabulary(member)
            if other != first:
                differ = next(
                    (
                        i
                        for i, pair in enumerate(zip(first, other))
                        if pair[0] != pair[1]
                    ),
                    min(len(first), len(other)),
                )
                raise ValueError(
                    "The models of an ensemble must share their target vocabulary: "
                    f"model 0 ({self.members[0].name}) has {len(first)} target "
                    f"subwords, model {index} ({member.name}) {len(other)}, and "
                    f"they differ at id {differ} ({_at(first, differ)} vs "
                    f"{_at(other, differ)})."
                )
        self.preprocessor = self.members[0].generation_preprocessor("an ensemble")
        self._search_functions = {}

    @property
    def variables(self):
        """Every member's variables: what the compiled search reads under JAX.

        Example:
        >>> import zoo
        >>> vocab = ["[PAD]", "[UNK]", "[START]", "[END]", "light", "luz"]
        >>> pre = zoo.TranslationPreprocessor(vocab, vocab, sequence_length=8)
        >>> model = zoo.Seq2Seq(6, 6, embedding_dim=4, units=4, preprocessor=pre)
        >>> len(Ensemble([model, model]).variables) == 2 * len(model.variables)
        True
        """
        return [variable for member in self.members for variable in member.variables]

    def padded_source(self, sources, multiple):
        """Each member's source padded by its own `padded_source` (JAX's shapes).

        Example:
        >>> import numpy as np, zoo
        >>> vocab = ["[PAD]", "[UNK]", "[START]", "[END]", "light", "luz"]
        >>> pre = zoo.TranslationPreprocessor(vocab, vocab, sequence_length=8)
        >>> model = zoo.Seq2Seq(6, 6, embedding_dim=4, units=4, preprocessor=pre)
        >>> source = np.array([[4, 4, 3]])
        >>> padded = Ensemble([model, model]).padded_source([source, source], 4)
        >>> len(padded), np.asarray(padded[0]).shape[0]
        (2, 1)
        """
        return [
            member.padded_source(source, multiple)
            for member, source in zip(self.members, sources)
        ]

    def encode(self, sources, max_length):
        """The members' caches: member `i` encodes `sources[i]` (its own ids).

        Example:
        >>> import numpy as np, zoo
        >>> from keras import tree
        >>> vocab = ["[PAD]", "[UNK]", "[START]", "[END]", "light", "luz"]
        >>> pre = zoo.TranslationPreprocessor(vocab, vocab, sequence_length=8)
        >>> model = zoo.Seq2Seq(6, 6, embedding_dim=4, units=4, preprocessor=pre)
        >>> source = np.array([[4, 4, 3]])
        >>> cache = Ensemble([model, model]).encode([source, source], max_length=3)
        >>> shapes = tree.map_structure(lambda t: tuple(t.shape), cache)
        >>> len(cache), shapes[0] == tree.map_structure(
        ...     lambda t: tuple(t.shape), model.encode(source, max_length=3))
        (2, True)
        """
        return tuple(
            member.encode(source, max_length)
            for member, source in zip(self.members, sources)
        )

    def next(self, prompt, cache, index):
        """The mean of the members' log-probabilities for position `index`.

        Returns:
            `(log_probs, attention, cache)`: float32 `(batch, vocabulary)`
            mean log-probabilities, the first member's attention (over its
            own source subwords) and the tuple of updated caches.

        Example (two copies of one model: the mean is its log-probabilities):
        >>> import numpy as np, zoo
        >>> from keras_attention.decoding.search import token_log_probs
        >>> vocab = ["[PAD]", "[UNK]", "[START]", "[END]", "light", "luz"]
        >>> pre = zoo.TranslationPreprocessor(vocab, vocab, sequence_length=8)
        >>> model = zoo.Seq2Seq(6, 6, embedding_dim=4, units=4, preprocessor=pre)
        >>> pair = Ensemble([model, model])
        >>> source = np.array([[4, 4, 3]])
        >>> prompt = np.array([[2, 0, 0, 0]], "int32")  # [START], 3 steps
        >>> cache = pair.encode([source, source], max_length=3)
        >>> log_probs, attention, cache = pair.next(prompt, cache, 1)
        >>> logits, _, _ = model.next(prompt, model.encode(source, 3), 1)
        >>> tuple(log_probs.shape), tuple(attention.shape), len(cache)
        ((1, 6), (1, 3), 2)
        >>> bool(np.allclose(log_probs, token_log_probs(logits), atol=1e-6))
        True
        """
        log_probs, caches, attention = [], [], None
        for member, member_cache in zip(self.members, cache):
            logits, weights, member_cache = member.next(prompt, member_cache, index)
            log_probs.append(token_log_probs(logits))
            caches.append(member_cache)
            attention = weights if attention is None else attention
        return ops.mean(ops.stack(log_probs), axis=0), attention, tuple(caches)

    def generate(self, sources, beam_width=1, max_length=None, length_penalty=0.0):
        """Target ids for prepared sources, one id array per member.

        Args:
            sources: list (one per member) of int arrays `(batch, S_i)`.
            beam_width: int. `1` decodes greedily. Defaults to `1`.
            max_length: int. Decoding steps; defaults to the first
                member's `target_sequence_length`.
            length_penalty: float. GNMT length penalty (beam only).

        Returns:
            int32 NumPy array `(batch, max_length + 1)`, as
            `GenerativeTask.generate`.

        Example:
        >>> import numpy as np, zoo
        >>> vocab = ["[PAD]", "[UNK]", "[START]", "[END]", "light", "luz"]
        >>> pre = zoo.TranslationPreprocessor(vocab, vocab, sequence_length=8)
        >>> model = zoo.Seq2Seq(6, 6, embedding_dim=4, units=4, preprocessor=pre)
        >>> source = np.array([[4, 4, 3], [4, 3, 0]])
        >>> tokens = Ensemble([model, model]).generate([source, source], max_length=3)
        >>> tokens.shape, bool((tokens == model.generate(source, max_length=3)).all())
        ((2, 4), True)
        """
        pre = self.preprocessor
        batch = len(sources[0])
        beam_width, max_length, _ = decoding_options(
            beam_width, max_length, batch, pre.target_sequence_length
        )
        search = make_search(beam_width, length_penalty=length_penalty)
        return self._generate(search, sources, max_length, batch)

    def _generate(self, search, sources, max_length, batch_size):
        pre = self.preprocessor
        prompt = np.full((len(sources[0]), max_length + 1), pre.pad_id, "int32")
        prompt[:, 0] = pre.start_id
        run = self._search_function(search)
        return ops.convert_to_numpy(run(sources, prompt, max(len(prompt), batch_size)))

    def _search_function(self, search):
        """`run(sources, prompt, rows) -> tokens`, compiled once per search."""
        key = (type(search).__name__, tuple(sorted(search.get_config().items())))
        if key not in self._search_functions:
            pre = self.preprocessor

            def run(sources, prompt):
                return search(
                    self.next,
                    prompt,
                    cache=self.encode(sources, ops.shape(prompt)[1] - 1),
                    index=1,
                    stop_token_ids=[int(pre.end_id)],
                    pad_token_id=int(pre.pad_id),
                )

            self._search_functions[key] = _compiled(self, run)
        return self._search_functions[key]

    def translate(
        self, texts, beam_width=4, max_length=None, length_penalty=0.6, batch_size=64
    ):
        """Translates source sentences with the ensemble (greedy or beam).

        The arguments and the output are `TranslationTask.translate`'s
        (without attention and sampling): the sentences are decoded in
        batches of similar length (the first member's subwords).

        Returns:
            A list of strings, or a string for a single input.

        Example:
        >>> import zoo
        >>> vocab = ["[PAD]", "[UNK]", "[START]", "[END]", "light", "luz"]
        >>> pre = zoo.TranslationPreprocessor(vocab, vocab, sequence_length=8)
        >>> model = zoo.Seq2Seq(6, 6, embedding_dim=4, units=4, preprocessor=pre)
        >>> pair = Ensemble([model, model])
        >>> texts = ["light", "light light luz"]  # batched by length
        >>> pair.translate(texts, beam_width=1, max_length=3) == model.translate(
        ...     texts, beam_width=1, max_length=3)
        True
        >>> type(pair.translate("light", max_length=3)).__name__
        'str'
        """
        texts, single = as_texts(texts)
        beam_width, max_length, batch_size = decoding_options(
            beam_width, max_length, batch_size, self.preprocessor.target_sequence_length
        )
        search = make_search(beam_width, length_penalty=length_penalty)
        ids = [_source_ids(member, texts) for member in self.members]
        order = sorted(range(len(texts)), key=lambda i: len(ids[0][i]))
        outputs, generated = [None] * len(texts), []
        for begin in range(0, len(order), batch_size):
            chunk = order[begin : begin + batch_size]
            sources = [
                _padded([rows[i] for i in chunk], member)
                for member, rows in zip(self.members, ids)
            ]
            tokens = self._generate(search, sources, max_length, batch_size)
            generated.append(tokens)
            for i, text in zip(chunk, self.preprocessor.detokenize(tokens[:, 1:])):
                outputs[i] = text
        warn_unfinished(generated, self.preprocessor.end_id, max_length, "translations")
        return outputs[0] if single else outputs


def _at(vocabulary, index):
    return repr(vocabulary[index]) if index < len(vocabulary) else "its end"


def _source_ids(member, texts):
    """Each sentence's source ids (without padding) by `member`'s preprocessor."""
    import tensorflow as tf

    pre = member.generation_preprocessor("an ensemble")
    pad = pre.source_pad_id
    rows = np.asarray(pre(tf.constant(texts))["encoder_token_ids"])
    return [row[row != pad] for row in rows]


def _padded(rows, member):
    pad = member.generation_preprocessor("an ensemble").source_pad_id
    batch = np.full((len(rows), max(len(row) for row in rows)), pad, "int32")
    for i, row in enumerate(rows):
        batch[i, : len(row)] = row
    return batch
