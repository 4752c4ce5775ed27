"""`PipelineModel`: a `keras.Model` that preprocesses its raw inputs.

`fit`, `evaluate` and `predict` take raw data (strings, images, pairs) in
every form of `zoo.base.raw_inputs.FORMS` as well as prepared inputs: the
model's `preprocessor` says which data is raw (`input_form`); raw samples
are batched and mapped through it inside `tf.data`, and prepared inputs go
to Keras as they are. `zoo.base.task.Task` stands on it (as keras-hub's
`Task` stands on its `PipelineModel`). Where TensorFlow is not installed
(JAX or PyTorch alone) there is no `tf.data`: in-memory arrays go to Keras
as prepared inputs, and raw text gets an ImportError that says so.
"""

import warnings

import keras

from zoo import quiet
from zoo.base import raw_inputs as inputs
from zoo.data import pipeline

tf = quiet.LazyModule(
    "tensorflow", "Raw data in fit/evaluate/predict (a tf.data pipeline)"
)


@keras.saving.register_keras_serializable(package="zoo")
class PipelineModel(keras.Model):
    """A `keras.Model` whose `fit`/`evaluate`/`predict` take raw data.

    Adds to `keras.Model` a `preprocessor`: a layer that turns raw samples
    (e.g. strings) into model inputs inside `tf.data` and declares which
    data it takes (`zoo.base.raw_inputs.input_form`). Raw samples are
    batched (`batch_size`, default 32) and mapped through it; prepared
    inputs pass through untouched. A call that fails leaves the model
    usable. `predict` returns the model's `prediction_key` output.

    Args:
        *args: `keras.Model` arguments (`inputs`, `outputs`).
        preprocessor: optional layer turning raw data into model inputs
            (see `zoo.base.raw_inputs.input_form`). Defaults to `None`.
        **kwargs: `keras.Model` arguments (`name`, `trainable`).

    Example:
    >>> words = keras.layers.StringLookup(vocabulary=["in", "the", "beginning"])
    >>> ids = keras.Input((), dtype="int64", name="ids")
    >>> outputs = keras.layers.Dense(1)(keras.layers.Embedding(4, 2)(ids))
    >>> pre = inputs.FeaturePreprocessor(words)
    >>> model = PipelineModel(ids, outputs, preprocessor=pre)
    >>> model.predict(["in", "the", "end"], verbose=0).shape
    (3, 1)
    """

    static_shapes = False

    def __init__(self, *args, preprocessor=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.preprocessor = preprocessor

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
        >>> ids = keras.Input((), dtype="int64", name="ids")
        >>> model = PipelineModel(ids, keras.layers.Embedding(4, 2)(ids))
        >>> model.use_static_shapes().static_shapes
        True
        """
        self.static_shapes = bool(enabled)
        if hasattr(self.preprocessor, "trim_padding"):
            self.preprocessor.trim_padding = not self.static_shapes
        return self

    # Raw data --------------------------------------------------------------

    def input_form(self, spec):
        """How this model takes data whose elements have the type spec `spec`.

        The hook `fit`, `evaluate` and `predict` ask: `zoo.base.raw_inputs.SAMPLES`
        (one raw sample: batch, then preprocess), `zoo.base.raw_inputs.BATCHES` (a
        raw batch: preprocess) or `None` (prepared inputs, fed as they are).
        By default the preprocessor's declared `input_form` answers
        (`zoo.base.raw_inputs.input_form`); a subclass may override this.

        Args:
            spec: the element spec as `(x,)`, `(x, y)` or `(x, y, w)`.

        Returns:
            `"samples"`, `"batches"` or None.

        Example:
        >>> words = keras.layers.StringLookup(vocabulary=["in", "the"])
        >>> ids = keras.Input((), dtype="int64", name="ids")
        >>> model = PipelineModel(ids, ids, preprocessor=inputs.FeaturePreprocessor(words))
        >>> model.input_form((tf.TensorSpec((), tf.string),))
        'samples'
        >>> model.input_form((tf.TensorSpec((None,), tf.int64),)) is None
        True
        """
        return inputs.input_form(self.preprocessor, spec)

    def _batch(self, dataset, batch_size, drop_remainder):
        """Batches unbatched samples (32 when `batch_size` is `None`).

        `drop_remainder` says the caller may drop a last partial batch
        (`fit`, `evaluate`); it is dropped only with static shapes on.
        """
        return dataset.batch(
            batch_size or 32, drop_remainder=drop_remainder and self.static_shapes
        )

    def preprocess_samples(self, x, y=None, sample_weight=None):
        """Maps one batch of raw samples to `(inputs, labels, sample_weight)`.

        Example:
        >>> ids = keras.Input((), dtype="int64", name="ids")
        >>> model = PipelineModel(ids, ids)  # No preprocessor: packed as given.
        >>> model.preprocess_samples([1, 2], [0, 1])
        ([1, 2], [0, 1])
        """
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
        """Raw data as a batched, preprocessed `tf.data.Dataset`.

        Returns `None` for prepared in-memory data and data Keras iterates
        itself (the caller hands it to Keras), and a dataset of prepared
        inputs as it is.
        """
        batch_size = inputs.check_batch_size(batch_size)
        if inputs.passed_to_keras(x):
            return None
        dataset = inputs.given_dataset(x, y, sample_weight)
        if dataset is None:
            data = inputs.unpack(x, y, sample_weight)
            if not quiet.tensorflow_installed():
                inputs.refuse_text_without_tensorflow(data)
                return None
            if self.input_form(inputs.sample_spec(data)) is None:
                return None
            # In-memory data is a collection of samples, whatever their rank.
            dataset = inputs.sliced(keras.utils.pack_x_y_sample_weight(*data), shuffle)
            form = inputs.SAMPLES
        else:
            form = self.input_form(dataset.element_spec)
            if form is None:
                return dataset
        if form == inputs.SAMPLES:
            dataset = self._batch(dataset, batch_size, drop_remainder)
        elif batch_size is not None:
            warnings.warn(
                f"batch_size={batch_size} is ignored: the dataset is already "
                "batched (as Keras ignores it for any tf.data.Dataset).",
                stacklevel=3,
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

        dataset = dataset.map(preprocess, num_parallel_calls=tf.data.AUTOTUNE)
        self._check_prepared(dataset.element_spec)
        return pipeline.finish(dataset)

    def _check_prepared(self, spec):
        """Refuses preprocessed data that lacks some of the model's inputs.

        Checked before Keras traces anything, so a wrong call creates no
        variable and the model stays usable.
        """
        expected = self.input if isinstance(self.input, dict) else None
        given = inputs.element_parts(spec)[0]
        if expected is None or not isinstance(given, dict):
            return
        missing = sorted(set(expected) - set(given))
        if missing:
            raise ValueError(
                f"The preprocessor turns this data into the inputs "
                f"{sorted(given)}, but {type(self).__name__} also needs "
                f"{missing}. Pass the labels as well (e.g. (source, target) "
                "pairs), or, to generate outputs, call the task's own method "
                "(e.g. `translate` or `caption`)."
            )

    def _validation(self, validation, batch_size):
        if validation is None:
            return None
        if isinstance(validation, tuple):
            prepared = self._as_dataset(
                *validation, batch_size=batch_size, drop_remainder=True
            )
        elif inputs.is_dataset(validation):
            prepared = self._as_dataset(validation, drop_remainder=True)
        else:
            prepared = self._as_dataset(
                validation, batch_size=batch_size, drop_remainder=True
            )
        return validation if prepared is None else prepared

    def _retrace_after_failure(self):
        """Drops the step functions of a failed call.

        A call that fails while Keras traces its step leaves a function
        that may not create variables any more; the next call then traces
        a new one, so a failed `fit` leaves the model usable.
        """
        self.train_function = None
        self.test_function = None
        self.predict_function = None

    def fit(self, x=None, y=None, batch_size=None, sample_weight=None, **kwargs):
        """Trains on raw or prepared data in any form of `zoo.base.raw_inputs.FORMS`.

        Raw data goes through the preprocessor inside `tf.data`: lists and
        arrays are shuffled each epoch (unless `shuffle=False`) and batched
        by `batch_size` (default 32); an unbatched `tf.data.Dataset` is
        batched by `batch_size`, a batched one is used as it is (its
        shuffling is the caller's). `validation_data` takes the same forms.
        A call that fails (wrong data) leaves the model usable.

        Args:
            x: the data: `x` (with `y`), a list of `(x, y[, w])` tuples, a
                tuple `(x, y[, w])`, or a `tf.data.Dataset`.
            y: optional labels, when `x` holds only the inputs.
            batch_size: optional int. Samples per step for unbatched data.
            sample_weight: optional per-sample weights.
            **kwargs: `keras.Model.fit` arguments (`epochs`,
                `validation_data`, `callbacks`, `shuffle`, ...).

        Returns:
            The Keras `History`.

        Raises:
            ValueError: data in no accepted form (the message lists them),
                labels given twice, or data the preprocessor cannot turn
                into every model input.

        Example:
        >>> words = keras.layers.StringLookup(vocabulary=["in", "the", "beginning"])
        >>> ids = keras.Input((), dtype="int64", name="ids")
        >>> outputs = keras.layers.Dense(1)(keras.layers.Embedding(4, 2)(ids))
        >>> model = PipelineModel(ids, outputs, preprocessor=inputs.FeaturePreprocessor(words))
        >>> model.compile("sgd", "mse")
        >>> pairs = [("in", 1.0), ("the", 0.0), ("beginning", 0.5)]
        >>> history = model.fit(pairs, batch_size=2, epochs=2, verbose=0)
        >>> history = model.fit(["in", "the"], [1.0, 0.0], verbose=0)  # x and y
        >>> history = model.fit((["in", "the"], [1.0, 0.0]), verbose=0)  # a tuple
        >>> data = tf.data.Dataset.from_tensor_slices((["in", "the"], [1.0, 0.0]))
        >>> history = model.fit(data, batch_size=2, verbose=0)  # unbatched
        >>> history = model.fit(data.batch(2), verbose=0)  # batched
        >>> len(history.history["loss"])
        1
        """
        shuffle = kwargs.pop("shuffle", True)
        validation = kwargs.pop("validation_data", None)
        dataset = self._as_dataset(
            x, y, sample_weight, batch_size, shuffle=shuffle, drop_remainder=True
        )
        validation = self._validation(validation, batch_size)
        try:
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
            return super().fit(
                dataset, validation_data=validation, shuffle=False, **kwargs
            )
        except Exception:
            self._retrace_after_failure()
            raise

    def evaluate(self, x=None, y=None, batch_size=None, sample_weight=None, **kwargs):
        """Evaluates on raw or prepared data in any form of `zoo.base.raw_inputs.FORMS`.

        The forms and batching are those of `fit` (without shuffling).

        Args:
            x, y, batch_size, sample_weight: the data, as `fit` takes it.
            **kwargs: `keras.Model.evaluate` arguments (`return_dict`, ...).

        Returns:
            The loss (and metrics), as `keras.Model.evaluate` returns them.

        Example:
        >>> words = keras.layers.StringLookup(vocabulary=["in", "the", "beginning"])
        >>> ids = keras.Input((), dtype="int64", name="ids")
        >>> embedded = keras.layers.Embedding(4, 1, embeddings_initializer="zeros")
        >>> model = PipelineModel(ids, embedded(ids), preprocessor=inputs.FeaturePreprocessor(words))
        >>> model.compile("sgd", "mse")
        >>> model.evaluate([("in", 1.0), ("the", 3.0)], verbose=0)  # (1 + 9) / 2
        5.0
        """
        dataset = self._as_dataset(x, y, sample_weight, batch_size, drop_remainder=True)
        try:
            if dataset is None:
                return super().evaluate(
                    x, y, batch_size=batch_size, sample_weight=sample_weight, **kwargs
                )
            return super().evaluate(dataset, **kwargs)
        except Exception:
            self._retrace_after_failure()
            raise

    def predict(self, x, batch_size=None, **kwargs):
        """Model outputs for raw or prepared inputs in any form of `fit`.

        Labels in the data (pairs, a tuple, a dataset of `(x, y)`) are
        ignored. A generative task's raw inputs lack the decoder input, so
        `predict` refuses them and names the method to call instead (e.g.
        `translate`, `caption`).

        Args:
            x: the inputs: a list or array of `x`, a list of `(x, y)`
                tuples, a tuple `(x, y)`, or a `tf.data.Dataset`.
            batch_size: optional int. Samples per step for unbatched data.
            **kwargs: `keras.Model.predict` arguments (`verbose`, ...).

        Returns:
            NumPy outputs, as `keras.Model.predict` returns them.

        Example:
        >>> words = keras.layers.StringLookup(vocabulary=["in", "the", "beginning"])
        >>> ids = keras.Input((), dtype="int64", name="ids")
        >>> model = PipelineModel(ids, ids, preprocessor=inputs.FeaturePreprocessor(words))
        >>> model.predict(["the", "beginning", "end"], verbose=0).tolist()
        [2, 3, 0]
        >>> data = tf.data.Dataset.from_tensor_slices(["in", "end"])
        >>> model.predict(data, batch_size=2, verbose=0).tolist()
        [1, 0]
        """
        if not inputs.is_dataset(x) and not inputs.passed_to_keras(x):
            x, _, _ = inputs.unpack(x)
        elif inputs.is_dataset(x) and isinstance(x.element_spec, tuple):
            x = x.map(lambda x, *labels: x)
        dataset = self._as_dataset(x, batch_size=batch_size)
        try:
            if dataset is None:
                return super().predict(x, batch_size=batch_size, **kwargs)
            return super().predict(dataset, **kwargs)
        except Exception:
            self._retrace_after_failure()
            raise

    def predict_step(self, *args):
        """Keras's prediction step, returning `prediction_outputs` of its outputs.

        (JAX passes `(state, data)` and gets `(outputs, state)`.)
        """
        result = super().predict_step(*args)
        if keras.backend.backend() == "jax":
            outputs, state = result
            return self.prediction_outputs(outputs), state
        return self.prediction_outputs(result)

    #: The output `predict` returns of a model whose outputs are a dict
    #: (e.g. `"logits"` beside diagnostics); `None`: all of them.
    prediction_key = None

    def prediction_outputs(self, outputs):
        """What `predict` returns of the model's outputs (`prediction_key`).

        Example:
        >>> ids = keras.Input((), dtype="int64", name="ids")
        >>> PipelineModel(ids, ids).prediction_outputs({"logits": 1})
        {'logits': 1}
        >>> class Classifier(PipelineModel):
        ...     prediction_key = "logits"
        >>> Classifier(ids, ids).prediction_outputs({"logits": 1, "steps": 2})
        1
        """
        if self.prediction_key is None:
            return outputs
        return outputs[self.prediction_key]
