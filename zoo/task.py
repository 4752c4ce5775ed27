"""`Task`: the base of every zoo model.

A `Task` is a functional `keras.Model` with a `preprocessor` (a layer that
turns raw samples, e.g. strings, into model inputs inside `tf.data`), so
`fit`, `evaluate` and `predict` accept raw data as well as already-prepared
inputs; and it saves to / loads from preset directories
(`keras_attention.presets`).
"""

import os
import warnings

import keras
import tensorflow as tf

from keras_attention import presets
from keras_attention.training.strategy import needs_static_shapes

PRESETS_DIR = os.path.join(os.path.dirname(__file__), "presets")


def given_dataset(x, y=None, sample_weight=None):
    """`x` when it is a `tf.data.Dataset` (its labels inside it), else None."""
    if not isinstance(x, tf.data.Dataset):
        return None
    if y is not None or sample_weight is not None:
        raise ValueError(
            "When `x` is a tf.data.Dataset, pass labels inside it, not "
            f"as `y`. Received: type(y)={type(y).__name__}"
        )
    return x


def sliced(data, shuffle=False):
    """A dataset of the samples of `data` (arrays), reshuffled every epoch if asked."""
    dataset = tf.data.Dataset.from_tensor_slices(data)
    if shuffle:
        count = int(dataset.cardinality())
        dataset = dataset.shuffle(count, reshuffle_each_iteration=True)
    return dataset


def _is_raw(spec):
    """Whether a (nested) element spec holds strings to preprocess."""
    return any(s.dtype == tf.string for s in tf.nest.flatten(spec))


def _rank(spec):
    return tf.nest.flatten(spec)[0].shape.rank


class Task(keras.Model):
    """Base class of zoo models: raw-data `fit`/`evaluate`/`predict` + presets.

    Subclasses build a functional graph in `__init__` and set
    `self.preprocessor` (or `None`). Datasets of raw samples are batched when
    unbatched (with `batch_size`, default 32) and mapped through the
    preprocessor; prepared inputs pass through untouched.
    """

    static_shapes = False

    def use_static_shapes(self, enabled=True):
        """Feeds `fit`/`evaluate` batches of one fixed shape (for TPUs, XLA).

        With static shapes, raw samples are batched with
        `drop_remainder=True` (the last partial batch of an epoch is
        skipped) and a preprocessor with a `trim_padding` option pads every
        batch to its full sequence length instead of the batch's longest
        row, so every step sees the same shapes and XLA compiles once.
        `predict` never drops samples. Datasets the caller batched are not
        re-batched: batch them with `drop_remainder=True` yourself. The
        preprocessor's `trim_padding` is part of its config: call
        `use_static_shapes(False)` before `save_to_preset` for a preset
        that trims padding again.

        Args:
            enabled: bool. Defaults to `True`.

        Returns:
            The model (so calls can be chained).

        Example:
        >>> import zoo
        >>> model = zoo.Seq2Seq.from_preset("seq2seq_bahdanau_bible_en_es")
        >>> model = model.use_static_shapes()
        >>> model.static_shapes, model.preprocessor.trim_padding
        (True, False)
        """
        self.static_shapes = bool(enabled)
        if hasattr(self.preprocessor, "trim_padding"):
            self.preprocessor.trim_padding = not self.static_shapes
        return self

    def _batch(self, dataset, batch_size, drop_remainder):
        """Batches unbatched samples (32 when `batch_size` is `None`).

        `drop_remainder` says the caller may drop a last partial batch
        (`fit`, `evaluate`); it is dropped only with static shapes on.
        """
        return dataset.batch(
            batch_size or 32, drop_remainder=drop_remainder and self.static_shapes
        )

    def preprocess_samples(self, x, y=None, sample_weight=None):
        """Maps one batch of raw samples to `(inputs, labels, sample_weight)`."""
        if self.preprocessor is None:
            return keras.utils.pack_x_y_sample_weight(x, y, sample_weight)
        return self.preprocessor(x, y, sample_weight)

    def _as_dataset(
        self,
        x,
        y=None,
        sample_weight=None,
        batch_size=None,
        shuffle=False,
        drop_remainder=False,
    ):
        dataset = given_dataset(x, y, sample_weight)
        if dataset is None:
            data = keras.utils.pack_x_y_sample_weight(x, y, sample_weight)
            if not _is_raw(tf.nest.map_structure(tf.constant, data)):
                return None
            dataset = sliced(data, shuffle)
        if not _is_raw(dataset.element_spec):
            return dataset if batch_size is None else None
        if _rank(dataset.element_spec) == 0:
            dataset = self._batch(dataset, batch_size, drop_remainder)
        elif batch_size is not None:
            raise ValueError(
                "The dataset is already batched: do not pass `batch_size`. "
                f"Received: batch_size={batch_size}"
            )

        batch = tf.nest.flatten(dataset.element_spec)[0].shape[0]

        def preprocess(*sample):
            prepared = self.preprocess_samples(*sample)
            if self.static_shapes and batch is not None:
                # Tokenizers lose the static batch size; TPUs need it back.
                prepared = tf.nest.map_structure(
                    lambda t: tf.ensure_shape(t, [batch] + t.shape[1:]), prepared
                )
            return prepared

        return dataset.map(preprocess, num_parallel_calls=tf.data.AUTOTUNE).prefetch(
            tf.data.AUTOTUNE
        )

    def fit(self, x=None, y=None, batch_size=None, sample_weight=None, **kwargs):
        shuffle = kwargs.pop("shuffle", True)
        dataset = self._as_dataset(
            x, y, sample_weight, batch_size, shuffle=shuffle, drop_remainder=True
        )
        validation = kwargs.pop("validation_data", None)
        if validation is not None:
            if isinstance(validation, tf.data.Dataset):
                validation = (
                    self._as_dataset(validation, drop_remainder=True) or validation
                )
            else:
                prepared = self._as_dataset(
                    *validation, batch_size=batch_size, drop_remainder=True
                )
                validation = prepared if prepared is not None else validation
        if dataset is None:
            return super().fit(
                x,
                y,
                batch_size=batch_size,
                sample_weight=sample_weight,
                validation_data=validation,
                shuffle=shuffle,
                **kwargs,
            )
        # Raw samples were shuffled before batching (lists) or are the
        # caller's dataset to shuffle (tf.data), so Keras must not.
        return super().fit(dataset, validation_data=validation, shuffle=False, **kwargs)

    def evaluate(self, x=None, y=None, batch_size=None, sample_weight=None, **kwargs):
        dataset = self._as_dataset(x, y, sample_weight, batch_size, drop_remainder=True)
        if dataset is None:
            return super().evaluate(
                x, y, batch_size=batch_size, sample_weight=sample_weight, **kwargs
            )
        return super().evaluate(dataset, **kwargs)

    def predict(self, x, batch_size=None, **kwargs):
        dataset = self._as_dataset(x, batch_size=batch_size)
        if dataset is None:
            return super().predict(x, batch_size=batch_size, **kwargs)
        return super().predict(dataset, **kwargs)

    # Distribution --------------------------------------------------------

    def compute_loss(
        self, x=None, y=None, y_pred=None, sample_weight=None, training=True
    ):
        """The compiled loss, averaged over the global batch under `tf.distribute`.

        Keras divides each replica's loss by that replica's own count of
        (unmasked) outputs, e.g. target tokens, and then averages the
        replicas, so a token in a short slice of the batch would weigh more
        than one in a long slice. The sample weights of each replica are
        scaled by `replicas * local count / global count` instead, which
        makes the summed gradients those of the mean over every output of
        the global batch, as on one device. The value returned is adjusted
        (without touching its gradient) so that the loss Keras logs is that
        mean too, even when the replicas hold different numbers of samples
        (see `logged_as_share`).
        """
        sample_weight = _global_average_weights(y, y_pred, sample_weight)
        loss = super().compute_loss(x, y, y_pred, sample_weight, training=training)
        return logged_as_share(loss, _samples(x, y))

    def train_step(self, data):
        return _per_worker_logs(super().train_step(data))

    def test_step(self, data):
        return _per_worker_logs(super().test_step(data))

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        # Keras 3 averages the first distributed batch over all replicas to
        # build the model, which MultiWorkerMirroredStrategy cannot do for a
        # dict of inputs (keras-team/keras#20329), nor for batches trimmed to
        # different lengths. Only shapes matter: this worker's batch has them.
        strategy = self._distribute_strategy
        if iterator is not None and strategy is not None:
            for _, _, batches in iterator:
                data_batch = tf.nest.map_structure(
                    lambda v: (
                        strategy.experimental_local_results(v)[0]
                        if isinstance(v, tf.distribute.DistributedValues)
                        else v
                    ),
                    next(batches),
                )
                break
            iterator = None
        return super()._maybe_symbolic_build(iterator=iterator, data_batch=data_batch)

    @classmethod
    def from_config(cls, config):
        """Rebuilds a subclass from its `get_config()`.

        Zoo models' configs are their constructor arguments, with the
        preprocessor serialized as a Keras object.
        """
        config = dict(config)
        pre = config.get("preprocessor")
        if isinstance(pre, dict):
            config["preprocessor"] = keras.saving.deserialize_keras_object(pre)
        return cls(**config)

    # Presets -------------------------------------------------------------

    def save_to_preset(self, directory, metadata=None):
        """Saves config, weights, preprocessor assets and metadata.

        Args:
            directory: str. The preset directory to write.
            metadata: optional dict stored in `metadata.json` (metrics, the
                training command, data split, hardware).

        Returns:
            The metadata written.
        """
        return presets.save_preset(
            self, directory, preprocessor=self.preprocessor, metadata=metadata
        )

    @classmethod
    def from_preset(cls, preset, load_weights=True, **overrides):
        """Loads a shipped preset by name, or a preset directory.

        The preset is verified and loaded safely (`keras_attention.presets`),
        then checked for consistency: its vocabularies must match the
        model's vocabulary sizes and `end_token_id`, and its sequence
        lengths must lie in `[2, MAX_SEQUENCE_LENGTH]`.

        Args:
            preset: str or path-like. A name from `zoo.list_presets()`, or a
                directory (see `resolve_preset`).
            load_weights: bool. Defaults to `True`.
            **overrides: config entries to change (e.g. `dropout=0.0`).

        Returns:
            The model, with its preprocessor and `model.preset_metadata`.

        Raises:
            ValueError: an unknown name, or a `PresetError` naming what is
                wrong with the directory.
        """
        directory = resolve_preset(preset)
        model, _, meta = presets.load_preset(
            directory,
            expected_class=None if cls is Task else cls,
            load_weights=load_weights,
            preprocessor_key="preprocessor",
            **overrides,
        )
        _check_consistent(model, directory)
        model.preset_metadata = meta
        return model


# The longest sequence length a preset may ask for (an edited 10**12 would
# only fail when `translate` allocates it).
MAX_SEQUENCE_LENGTH = 8192


def _check_consistent(model, directory):
    """Refuses a loaded preset whose preprocessor and model disagree."""
    pre = getattr(model, "preprocessor", None)
    if pre is None:
        return
    for key, value in pre.get_config().items():
        if key.endswith("sequence_length") and isinstance(value, int):
            if not 2 <= value <= MAX_SEQUENCE_LENGTH:
                raise presets.PresetError(
                    f"Preset {directory}: its preprocessor's {key}={value} is "
                    f"outside [2, {MAX_SEQUENCE_LENGTH}]."
                )
    config = model.get_config()
    for attribute in ("tokenizer", "source_tokenizer", "target_tokenizer"):
        tokenizer = getattr(pre, attribute, None)
        if not hasattr(tokenizer, "vocabulary_size"):
            continue
        key = attribute.replace("tokenizer", "vocabulary_size")
        expected = config.get(key) or config.get("vocabulary_size")
        size = tokenizer.vocabulary_size()
        if expected is not None and size != expected:
            raise presets.PresetError(
                f"Preset {directory}: its {attribute} vocabulary holds {size} "
                f"tokens, but the model was built for {expected} (the "
                "vocabulary or the config was edited)."
            )
    end = config.get("end_token_id")
    tokenizer = getattr(pre, "target_tokenizer", getattr(pre, "tokenizer", None))
    if isinstance(end, int) and hasattr(tokenizer, "token_to_id"):
        if tokenizer.token_to_id("[END]") != end:
            raise presets.PresetError(
                f"Preset {directory}: the model's end_token_id={end} is not "
                "the id of [END] in its vocabulary."
            )


def _global_average_weights(y, y_pred, sample_weight):
    """Sample weights that make each replica's loss a share of the global mean."""
    context = tf.distribute.get_replica_context()
    replicas = tf.distribute.get_strategy().num_replicas_in_sync
    if replicas == 1 or context is None or y is None:
        return sample_weight
    # What Keras divides a replica's loss by: its unmasked outputs (e.g. real
    # target tokens), else its samples (other axes are equal across replicas).
    labels = tf.nest.flatten(y)[0]
    mask = getattr(y_pred, "_keras_mask", None)
    if mask is not None:
        count = tf.reduce_sum(tf.cast(mask, "float32"))
    else:
        count = tf.cast(tf.shape(labels)[0], "float32")
    total = context.all_reduce(tf.distribute.ReduceOp.SUM, count)
    scale = tf.math.divide_no_nan(replicas * count, total)
    if sample_weight is None:
        sample_weight = tf.ones(tf.shape(labels)[:1])
    return tf.nest.map_structure(lambda w: tf.cast(w, "float32") * scale, sample_weight)


def _samples(x, y):
    """The number of samples of a batch (the rows of its first input)."""
    first = next((t for t in tf.nest.flatten((x, y)) if t is not None), None)
    return 0 if first is None else tf.shape(first)[0]


def logged_as_share(value, samples, total=None):
    """A replica's loss share, with the value Keras's loss tracker needs.

    Under `tf.distribute`, `value` is this replica's share of a loss that is
    a mean over the global batch (the shares add up to it, and so do their
    gradients). Keras logs `sum_r replicas * value_r * b_r / B`, each
    replica's loss weighted by its own sample count `b_r` (`B` the global
    count), which is that mean only when every `b_r` is `B / replicas`.
    This returns `value * B / (replicas * b_r)` with the gradient of
    `value` (a `stop_gradient` correction), so the logged loss is the
    global mean for any split. Off a replica context, or with one replica,
    `value` is returned unchanged.

    Args:
        value: scalar float tensor, this replica's share.
        samples: int scalar, this replica's number of samples `b_r`.
        total: optional float32 scalar, `B` when the caller has already
            all-reduced it.

    Returns:
        A scalar tensor with the value described and the gradient of `value`.
    """
    context = tf.distribute.get_replica_context()
    replicas = tf.distribute.get_strategy().num_replicas_in_sync
    if replicas == 1 or context is None:
        return value
    local = tf.cast(samples, value.dtype)
    if total is None:
        total = context.all_reduce(tf.distribute.ReduceOp.SUM, local)
    factor = tf.math.divide_no_nan(tf.cast(total, value.dtype), replicas * local)
    return value + tf.stop_gradient(value * (factor - 1.0))


def global_batch_mean(values):
    """This replica's share of the mean of per-sample `values` over the global batch.

    Returns `sum(values) / N` (float32), `N` the number of samples of the
    global batch (all-reduced across replicas). For loss terms a model adds
    to its compiled loss (e.g. REINFORCE). `tf.distribute` sums the replicas'
    gradients, so they add up to the gradient of the global-batch mean, as
    for Keras's compiled losses, even when the replicas hold different
    numbers of samples (e.g. the last, partial batch). On one device this is
    the plain mean. Its value, not its gradient, is adjusted for Keras's
    loss log (`logged_as_share`).
    """
    samples = tf.shape(values)[0]
    count = tf.cast(samples, "float32")
    context = tf.distribute.get_replica_context()
    replicas = tf.distribute.get_strategy().num_replicas_in_sync
    if replicas > 1 and context is not None:
        count = context.all_reduce(tf.distribute.ReduceOp.SUM, count)
    share = tf.reduce_sum(tf.cast(values, "float32")) / count
    return logged_as_share(share, samples, total=count)


def _per_worker_logs(logs):
    """Gives a step's logs the leading axis Keras reduces across workers.

    Under MultiWorkerMirroredStrategy, Keras 3 averages the logs of a step
    with `strategy.reduce("MEAN", value, axis=0)`, which fails on scalars
    (tensorflow/tensorflow#72388); a length-1 axis reduces back to them.
    """
    strategy = tf.distribute.get_strategy()
    if (
        isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)
        and strategy.extended._in_multi_worker_mode()
    ):
        return tf.nest.map_structure(lambda v: tf.expand_dims(v, 0), logs)
    return logs


def list_presets():
    """Returns `{name: directory}` of every preset shipped with the zoo."""
    found = {}
    root = os.path.dirname(__file__)
    for model_dir in sorted(os.listdir(root)):
        shipped = os.path.join(root, model_dir, "presets")
        if not os.path.isdir(shipped):
            continue
        for name in sorted(os.listdir(shipped)):
            if os.path.isfile(os.path.join(shipped, name, presets.METADATA_FILE)):
                found[name] = os.path.join(shipped, name)
    return found


def _is_path(preset):
    """A path-like object, or a str with a separator or a leading `.` or `~`."""
    if not isinstance(preset, str):
        return True
    separators = [s for s in (os.sep, os.altsep) if s]
    return preset.startswith((".", "~")) or any(s in preset for s in separators)


def resolve_preset(preset):
    """Maps a preset name or directory to its directory, with clear errors.

    A path (path-like, or a str that holds a separator or starts with `.`
    or `~`) is a directory. A bare name is a shipped preset, never a folder
    of the current directory: a folder named like a shipped preset cannot
    stand in for it (a warning says which one is loaded); write `./name`
    to load the folder.

    Args:
        preset: str or path-like.

    Returns:
        The directory (str).
    """
    if not isinstance(preset, (str, os.PathLike)):
        raise TypeError(
            f"`preset` must be a name or a path. Received: preset={preset!r:.80}"
        )
    if _is_path(preset):
        return os.path.expanduser(os.fspath(preset))
    available = list_presets()
    local = os.path.isdir(preset)
    if preset in available:
        if local:
            warnings.warn(
                f"Loading the shipped preset {preset!r} ({available[preset]}), "
                f"not the folder {preset!r} of the current directory: pass "
                f"'./{preset}' to load that folder.",
                stacklevel=3,
            )
        return available[preset]
    names = ", ".join(available) or "(none shipped yet)"
    hint = f" To load the folder {preset!r} here, pass './{preset}'." if local else ""
    raise ValueError(
        f"Unknown preset {preset!r}: not a path, and not one of the "
        f"shipped presets: {names}.{hint}"
    )


def use_static_shapes_for(model, strategy, requested=False):
    """Training scripts' switch to static shapes: when asked or on a TPU.

    Args:
        model: a `Task`.
        strategy: the `tf.distribute.Strategy` it trains under.
        requested: bool. The script's `--static-shapes` flag.

    Returns:
        bool. Whether `model.use_static_shapes()` was turned on; the
        script then batches with `drop_remainder=True`.
    """
    static = bool(requested) or needs_static_shapes(strategy)
    if static:
        model.use_static_shapes()
        print("static shapes: fixed-size batches padded to the full length")
    return static
