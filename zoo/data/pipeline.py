"""The tail of every `tf.data` pipeline the zoo builds: prefetch, fixed knobs.

`finish(dataset)` prefetches and turns off tf.data's autotuning *model
thread* (`tf.data.Options().autotune.enabled = False`); `AUTOTUNE` values
in the pipeline then take tf.data's fixed defaults (one parallel call per
core for `map`, a small prefetch buffer).

Why: with TensorFlow 2.21 on a CPU, deleting an iterator whose autotuning
thread runs can wait, idle, for that thread to wake. Keras's `fit` makes a
new iterator each epoch and drops the previous one as the epoch begins, so
long epochs began with the core idle: 16 s of each 41 s epoch of the
8-glimpse RAM on Fashion-MNIST (gdb: the main thread in
`RootDataset::Iterator::~Iterator`, one thread in `Model::OptimizeLoop`);
24-25 s per epoch without the thread, the same weights after each epoch.
`benchmarks/epoch_stall.py` measures it.

A dataset whose options already say `autotune.enabled` keeps the caller's
choice.
"""


def finish(dataset):
    """`dataset.prefetch(AUTOTUNE)` without the autotuning model thread.

    Args:
        dataset: a `tf.data.Dataset`.

    Returns:
        The dataset, prefetched, with `options().autotune.enabled` False
        unless the caller had set it.

    Example:
    >>> import tensorflow as tf
    >>> ds = finish(tf.data.Dataset.range(3))
    >>> ds.options().autotune.enabled, [int(x) for x in ds]
    (False, [0, 1, 2])
    >>> tuned = tf.data.Options()
    >>> tuned.autotune.enabled = True
    >>> finish(tf.data.Dataset.range(3).with_options(tuned)).options().autotune.enabled
    True
    """
    import tensorflow as tf

    if not isinstance(dataset, tf.data.Dataset):
        raise TypeError(
            f"dataset must be a tf.data.Dataset. Received: {type(dataset).__name__}"
        )
    dataset = dataset.prefetch(tf.data.AUTOTUNE)
    if dataset.options().autotune.enabled is not None:
        return dataset  # The caller's choice.
    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.with_options(options)
