"""Tiny zoo models and tiny real batches for the distribution and fault tests.

One entry of `CASES` per zoo model: a factory that builds the model from a
seed (same seed, same weights) and a global batch of real raw samples, as
the model's `fit` takes them. Adding a zoo model to the distribution,
multi-worker and fault-tolerance tests is one more entry here.

The factories must be deterministic given the seed (no dropout; stochastic
models in their deterministic mode), since the tests compare runs
bit-for-bit or to float tolerance.

The worker scripts beside this file import it by path; TensorFlow and the
zoo are imported inside the functions, so listing `CASES` is cheap.
"""

import functools
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@functools.lru_cache(maxsize=1)
def bible_pairs():
    """The first 16 pairs of the shipped Bible EN-ES sample (real verses)."""
    from zoo.data import bible, parallel_text

    pairs = parallel_text.read_tsv(bible.sample_path("train"))
    return tuple(pairs[:16])


def seq2seq_batch(size=8):
    """A global batch of `size` real (english, spanish) verse pairs.

    The verses have different lengths, so the replicas of a split batch hold
    different numbers of target tokens: what a per-replica loss average
    would get wrong.
    """
    pairs = bible_pairs()[:size]
    return [p[0] for p in pairs], [p[1] for p in pairs]


@functools.lru_cache(maxsize=1)
def _seq2seq_vocabularies():
    from zoo.data import vocabulary

    sources, targets = zip(*bible_pairs())
    return (
        vocabulary.train_wordpiece(sources, 300),
        vocabulary.train_wordpiece(targets, 300),
    )


def seq2seq(seed=0):
    """A GRU `zoo.Seq2Seq`, 12 units, no dropout, with its preprocessor."""
    import keras

    from zoo.seq2seq import Seq2Seq, TranslationPreprocessor

    source_vocab, target_vocab = _seq2seq_vocabularies()
    keras.utils.set_random_seed(seed)
    preprocessor = TranslationPreprocessor(
        source_vocab, target_vocab, 48, 48, lowercase=True
    )
    return Seq2Seq(
        len(source_vocab),
        len(target_vocab),
        embedding_dim=12,
        units=12,
        cell="gru",
        dropout=0.0,
        preprocessor=preprocessor,
    )


def seq2seq_loss():
    import keras

    return keras.losses.SparseCategoricalCrossentropy(from_logits=True)


# name -> (model factory(seed), global batch (x, y) of raw samples, loss)
CASES = {
    "seq2seq": (seq2seq, seq2seq_batch, seq2seq_loss),
    # "transformer": (transformer, seq2seq_batch, seq2seq_loss),
    # "ram": (ram, fashion_mnist_batch, ...),
    # "show_attend_tell": (show_attend_tell, scenes_batch, ...),
}

# The model the multi-worker test trains. TODO(issue 7): switch to
# "transformer" (and add its CASES entry above) once zoo.Transformer lands;
# the issue asks for the tiny Transformer there.
MULTI_WORKER_CASE = "seq2seq"


def dataset(x, y, batch_size):
    """`tf.data` of raw samples, batched, in a fixed order (no shuffling)."""
    import tensorflow as tf

    data = tf.data.Dataset.from_tensor_slices((tf.constant(x), tf.constant(y)))
    return data.batch(batch_size)
