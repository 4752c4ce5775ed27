"""The tail of every `tf.data` pipeline the zoo builds: prefetch, fixed knobs.

`finish(dataset)` prefetches and turns off tf.data's autotuning *model
thread* (`tf.data.Options().autotune.enabled = False`); `AUTOTUNE` values
in the pipeline then take tf.data's fixed defaults (one parallel call per
core for `map`, a small prefetch buffer).

Why: with TensorFlow 2.21 on a CPU, deleting an iterator whose autotuning
thread runs waits, idle, for that thread's next wake-up. Keras's `fit`
makes a new iterator each epoch and drops the previous one as the next
epoch begins, so epochs began with the core idle (gdb: the main thread in
`RootDataset::Iterator::~Iterator`, one thread asleep in
`Model::OptimizeLoop`). The waits measured fit wake-ups at 10 ms x
(2**n - 1) after the iterator starts (a period doubling from 10 ms): a 24 s
epoch of the 8-glimpse RAM on Fashion-MNIST waited until 41 s (16.3 s
idle), a 1.6 s FC epoch until 2.5 s, a 19 s epoch only until 20.5 s.
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
