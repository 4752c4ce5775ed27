"""`Task`: the base of every zoo model.

A `Task` is a functional `keras.Model` with a `preprocessor` (a layer that
turns raw samples, e.g. strings, into model inputs inside `tf.data`), so
`fit`, `evaluate` and `predict` accept raw data as well as already-prepared
inputs; and it saves to / loads from preset directories
(`keras_attention.presets`).
"""

import os

import keras
import tensorflow as tf

from keras_attention import presets

PRESETS_DIR = os.path.join(os.path.dirname(__file__), "presets")


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

    def preprocess_samples(self, x, y=None, sample_weight=None):
        """Maps one batch of raw samples to `(inputs, labels, sample_weight)`."""
        if self.preprocessor is None:
            return keras.utils.pack_x_y_sample_weight(x, y, sample_weight)
        return self.preprocessor(x, y, sample_weight)

    def _as_dataset(
        self, x, y=None, sample_weight=None, batch_size=None, shuffle=False
    ):
        if isinstance(x, tf.data.Dataset):
            if y is not None or sample_weight is not None:
                raise ValueError(
                    "When `x` is a tf.data.Dataset, pass labels inside it, not "
                    f"as `y`. Received: type(y)={type(y).__name__}"
                )
            dataset = x
        else:
            data = keras.utils.pack_x_y_sample_weight(x, y, sample_weight)
            if not _is_raw(tf.nest.map_structure(tf.constant, data)):
                return None
            dataset = tf.data.Dataset.from_tensor_slices(data)
            if shuffle:
                count = int(dataset.cardinality())
                dataset = dataset.shuffle(count, reshuffle_each_iteration=True)
        if not _is_raw(dataset.element_spec):
            return dataset if batch_size is None else None
        if _rank(dataset.element_spec) == 0:
            dataset = dataset.batch(batch_size or 32)
        elif batch_size is not None:
            raise ValueError(
                "The dataset is already batched: do not pass `batch_size`. "
                f"Received: batch_size={batch_size}"
            )

        def preprocess(*sample):
            return self.preprocess_samples(*sample)

        return dataset.map(preprocess, num_parallel_calls=tf.data.AUTOTUNE).prefetch(
            tf.data.AUTOTUNE
        )

    def fit(self, x=None, y=None, batch_size=None, sample_weight=None, **kwargs):
        shuffle = kwargs.pop("shuffle", True)
        dataset = self._as_dataset(x, y, sample_weight, batch_size, shuffle=shuffle)
        validation = kwargs.pop("validation_data", None)
        if validation is not None:
            if isinstance(validation, tf.data.Dataset):
                validation = self._as_dataset(validation) or validation
            else:
                prepared = self._as_dataset(*validation, batch_size=batch_size)
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
        dataset = self._as_dataset(x, y, sample_weight, batch_size)
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

        Args:
            preset: str. A name from `zoo.list_presets()` or a directory.
            load_weights: bool. Defaults to `True`.
            **overrides: config entries to change (e.g. `dropout=0.0`).

        Returns:
            The model, with its preprocessor and `model.preset_metadata`.
        """
        directory = resolve_preset(preset)
        model, _, meta = presets.load_preset(
            directory,
            expected_class=None if cls is Task else cls,
            load_weights=load_weights,
            **overrides,
        )
        model.preset_metadata = meta
        return model


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


def resolve_preset(preset):
    """Maps a preset name or directory to its directory, with clear errors."""
    if os.path.isdir(preset):
        return preset
    available = list_presets()
    if preset in available:
        return available[preset]
    names = ", ".join(available) or "(none shipped yet)"
    raise ValueError(
        f"Unknown preset {preset!r}: not a directory, and not one of the "
        f"shipped presets: {names}."
    )
