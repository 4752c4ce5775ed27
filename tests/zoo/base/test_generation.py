"""`zoo.base.generation.GenerativeTask`: the one search front end, on a fake model.

The fake model is a table: the logits of the next token depend only on the
token read (`index - 1`), and so does the step's attention over the two
source positions. Every expected output is worked out from the table in
the test (by hand or by a NumPy loop), independently of the search code.
"""

import math

import keras
import numpy as np
import pytest
from keras import ops

from keras_attention.decoding import BeamSearch, RandomSampler, TopKSampler
from zoo import registry
from zoo.base.generation import (
    GenerativeTask,
    best_sequences,
    make_sampler,
    make_search,
)

PAD, START, END, A, B = range(5)
TINY = 1e-9  # The probability of tokens a model should never write.


def log_table(rows):
    """Log-probabilities of a `{previous: {next: probability}}` table."""
    table = np.full((5, 5), TINY)
    for previous, row in rows.items():
        for token, probability in row.items():
            table[previous, token] = probability
    table /= table.sum(axis=1, keepdims=True)
    return np.log(table).astype("float32")


class Ids:
    """The preprocessor attributes `generate` reads."""

    start_id, end_id, pad_id, sequence_length = START, END, PAD, 6


class TableModel(GenerativeTask):
    """`next` reads token `index - 1` and looks up its logits and attention."""

    def __init__(self, logits, attention, **kwargs):
        ids = keras.Input((None,), dtype="int32", name="token_ids")
        super().__init__(ids, keras.layers.Embedding(5, 2)(ids), **kwargs)
        self.table = np.asarray(logits, "float32")
        self.attention_table = np.asarray(attention, "float32")
        self.preprocessor = Ids()

    def encode(self, inputs, max_length):
        return {"source": ops.convert_to_tensor(inputs)}

    def next(self, prompt, cache, index):
        token = ops.take(prompt, index - 1, axis=1)
        logits = ops.take(ops.convert_to_tensor(self.table), token, axis=0)
        attention = ops.take(ops.convert_to_tensor(self.attention_table), token, 0)
        return logits, attention, cache


# Attention over two source positions: reading START looks at position 0,
# reading anything else looks at position 1.
ATTENTION = np.array([[0, 1], [1, 0], [0, 1], [0, 1], [0, 1]], "float32")
# From START the one-token answer [END] is the most likely; after A the
# end is almost certain, so [A, END] is the best two-token answer.
SHORT_OR_LONG = log_table(
    {
        PAD: {END: 1.0},
        START: {END: 0.5, A: 0.45, B: 0.05},
        END: {END: 1.0},
        A: {END: 0.98, A: 0.01, B: 0.01},
        B: {END: 0.3, A: 0.1, B: 0.6},
    }
)
SOURCE = np.ones((1, 2), "int32")


def gnmt_score(table, tokens, alpha):
    """`log P(Y) / ((5 + |Y|) / 6) ** alpha` of `tokens` after START."""
    log_p = sum(float(table[a, b]) for a, b in zip([START, *tokens], tokens))
    return log_p / ((5 + len(tokens)) / 6) ** alpha


def numpy_greedy(table, batch, max_length):
    """Greedy decoding of the table model, one step at a time in NumPy."""
    tokens = np.full((batch, max_length + 1), PAD, "int32")
    tokens[:, 0] = START
    done = np.zeros(batch, bool)
    for t in range(1, max_length + 1):
        best = table[tokens[:, t - 1]].argmax(-1)
        tokens[:, t] = np.where(done, PAD, best)
        done |= best == END
    return tokens


def random_model(seed, no_end=False):
    logits = np.random.default_rng(seed).normal(size=(5, 5)).astype("float32")
    logits[:, [PAD, START]] = -1e9
    if no_end:
        logits[:, END] = -1e9
    attention = np.random.default_rng(seed + 1).dirichlet([1, 1, 1], 5)
    return TableModel(logits, attention.astype("float32"))


def test_greedy_is_the_argmax_loop_and_beam_width_one():
    model = random_model(seed=3)
    source = np.ones((2, 3), "int32")
    greedy = model.generate(source, beam_width=1, max_length=5)
    np.testing.assert_array_equal(greedy, numpy_greedy(model.table, 2, 5))
    none = model.generate(source, beam_width=None, max_length=5)
    np.testing.assert_array_equal(none, greedy)
    # A beam of one, run directly on the model's encode/next, agrees.
    prompt = np.full((2, 6), PAD, "int32")
    prompt[:, 0] = START
    beam = BeamSearch(beam_width=1, length_penalty=0.0)(
        model.next,
        prompt,
        cache=model.encode(source, 5),
        index=1,
        stop_token_ids=[END],
        pad_token_id=PAD,
    )
    np.testing.assert_array_equal(ops.convert_to_numpy(beam), greedy)


@pytest.mark.tensorflow_only
@pytest.mark.parametrize("beam_width", [1, 3])
def test_a_width_given_as_a_tensor_runs_the_search_of_that_int(beam_width):
    # An export's signature takes the width as a tensor: greedy at 1, else a beam.
    import tensorflow as tf

    model = random_model(4)
    source = np.ones((2, 2), "int32")
    prompt = np.full((2, 5), PAD, "int32")
    prompt[:, 0] = START

    def run(width, source, prompt):
        search = make_search(width, length_penalty=0.6)
        return model.run_search(
            search,
            source,
            prompt,
            stop_token_ids=[END],
            pad_token_id=PAD,
            return_scores=True,
        )

    # A signature's shapes: the batch is unknown.
    ids = tf.TensorSpec([None, None], tf.int32)
    graph = tf.function(run, input_signature=[tf.TensorSpec([], tf.int32), ids, ids])
    traced = graph(tf.constant(beam_width), source, prompt)
    for got, expected in zip(traced, run(beam_width, source, prompt)):
        np.testing.assert_allclose(ops.convert_to_numpy(got), expected, rtol=1e-6)


@pytest.mark.parametrize("beam_width", [1, 3])
@pytest.mark.parametrize("max_length", [1, 4])
def test_max_length_is_the_number_of_steps(beam_width, max_length):
    model = random_model(seed=5, no_end=True)  # It never stops by itself.
    tokens = model.generate(
        np.ones((2, 3), "int32"), beam_width=beam_width, max_length=max_length
    )
    assert tokens.shape == (2, max_length + 1) and tokens.dtype == np.int32
    assert (tokens[:, 0] == START).all()
    assert np.isin(tokens[:, 1:], [A, B]).all()  # Every step wrote a token.


def test_the_default_length_is_the_preprocessor_sequence_length():
    model = random_model(seed=5, no_end=True)
    assert model.generate(SOURCE).shape == (1, Ids.sequence_length + 1)


@pytest.mark.parametrize("beam_width", [1, 2])
def test_the_end_token_stops_a_sequence_and_pads_after_it(beam_width):
    rows = {token: {A: 1.0} for token in (PAD, END, A, B)}
    rows[START] = {A: 1.0}
    rows[A] = {B: 1.0}
    rows[B] = {END: 1.0}
    model = TableModel(log_table(rows), ATTENTION)
    tokens = model.generate(SOURCE, beam_width=beam_width, max_length=6)
    np.testing.assert_array_equal(tokens, [[START, A, B, END, PAD, PAD, PAD]])


def test_length_penalty_prefers_longer_answers_as_documented():
    short, long = [END], [A, END]
    # The ranking the documented GNMT score gives, worked out here.
    assert gnmt_score(SHORT_OR_LONG, short, 0.0) > gnmt_score(SHORT_OR_LONG, long, 0.0)
    assert gnmt_score(SHORT_OR_LONG, long, 2.0) > gnmt_score(SHORT_OR_LONG, short, 2.0)
    model = TableModel(SHORT_OR_LONG, ATTENTION)
    plain = model.generate(SOURCE, beam_width=3, max_length=4)
    penalised = model.generate(SOURCE, beam_width=3, max_length=4, length_penalty=2.0)
    np.testing.assert_array_equal(plain, [[START, END, PAD, PAD, PAD]])
    np.testing.assert_array_equal(penalised, [[START, A, END, PAD, PAD]])
    # Greedy decoding has no penalties: the same answer either way.
    greedy = model.generate(SOURCE, max_length=4, length_penalty=2.0)
    np.testing.assert_array_equal(greedy, plain)


def test_coverage_penalty_prefers_answers_that_attend_everywhere():
    # [END] reads START only: it attends position 0 and never position 1,
    # which costs beta * log(1e-7); [A, END] attends both, costing nothing.
    uncovered = math.log(1e-7)
    assert gnmt_score(SHORT_OR_LONG, [END], 0.0) + 0.5 * uncovered < gnmt_score(
        SHORT_OR_LONG, [A, END], 0.0
    )
    model = TableModel(SHORT_OR_LONG, ATTENTION)
    tokens = model.generate(SOURCE, beam_width=3, max_length=4, coverage_penalty=0.5)
    np.testing.assert_array_equal(tokens, [[START, A, END, PAD, PAD]])
    # Attending everywhere from the start leaves nothing to penalise.
    everywhere = TableModel(SHORT_OR_LONG, np.ones((5, 2), "float32"))
    tokens = everywhere.generate(
        SOURCE, beam_width=3, max_length=4, coverage_penalty=0.5
    )
    np.testing.assert_array_equal(tokens, [[START, END, PAD, PAD, PAD]])


def test_token_attention_has_one_row_per_generated_token():
    model = random_model(seed=7)
    source = np.ones((2, 3), "int32")
    tokens, attention = model.generate(
        source, beam_width=2, max_length=4, return_attention=True
    )
    assert attention.shape == (2, 4, 3) and attention.dtype == np.float32
    # Row t is the attention of the step that read tokens[:, t].
    np.testing.assert_allclose(attention, model.attention_table[tokens[:, :-1]])
    np.testing.assert_allclose(model.token_attention(source, tokens), attention)


@pytest.mark.parametrize(
    "kwargs, error, name",
    [
        ({"beam_width": 0}, ValueError, "beam_width=0"),
        ({"beam_width": -2}, ValueError, "beam_width=-2"),
        ({"max_length": 0}, ValueError, "max_length=0"),
        ({"max_length": -1}, ValueError, "max_length=-1"),
        ({"beam_width": 2.5}, TypeError, "beam_width=2.5"),
        ({"beam_width": True}, TypeError, "beam_width=True"),
        ({"max_length": "4"}, TypeError, "max_length='4'"),
    ],
)
def test_bad_decoding_arguments_name_the_argument(kwargs, error, name):
    model = random_model(seed=1)
    with pytest.raises(error, match=name):
        model.generate(SOURCE, **kwargs)


def test_a_model_without_preprocessor_says_what_is_missing():
    model = random_model(seed=1)
    model.preprocessor = None
    with pytest.raises(ValueError, match="preprocessor=None"):
        model.generate(SOURCE)


def test_a_model_must_implement_encode_and_next():
    ids = keras.Input((None,), dtype="int32")
    model = GenerativeTask(ids, keras.layers.Embedding(5, 2)(ids))
    with pytest.raises(NotImplementedError, match="encode"):
        model.encode(SOURCE, 3)
    with pytest.raises(NotImplementedError, match="next"):
        model.next(SOURCE, {}, 1)


class WeightModel(GenerativeTask):
    """`next`'s logits are the row of an `Embedding` for the token read."""

    def __init__(self, **kwargs):
        ids = keras.Input((None,), dtype="int32", name="token_ids")
        table = keras.layers.Embedding(5, 5, name="table")
        super().__init__(ids, table(ids), **kwargs)
        self.preprocessor = Ids()
        self.next_calls = 0

    def encode(self, inputs, max_length):
        return {"source": ops.convert_to_tensor(inputs)}

    def next(self, prompt, cache, index):
        self.next_calls += 1  # Python calls: traces where the search compiles
        token = ops.take(prompt, index - 1, axis=1)
        logits = self.get_layer("table")(token)
        return logits, ops.ones((ops.shape(token)[0], 2)) / 2, cache

    def answer(self, first):
        """Weights under which the greedy answer is `[first, END]`."""
        table = np.zeros((5, 5), "float32")
        table[:, END] = 1.0
        table[START] = 0.0
        table[START, first] = 1.0
        self.get_layer("table").set_weights([table * 10])


@pytest.mark.parametrize("beam_width", [1, 2])
def test_the_search_compiles_once_per_shape_and_reads_the_current_weights(
    beam_width,
):
    model = WeightModel()
    source = np.ones((2, 3), "int32")
    model.answer(A)
    first = model.generate(source, beam_width=beam_width, max_length=4)
    assert first[:, :3].tolist() == [[START, A, END]] * 2
    traced = model.next_calls
    model.answer(B)  # new weights, same shapes
    second = model.generate(source, beam_width=beam_width, max_length=4)
    assert second[:, :3].tolist() == [[START, B, END]] * 2
    if keras.backend.backend() in ("tensorflow", "jax"):
        assert model.next_calls == traced  # the compiled search, not retraced


#: The translation families (the registry's), each with a tiny model here.
TRANSLATORS = [family.name for family in registry.families("translation")]
VOCAB = ["[PAD]", "[UNK]", "[START]", "[END]", "light", "luz"]


def tiny_translator(family):
    """A tiny untrained translator of the family, with its preprocessor."""
    import zoo

    pre = zoo.TranslationPreprocessor(VOCAB, VOCAB, sequence_length=8)
    if family == "seq2seq":
        return zoo.Seq2Seq(6, 6, embedding_dim=4, units=4, preprocessor=pre)
    assert family == "transformer", f"no tiny {family} translator here"
    model = zoo.Transformer.from_name("tiny", vocabulary_size=6)
    model.preprocessor = pre
    return model


@pytest.mark.parametrize("family", TRANSLATORS)
def test_the_padded_source_changes_no_decoding_step(family):
    # What `generate` pads under JAX is masked: every step's logits, and its
    # attention over the real source positions, are those of the unpadded
    # source; the padding gets no attention.
    model = tiny_translator(family)
    source = np.array([[4, 5, 4, 3], [5, 3, 0, 0]], "int32")
    padded = model.padded_source(source, 16)
    assert padded.shape == (2, 16) and padded.dtype == np.int32
    np.testing.assert_array_equal(padded[:, :4], source)
    assert (padded[:, 4:] == 0).all()
    prompt = ops.convert_to_tensor(np.array([[2, 4, 5, 4]] * 2, "int32"))
    caches = [model.encode(ids, 3) for ids in (source, padded)]
    for index in range(1, 4):
        (logits, attention, cache), (logits_p, attention_p, cache_p) = [
            model.next(prompt, cache, index) for cache in caches
        ]
        caches = [cache, cache_p]
        attention, attention_p = (
            ops.convert_to_numpy(ops.cast(a, "float32"))
            for a in (attention, attention_p)
        )
        np.testing.assert_allclose(
            ops.convert_to_numpy(logits_p), ops.convert_to_numpy(logits), atol=1e-5
        )
        np.testing.assert_allclose(attention_p[:, :4], attention, atol=1e-6)
        assert (attention_p[:, 4:] == 0).all()


def traced_translator():
    """A tiny Transformer translator and the list its `next` calls append to.

    Python calls of `next` are traces: where the search compiles.
    """
    model = tiny_translator("transformer")
    traced = []
    step = model.next

    def next(*args):
        traced.append(args[2])
        return step(*args)

    model.next = next
    return model, traced


@pytest.mark.skipif(
    keras.backend.backend() != "jax", reason="JAX compiles a search per shape"
)
@pytest.mark.parametrize("beam_width", [1, 2])
def test_jax_compiles_one_search_for_near_source_lengths(beam_width):
    model, traced = traced_translator()
    model.generate(np.array([[4, 5, 3]], "int32"), beam_width=beam_width, max_length=3)
    first = len(traced)
    assert first > 0
    # 3, 7 and 16 source positions pad to 16: the compiled search is reused.
    for length in (7, 16):
        source = np.array([[4] * (length - 1) + [3]], "int32")
        model.generate(source, beam_width=beam_width, max_length=3)
    assert len(traced) == first
    model.generate(
        np.array([[4] * 16 + [3]], "int32"), beam_width=beam_width, max_length=3
    )
    assert len(traced) > first  # 17 pads to 32: a new shape


class CopyModel(WeightModel):
    """`next` writes the source token at `index - 1`: the output is the source."""

    def next(self, prompt, cache, index):
        self.next_calls += 1  # Python calls: traces where the search compiles
        token = ops.take(cache["source"], index - 1, axis=1)
        return ops.one_hot(token, 5) * 10.0, ops.ones((ops.shape(token)[0], 2)), cache


@pytest.mark.parametrize("beam_width", [1, 2])
def test_padded_batch_rows_change_no_row_and_are_dropped(beam_width):
    # Each row copies its own source up to [END]: the rows differ, end at
    # different steps (the last never), and come back all, in order.
    source = np.array([[A, END, B], [B, A, END], [A, A, A]], "int32")
    expected = [
        [START, A, END, PAD],
        [START, B, A, END],
        [START, A, A, A],
    ]
    model = CopyModel()
    for batch_size in (None, 3, 5, 2):  # 2 < 3 rows: nothing is cut
        tokens = model.generate(
            source, beam_width=beam_width, max_length=3, batch_size=batch_size
        )
        assert tokens.tolist() == expected, batch_size
    traced = model.next_calls
    # Under JAX two rows padded to 5 reuse the search compiled for 5 rows.
    tokens = model.generate(
        source[:2], beam_width=beam_width, max_length=3, batch_size=5
    )
    assert tokens.tolist() == expected[:2]
    if keras.backend.backend() == "jax":
        assert model.next_calls == traced


def test_a_bad_batch_size_names_the_argument():
    with pytest.raises(ValueError, match="batch_size=0"):
        CopyModel().generate(SOURCE, max_length=2, batch_size=0)


@pytest.mark.skipif(
    keras.backend.backend() != "jax", reason="JAX compiles a search per shape"
)
@pytest.mark.parametrize("beam_width", [1, 2])
@pytest.mark.filterwarnings("ignore:.*reached max_length")  # untrained
def test_jax_compiles_one_search_per_source_bucket_for_a_smaller_last_chunk(
    beam_width,
):
    model, traced = traced_translator()
    texts = ["light", "light light", "luz", "light luz light", "luz luz"]
    model.translate(texts[:2], beam_width=beam_width, max_length=3, batch_size=2)
    first = len(traced)
    assert first > 0
    # Chunks of 2, 2 and 1 sentences, all 16 source positions once padded:
    # the last chunk runs padded to 2 rows, the search compiled once.
    outputs = model.translate(texts, beam_width=beam_width, max_length=3, batch_size=2)
    assert len(traced) == first
    assert len(outputs) == len(texts) and all(isinstance(o, str) for o in outputs)


# === Samplers: drawn through `generate` and the verbs ===


class CountingTable(TableModel):
    """`TableModel` counting the Python calls of `next` (traces when compiled)."""

    next_calls = 0

    def next(self, prompt, cache, index):
        self.next_calls += 1
        return super().next(prompt, cache, index)


def test_a_sampler_compiles_once_for_every_seed_and_its_seed_reproduces():
    logits = np.zeros((5, 5), "float32")  # Every token alike but two.
    logits[:, [PAD, START]] = -1e9
    model = CountingTable(logits, ATTENTION)
    source = np.ones((32, 2), "int32")
    first = model.generate(source, max_length=4, sampler=RandomSampler(seed=1))
    traced = model.next_calls
    again = model.generate(source, max_length=4, sampler=RandomSampler(seed=1))
    other = model.generate(source, max_length=4, sampler=RandomSampler(seed=2))
    np.testing.assert_array_equal(again, first)
    assert (other != first).any()
    assert len({tuple(row) for row in first}) > 1  # Rows draw apart.
    if keras.backend.backend() in ("tensorflow", "jax"):
        assert model.next_calls == traced  # The seed is an input.


def test_a_top_one_sampler_decodes_greedily():
    model = random_model(3)
    source = np.ones((4, 2), "int32")
    tokens = model.generate(source, max_length=5, sampler=TopKSampler(k=1))
    np.testing.assert_array_equal(tokens, numpy_greedy(model.table, 4, 5))


def test_make_sampler_reads_hugging_face_arguments():
    assert make_sampler().get_config() == {"seed": None, "temperature": 1.0}
    sampler = make_sampler(top_k=3, top_p=0.5, temperature=0.7, seed=4)
    assert sampler.get_config() == {"p": 0.5, "k": 3, "seed": 4, "temperature": 0.7}
    with pytest.raises(ValueError, match="top_k|k=0"):
        make_sampler(top_k=0)


@pytest.mark.filterwarnings("ignore:.*reached max_length")  # untrained
def test_translate_draws_num_return_sequences_per_sentence():
    model = tiny_translator("seq2seq")
    texts = ["light", "light light light"]
    sampler = TopKSampler(k=4, seed=5)
    outputs = model.translate(texts, sampler=sampler, num_return_sequences=3)
    assert len(outputs) == 6 and all(isinstance(o, str) for o in outputs)
    again = model.translate(texts, sampler=sampler, num_return_sequences=3)
    assert again == outputs
    # One sentence and several sequences: a list, not a string.
    single = model.translate(texts[1], sampler=sampler, num_return_sequences=3)
    assert isinstance(single, list) and len(single) == 3
    with pytest.raises(ValueError, match="num_return_sequences"):
        model.translate(texts, beam_width=1, num_return_sequences=2)
    with pytest.raises(TypeError, match="sampler"):
        model.translate(texts, sampler="top_k")


def tiny_captioner():
    """A tiny untrained Show-Attend-Tell with its preprocessor, and 2 images."""
    import zoo

    vocabulary = ["[PAD]", "[UNK]", "[START]", "[END]", "a", "bag"]
    model = zoo.ShowAttendTell(
        len(vocabulary),
        annotation_dim=8,
        embedding_dim=4,
        units=8,
        preprocessor=zoo.CaptionPreprocessor(vocabulary, sequence_length=4),
    )
    images = np.random.default_rng(0).uniform(size=(2, 28, 28)).astype("float32")
    return model, images


@pytest.mark.filterwarnings("ignore:.*reached max_length")  # untrained
def test_caption_draws_num_return_sequences_per_image():
    model, images = tiny_captioner()
    sampler = RandomSampler(seed=0, temperature=2.0)
    texts = model.caption(images, sampler=sampler, num_return_sequences=4)
    assert len(texts) == 8 and all(isinstance(t, str) for t in texts)
    assert model.caption(images, sampler=sampler, num_return_sequences=4) == texts


def test_a_beam_search_returns_its_n_best_finished_hypotheses():
    # The two best answers of the table by brute force: every sequence of
    # at most 3 tokens that ends with [END], ranked by log-probability.
    model = TableModel(SHORT_OR_LONG, ATTENTION)
    answers = [[END]] + [[a, END] for a in (A, B)]
    answers += [[a, b, END] for a in (A, B) for b in (A, B)]
    best = sorted(answers, key=lambda y: -gnmt_score(SHORT_OR_LONG, y, 0.0))[:2]
    search = make_search(3, num_return_sequences=2, length_penalty=0.0)
    tokens = model.generate_with(search, np.ones((2, 2), "int32"), 3, batch_size=2)
    assert tokens.shape == (2, 3, 4)
    for row in best_sequences(tokens, 2).reshape(2, 2, 4):  # each source row
        got = [[t for t in hypothesis[1:] if t != PAD] for hypothesis in row]
        assert got == best


@pytest.mark.filterwarnings("ignore:.*reached max_length")  # untrained
def test_translate_returns_the_n_best_of_the_beam_in_a_row():
    model = tiny_translator("seq2seq")
    texts = ["light", "light light light"]
    outputs = model.translate(texts, beam_width=3, num_return_sequences=2)
    assert len(outputs) == 4 and all(isinstance(o, str) for o in outputs)
    # The first of each sentence's pair is its one best translation.
    assert outputs[0::2] == model.translate(texts, beam_width=3)
    outputs, alignments = model.translate(
        texts, beam_width=3, num_return_sequences=2, return_attention=True
    )
    assert len(alignments) == 4
    assert alignments[3]["source_tokens"] == ["light"] * 3 + ["[END]"]
    with pytest.raises(ValueError, match="num_return_sequences=4, beam_width=3"):
        model.translate(texts, beam_width=3, num_return_sequences=4)


@pytest.mark.filterwarnings("ignore:.*reached max_length")  # untrained
def test_caption_returns_the_n_best_of_the_beam_in_a_row():
    model, images = tiny_captioner()
    texts, maps = model.caption(
        images, beam_width=3, num_return_sequences=3, return_attention=True
    )
    assert len(texts) == 6 and len(maps) == 6
    assert texts[0::3] == model.caption(images, beam_width=3)
    with pytest.raises(ValueError, match="num_return_sequences=2, beam_width=1"):
        model.caption(images, beam_width=1, num_return_sequences=2)
