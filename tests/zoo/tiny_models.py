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


def seq2seq(seed=0, vocabulary=None):
    """A GRU `zoo.Seq2Seq`, 12 units, no dropout, with its preprocessor.

    `vocabulary` (both sides) stands in for those learned from the sample
    (learning one needs TensorFlow).
    """
    import keras

    from zoo.seq2seq import Seq2Seq
    from zoo.translation import TranslationPreprocessor

    source_vocab, target_vocab = (
        (vocabulary, vocabulary) if vocabulary else _seq2seq_vocabularies()
    )
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
    return sparse_categorical_loss()


def transformer(seed=0, vocabulary=None):
    """A 1-layer, d_model 16 `zoo.Transformer`, shared vocabulary, no dropout."""
    import keras

    from zoo.transformer import Transformer
    from zoo.translation import TranslationPreprocessor

    vocab = vocabulary or _joint_vocabulary()
    keras.utils.set_random_seed(seed)
    preprocessor = TranslationPreprocessor(vocab, vocab, 48, 48, lowercase=True)
    return Transformer(
        len(vocab),
        num_layers=1,
        hidden_dim=16,
        intermediate_dim=32,
        num_heads=2,
        dropout=0.0,
        preprocessor=preprocessor,
    )


@functools.lru_cache(maxsize=1)
def _joint_vocabulary():
    from zoo.data import vocabulary

    sources, targets = zip(*bible_pairs())
    return vocabulary.train_wordpiece(sources + targets, 400)


def transformer_loss():
    """The loss `zoo/transformer/train.py` trains with (label smoothing 0.1)."""
    from zoo.transformer import MaskedLabelSmoothingCrossEntropy

    return MaskedLabelSmoothingCrossEntropy(0.1)


def fashion_mnist_batch(size=9):
    """`size` real Fashion-MNIST training images, translated on 40x40 canvases.

    An odd global batch is split 5/4 over 2 replicas: the replicas average
    their losses over different numbers of images, the case a per-replica
    mean gets wrong (Keras's own last partial batch of `fit` is one).
    """
    from zoo.data import fashion_mnist

    images, labels = fashion_mnist.load_arrays("train", fashion_mnist.sample_path())
    canvases = fashion_mnist.translate(images[:size], canvas_size=40, seed=0)[0]
    return canvases, labels[:size].astype("int32")


def ram(seed=0):
    """A 3-glimpse `zoo.RecurrentAttentionModel` in a deterministic setting.

    Sampling differs per replica by design (`zoo.ram.layers.replica_normal`;
    tests/zoo/ram/test_distributed.py checks that the replicas draw
    different noise), so one device and two replicas never see the same
    glimpse path. Two settings make the step comparable without changing
    the model: `location_std=1e-7` puts every sampled location within a few
    float32 roundings of the policy mean (the glimpse corners, rounded to
    whole pixels, are those of the mean), and `reinforce_weight=0` drops
    the REINFORCE term, whose gradient `(l - mean) / std**2` would amplify
    that noise by 1e7. What is compared is then the cross-entropy plus the
    baseline's squared error (reward 1 for a correct class) and their
    gradients for every variable; the location policy's gradient is zero
    on both sides.
    """
    import keras

    from zoo.ram import RecurrentAttentionModel

    keras.utils.set_random_seed(seed)
    return RecurrentAttentionModel(
        num_classes=10,
        num_glimpses=3,
        patch_size=4,
        num_scales=2,
        glimpse_units=8,
        location_units=8,
        glimpse_output_units=16,
        units=16,
        location_std=1e-7,
        reinforce_weight=0.0,
        seed=seed,
    )


def randomized(model, scale, seed=1):
    """Gives `model` random trainable weights (normal, std `scale`), so tiny
    models give varied answers (a fresh model's are nearly uniform)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    for variable in model.trainable_weights:
        variable.assign(rng.normal(0, scale, variable.shape).astype("float32"))
    return model


def exportable_ram(channels=1, cell="rnn", class_names=("cat", "dog", "owl", "yak")):
    """A tiny built RAM with named classes and random weights (std 0.5), for
    the export and serving tests."""
    import keras
    import numpy as np

    from zoo.ram import RecurrentAttentionModel

    keras.utils.set_random_seed(0)
    model = RecurrentAttentionModel(
        num_classes=len(class_names),
        channels=channels,
        num_glimpses=3,
        patch_size=4,
        num_scales=2,
        glimpse_units=8,
        location_units=8,
        glimpse_output_units=16,
        units=16,
        cell=cell,
        seed=0,
        class_names=list(class_names),
    )
    model(np.zeros((1, 8, 8, channels), "uint8"))
    return randomized(model, 0.5)


def sparse_categorical_loss():
    import keras

    return keras.losses.SparseCategoricalCrossentropy(from_logits=True)


@functools.lru_cache(maxsize=1)
def _scenes():
    """16 real scenes of Fashion-MNIST items with their generated captions."""
    from zoo.data import scenes

    return scenes.load("train", num_scenes=16, sample=True)


def scenes_batch(size=6):
    """`size` (84x84 scene, caption) pairs of 2 to 12 words.

    The first three captions hold 25 words, the next three 36: the two
    replicas of the default batch weigh different numbers of tokens.
    """
    from zoo.data import scenes

    images, captions = scenes.pairs(_scenes())
    return images[:size], captions[:size]


@functools.lru_cache(maxsize=1)
def _caption_vocabulary():
    from zoo.data import vocabulary

    return vocabulary.train_wordpiece(_scenes()["captions"], 100)


def show_attend_tell(seed=0, vocabulary=None, **overrides):
    """A soft-attention `zoo.ShowAttendTell` (deterministic), no dropout.

    The doubly stochastic penalty (`attention_regularization=1`) is on, so
    the `add_loss` term is compared too. `overrides` (e.g. `image_shape`)
    go to the model.
    """
    import keras

    from zoo.show_attend_tell import CaptionPreprocessor, ShowAttendTell

    vocab = vocabulary or _caption_vocabulary()
    keras.utils.set_random_seed(seed)
    return ShowAttendTell(
        len(vocab),
        annotation_dim=8,
        embedding_dim=8,
        units=16,
        attention="soft",
        dropout=0.0,
        seed=seed,
        preprocessor=CaptionPreprocessor(vocab, 20),
        **overrides,
    )


def transformer_captioner(seed=0, vocabulary=None, **overrides):
    """A `zoo.TransformerCaptioner` with 2 heads of 8, no dropout."""
    import keras

    from zoo.captioning import CaptionPreprocessor
    from zoo.transformer_captioner import TransformerCaptioner

    vocab = vocabulary or _caption_vocabulary()
    keras.utils.set_random_seed(seed)
    return TransformerCaptioner(
        len(vocab),
        encoder_layers=1,
        decoder_layers=1,
        hidden_dim=16,
        intermediate_dim=32,
        num_heads=2,
        dropout=0.0,
        preprocessor=CaptionPreprocessor(vocab, 20),
        **overrides,
    )


# name -> (model factory(seed), global batch (x, y) of raw samples, loss)
CASES = {
    "seq2seq": (seq2seq, seq2seq_batch, seq2seq_loss),
    "transformer": (transformer, seq2seq_batch, transformer_loss),
    "ram": (ram, fashion_mnist_batch, sparse_categorical_loss),
    "show_attend_tell": (show_attend_tell, scenes_batch, sparse_categorical_loss),
    "transformer_captioner": (
        transformer_captioner,
        scenes_batch,
        sparse_categorical_loss,
    ),
}


def case_with_samples(name):
    """`(model, x, y)` of case `name`: a fresh model (seed 0) and its raw
    batch, tuples of samples as lists (the form `Task.fit` takes)."""
    factory, batch, _ = CASES[name]
    x, y = batch()
    x = list(x) if isinstance(x, tuple) else x
    y = list(y) if isinstance(y, tuple) else y
    return factory(0), x, y


# The model the multi-worker test trains (the issue asks for the tiny
# Transformer there).
MULTI_WORKER_CASE = "transformer"


def dataset(x, y, batch_size, shuffle_seed=None, sized=True):
    """`tf.data` of raw samples, batched.

    In a fixed order, or with `shuffle_seed` in a new seeded order each
    epoch (`reshuffle_each_iteration`). With `sized=False` the number of
    batches is unknown (as after bucketing by length).
    """
    import tensorflow as tf

    data = tf.data.Dataset.from_tensor_slices((tf.constant(x), tf.constant(y)))
    if shuffle_seed is not None:
        data = data.shuffle(len(x), seed=shuffle_seed, reshuffle_each_iteration=True)
    if not sized:
        data = data.filter(lambda x, y: True)
    return data.batch(batch_size)
