"""Raw data in every documented form -> `tf.data`, for `PipelineModel.fit` and co.

`zoo.base.pipeline_model.PipelineModel.fit`, `evaluate` and `predict` (so
every `Task`'s) take their data in any of these forms (`FORMS`), with or
without `batch_size`:

- `x` and `y` (and `sample_weight`) as lists or NumPy arrays;
- a list of `(x, y)` or `(x, y, sample_weight)` tuples (e.g. `(source,
  target)` string pairs);
- a tuple `(x, y)` or `(x, y, sample_weight)` of lists or arrays;
- a `tf.data.Dataset` of `x`, `(x, y)` or `(x, y, sample_weight)`
  elements, batched or not, `x` a tensor or a dict of tensors;
- prepared model inputs (arrays, or dicts of arrays named like the model's
  inputs), which go to Keras as they are.

Raw or prepared is the preprocessor's call, not a guess: a preprocessor
declares `input_form(spec)` (see `input_form`), which says, for the type
spec of one element, whether it is one raw sample (`SAMPLES`: batch, then
preprocess), a raw batch (`BATCHES`: preprocess) or prepared inputs
(`None`). `text_form` and `image_form` are the rules for string and image
inputs that preprocessors can call from theirs.
"""

import collections.abc
import types

import keras
import numpy as np

from zoo import quiet
from zoo.base.preprocessor import Preprocessor

tf = quiet.LazyModule(
    "tensorflow",
    "Raw strings, images or a tf.data.Dataset (the preprocessor's tf.data pipeline)",
)

SAMPLES = "samples"
BATCHES = "batches"

FORMS = (
    "x and y (and sample_weight) as lists or NumPy arrays",
    "a list of (x, y) or (x, y, sample_weight) tuples",
    "a tuple (x, y) or (x, y, sample_weight) of lists or arrays",
    "a tf.data.Dataset of x, (x, y) or (x, y, sample_weight), batched or not",
    "prepared model inputs (arrays or dicts of arrays)",
)


def _forms():
    return "; ".join(FORMS)


def is_dataset(x):
    """Whether `x` is a `tf.data.Dataset` (never, where TensorFlow is not imported).

    Example:
    >>> is_dataset([1, 2])
    False
    """
    return quiet.tensorflow_imported() and isinstance(x, tf.data.Dataset)


def given_dataset(x, y=None, sample_weight=None):
    """`x` when it is a `tf.data.Dataset` (its labels inside it), else None.

    Example:
    >>> given_dataset([1, 2]) is None
    True
    """
    if not is_dataset(x):
        return None
    if y is not None or sample_weight is not None:
        raise ValueError(
            "When `x` is a tf.data.Dataset, pass labels inside it, not "
            f"as `y`. Received: type(y)={type(y).__name__}"
        )
    return x


def sliced(data, shuffle=False):
    """A dataset of the samples of `data` (arrays), reshuffled every epoch if asked.

    Example:
    >>> [int(v) for v in sliced([3, 4, 5])]
    [3, 4, 5]
    """
    dataset = tf.data.Dataset.from_tensor_slices(data)
    if shuffle:
        count = int(dataset.cardinality())
        dataset = dataset.shuffle(count, reshuffle_each_iteration=True)
    return dataset


def _is_pair(item):
    """A `(x, y[, w])` sample: a tuple, or a list that starts with a string."""
    if isinstance(item, tuple):
        return len(item) in (2, 3)
    return isinstance(item, list) and len(item) in (2, 3) and isinstance(item[0], str)


def _array_like(value):
    return hasattr(value, "shape") and hasattr(value, "dtype")


def _samples(value, name):
    """A list of samples as a NumPy array (dicts and arrays kept as they are)."""
    if value is None or _array_like(value):
        return value
    if isinstance(value, dict):
        return {k: _samples(v, f"{name}[{k!r}]") for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        try:
            return np.asarray(value)
        except ValueError as e:
            raise ValueError(
                f"`{name}` is a list whose items differ in shape ({e}); accepted "
                f"forms: {_forms()}."
            ) from e
    raise ValueError(
        f"`{name}` must be a list, an array or a dict of them. Received: "
        f"{name} of type {type(value).__name__}"
    )


def unpack(x, y=None, sample_weight=None):
    """Brings in-memory data to `(x, y, sample_weight)` of arrays.

    A list of `(x, y[, sample_weight])` tuples and a tuple `(x, y[,
    sample_weight])` are split; lists become NumPy arrays. Anything else
    than `FORMS` is refused with a `ValueError` that lists them.

    Args:
        x: the data, in one of `FORMS` (not a dataset).
        y: optional labels (not with pairs or a tuple `x`).
        sample_weight: optional sample weights.

    Returns:
        `(x, y, sample_weight)`.

    Example:
    >>> x, y, w = unpack([("in the beginning", "en el principio"), ("a", "b")])
    >>> x.tolist(), y.tolist(), w
    (['in the beginning', 'a'], ['en el principio', 'b'], None)
    """
    if isinstance(x, (str, bytes)) or x is None or np.isscalar(x):
        raise ValueError(
            "`x` must hold a collection of samples, not a single value. "
            f"Received: x={x!r:.80}. Accepted forms: {_forms()}."
        )
    pairs = isinstance(x, list) and x and all(_is_pair(item) for item in x)
    if pairs or (isinstance(x, tuple) and len(x) in (2, 3)):
        if y is not None or sample_weight is not None:
            raise ValueError(
                "`x` holds (x, y) pairs (a list of tuples, or a tuple): pass "
                "the labels inside it, not as `y` or `sample_weight`. "
                f"Received: type(y)={type(y).__name__}"
            )
        if pairs:
            sizes = {len(item) for item in x}
            if len(sizes) != 1:
                raise ValueError(
                    "Every item of a list of pairs must have the same length "
                    f"(2 or 3). Received lengths: {sorted(sizes)}"
                )
            x = tuple(list(column) for column in zip(*x))
        x, y, sample_weight = (*x, None)[:3]
    if not isinstance(x, (list, tuple, dict)) and not _array_like(x):
        raise ValueError(
            f"Unsupported data of type {type(x).__name__}. Accepted forms: {_forms()}."
        )
    x = _samples(x, "x")
    y = _samples(y, "y")
    sample_weight = _samples(sample_weight, "sample_weight")
    leaves = [t for t in keras.tree.flatten((x, y, sample_weight)) if t is not None]
    if any(len(np.shape(t)) == 0 for t in leaves):
        raise ValueError(
            "Every part of the data must hold one entry per sample; a part is "
            f"a single value. Accepted forms: {_forms()}."
        )
    lengths = {int(np.shape(t)[0]) for t in leaves}
    if 0 in lengths:
        raise ValueError(f"No samples: `x` is empty. Accepted forms: {_forms()}.")
    if len(lengths) > 1:
        raise ValueError(
            "`x`, `y` and `sample_weight` must hold the same number of "
            f"samples. Received: {sorted(lengths)}"
        )
    return x, y, sample_weight


def refuse_text_without_tensorflow(data):
    """Refuses raw text in `data` where TensorFlow is not installed.

    Without TensorFlow there is no `tf.data` pipeline: in-memory arrays go
    to Keras as prepared model inputs (token ids, the model's images), and
    text, which needs the tokenizers, gets an ImportError that says so.

    Example:
    >>> refuse_text_without_tensorflow((np.zeros((2, 3), "int32"), None, None))
    """
    leaves = [t for t in keras.tree.flatten(data) if t is not None]
    if any(
        getattr(t, "dtype", None) is not None and np.dtype(t.dtype).kind in "USO"
        for t in leaves
        if isinstance(t, np.ndarray)
    ):
        raise ImportError(
            "Raw text needs TensorFlow (the tokenizers run in tf.data): pip "
            "install tensorflow tensorflow-text, or pass token ids."
        )


def check_batch_size(batch_size):
    """Refuses a `batch_size` that is not None or a positive int.

    Example:
    >>> check_batch_size(32)
    32
    """
    if batch_size is None:
        return None
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)):
        raise ValueError(
            "`batch_size` must be None or a positive int. Received: "
            f"batch_size of type {type(batch_size).__name__}"
        )
    if batch_size < 1:
        raise ValueError(
            f"`batch_size` must be a positive int. Received: batch_size={batch_size}"
        )
    return int(batch_size)


def passed_to_keras(x):
    """Whether `x` is a form Keras iterates itself (PyDataset, generator).

    Such data is taken as prepared batches and not preprocessed.

    Example:
    >>> passed_to_keras(iter([])), passed_to_keras([1])
    (True, False)
    """
    return isinstance(
        x, (keras.utils.PyDataset, types.GeneratorType, collections.abc.Iterator)
    )


def _spec(value):
    """The `tf.TypeSpec` of one sample of an array (no copy of the data)."""
    if quiet.tensorflow_imported() and isinstance(value, (tf.Tensor, tf.RaggedTensor)):
        return tf.type_spec_from_value(value[0])
    value = np.asarray(value) if not _array_like(value) else value
    if isinstance(value, np.ndarray) and value.dtype.kind in ("U", "S", "O"):
        dtype = tf.string
    else:  # NumPy, or a JAX or PyTorch tensor
        dtype = tf.as_dtype(keras.backend.standardize_dtype(value.dtype))
    return tf.TensorSpec(tuple(value.shape[1:]), dtype)


def sample_spec(data):
    """The element spec of one sample of in-memory `(x, y, sample_weight)`.

    `None` entries are left out at the end, as `tf.data` would do.

    Example:
    >>> sample_spec((np.array(["a", "b"]), np.zeros(2), None))
    (TensorSpec(shape=(), dtype=tf.string, name=None), \
TensorSpec(shape=(), dtype=tf.float64, name=None))
    """
    parts = [p for p in data if p is not None]
    return tuple(tf.nest.map_structure(_spec, p) for p in parts)


def element_parts(spec):
    """An element spec as the tuple `(x,)`, `(x, y)` or `(x, y, sample_weight)`.

    Example:
    >>> element_parts(tf.TensorSpec((), tf.string))
    (TensorSpec(shape=(), dtype=tf.string, name=None),)
    """
    return spec if isinstance(spec, tuple) else (spec,)


def text_form(spec):
    """The input form of string inputs: `SAMPLES`, `BATCHES` or None.

    Raw when `x` holds strings: one sample is a scalar string per leaf (rank
    0), a batch a vector. Anything else is prepared.

    Args:
        spec: the element spec as `(x,)`, `(x, y)` or `(x, y, w)`.

    Example:
    >>> text_form((tf.TensorSpec((), tf.string),))
    'samples'
    >>> text_form((tf.TensorSpec((None,), tf.string),)), text_form(
    ...     (tf.TensorSpec((None, 4), tf.int32),))
    ('batches', None)
    """
    leaves = tf.nest.flatten(spec[0])
    if not leaves or any(s.dtype != tf.string for s in leaves):
        return None
    return SAMPLES if leaves[0].shape.rank == 0 else BATCHES


def image_form(spec, channels=(1, 3)):
    """The input form of image inputs: `SAMPLES`, `BATCHES` or None.

    `x` is a numeric tensor: one image is `(height, width)` or `(height,
    width, c)` with `c` in `channels`; a batch has one more axis. Labels,
    when given, settle it (a sample's label has rank 0). A dict `x` is
    prepared model inputs (None).

    Args:
        spec: the element spec as `(x,)`, `(x, y)` or `(x, y, w)`.
        channels: the channel counts an image may have.

    Example:
    >>> image_form((tf.TensorSpec((28, 28), tf.uint8),))
    'samples'
    >>> image_form((tf.TensorSpec((None, 28, 28, 1), tf.uint8),))
    'batches'
    """
    x = spec[0]
    if isinstance(x, dict) or not isinstance(x, tf.TensorSpec):
        return None
    if not (x.dtype.is_integer or x.dtype.is_floating):
        return None
    if len(spec) > 1 and isinstance(spec[1], tf.TensorSpec):
        if spec[1].shape.rank is not None:
            return SAMPLES if spec[1].shape.rank == 0 else BATCHES
    rank = x.shape.rank
    if rank == 2 or (rank == 3 and x.shape[-1] in channels):
        return SAMPLES
    return BATCHES


def checked_images(images, name="images"):
    """Images as a NumPy array of uint8 (0-255) or float32 (0-1) values.

    The range of a float image is decided by its values, as a user verb
    (`caption`, `classify`) is called on one batch: floats whose maximum is
    at most 1 are read as `[0, 1]`; floats with a larger maximum as
    `[0, 255]`, the Keras convention (`keras.utils.img_to_array`, and
    keras-hub's image converters, which scale raw 0-255 pixels), and
    divided by 255. (So a 0-255 float image darker than 1/255 everywhere
    would be read as 0-1; pass it as uint8 to be exact.) Any integer dtype
    holding 0-255 becomes uint8. Other values (negative, above 255, a
    16-bit range, NaN or infinity) are refused rather than read as garbage.

    Example:
    >>> checked_images(np.zeros((1, 4, 4), "int64")).dtype
    dtype('uint8')
    >>> float(checked_images(np.full((1, 4, 4), 127.5)).max())  # 0-255 floats
    0.5
    >>> checked_images(np.full((1, 4, 4), 300.0))
    Traceback (most recent call last):
    ...
    ValueError: Float `images` must hold values in [0, 1] or [0, 255] (uint8 for 0-255). Received: values in [300.0, 300.0]
    """
    images = np.asarray(images)
    if images.size == 0:
        raise ValueError(f"`{name}` is empty. Received: shape={images.shape}")
    if images.dtype.kind in "ui":
        low, high = int(images.min()), int(images.max())
        if low < 0 or high > 255:
            raise ValueError(
                f"Integer `{name}` must hold values in [0, 255]. "
                f"Received: values in [{low}, {high}]"
            )
        return images.astype("uint8", copy=False)
    if images.dtype.kind != "f":
        raise TypeError(
            f"`{name}` must be an integer or float array. "
            f"Received: dtype={images.dtype}"
        )
    if not np.all(np.isfinite(images)):
        raise ValueError(f"`{name}` holds NaN or infinite values.")
    low, high = float(images.min()), float(images.max())
    if low < 0.0 or high > 255.0:
        raise ValueError(
            f"Float `{name}` must hold values in [0, 1] or [0, 255] (uint8 for "
            f"0-255). Received: values in [{low}, {high}]"
        )
    images = images.astype("float32", copy=False)
    return images / np.float32(255.0) if high > 1.0 else images


def legacy_form(spec):
    """The rule for preprocessors that declare no `input_form` (deprecated).

    Raw when any part of the element holds strings; one sample when the
    first leaf has rank 0. Preprocessors should declare `input_form`.

    Example:
    >>> legacy_form((tf.TensorSpec((), tf.string), tf.TensorSpec((), tf.float32)))
    'samples'
    """
    leaves = tf.nest.flatten(spec)
    if not any(s.dtype == tf.string for s in leaves):
        return None
    return SAMPLES if leaves[0].shape.rank == 0 else BATCHES


def input_form(preprocessor, spec):
    """What `preprocessor` makes of data whose elements have the spec `spec`.

    The contract: a preprocessor (a layer called as `preprocessor(x, y=None,
    sample_weight=None)` on a batch, returning model inputs, or `(inputs,
    labels, sample_weight)`) declares which raw forms it takes with a method
    `input_form(spec) -> SAMPLES | BATCHES | None`, `spec` the element spec
    as `(x,)`, `(x, y)` or `(x, y, sample_weight)`: `SAMPLES` for one raw
    sample (the data is batched, then preprocessed), `BATCHES` for a raw
    batch, `None` for prepared inputs (fed to the model as they are).
    Without a preprocessor everything is prepared; a preprocessor without
    the method gets `legacy_form`.

    Args:
        preprocessor: the task's preprocessor, or None.
        spec: an element spec (a tuple as above, or `x`'s spec alone).

    Returns:
        `SAMPLES`, `BATCHES` or None.

    Example:
    >>> input_form(None, tf.TensorSpec((), tf.string)) is None
    True
    >>> input_form(FeaturePreprocessor(keras.layers.Identity()),
    ...            tf.TensorSpec((), tf.string))
    'samples'
    """
    if preprocessor is None:
        return None
    spec = element_parts(spec)
    declared = getattr(preprocessor, "input_form", None)
    form = declared(spec) if callable(declared) else legacy_form(spec)
    if form not in (SAMPLES, BATCHES, None):
        raise ValueError(
            f"{type(preprocessor).__name__}.input_form must return "
            f"{SAMPLES!r}, {BATCHES!r} or None. Received: {form!r}"
        )
    return form


@keras.saving.register_keras_serializable(package="zoo")
class FeaturePreprocessor(Preprocessor):
    """Makes a one-argument Keras layer a preprocessor of raw `x`.

    The layer maps a batch of raw `x` (e.g. strings through
    `keras.layers.StringLookup`) to model inputs; labels and sample weights
    pass through. It declares its raw form: `x` of `raw_dtype` whose
    samples have rank `sample_rank` (`input_form`).

    Args:
        layer: a `keras.layers.Layer` (or its config) applied to `x`.
        raw_dtype: str. The dtype of raw `x`. Defaults to `"string"`.
        sample_rank: int. The rank of one raw `x` sample. Defaults to `0`.
        **kwargs: base layer arguments.

    Call arguments:
        x: a batch of raw `x`.
        y: optional labels, passed through.
        sample_weight: optional sample weights, passed through.

    Returns:
        `layer(x)`, packed with `y` and `sample_weight` as
        `keras.utils.pack_x_y_sample_weight` does.

    Example:
    >>> lookup = keras.layers.StringLookup(vocabulary=["in", "the", "beginning"])
    >>> pre = FeaturePreprocessor(lookup)
    >>> x, y = pre(tf.constant(["the", "end"]), tf.constant([1.0, 0.0]))
    >>> x.numpy().tolist()  # 0 is the out-of-vocabulary id
    [2, 0]
    >>> pre.input_form((tf.TensorSpec((), tf.string),))
    'samples'
    """

    def __init__(self, layer, raw_dtype="string", sample_rank=0, **kwargs):
        super().__init__(**kwargs)
        if isinstance(layer, dict):
            layer = keras.saving.deserialize_keras_object(layer)
        if not isinstance(layer, keras.layers.Layer):
            raise ValueError(
                f"`layer` must be a keras.layers.Layer. Received: layer={layer!r:.80}"
            )
        if not isinstance(sample_rank, int) or sample_rank < 0:
            raise ValueError(
                f"`sample_rank` must be an int >= 0. Received: sample_rank={sample_rank!r}"
            )
        self.layer = layer
        self.raw_dtype = tf.as_dtype(raw_dtype).name
        self.sample_rank = sample_rank

    def build(self, *args, **kwargs):
        self.built = True

    def input_form(self, spec):
        """`SAMPLES` or `BATCHES` for `x` of `raw_dtype`, else None (prepared).

        Args:
            spec: the element spec of the data, a tuple whose first entry is
                that of `x`.

        Example (raw `x` is one int64 vector per sample):
        >>> pre = FeaturePreprocessor(keras.layers.Identity(), "int64", sample_rank=1)
        >>> pre.input_form((tf.TensorSpec((5,), tf.int64),))
        'samples'
        >>> pre.input_form((tf.TensorSpec((None, 5), tf.int64),))
        'batches'
        >>> pre.input_form((tf.TensorSpec((None, 5), tf.float32),)) is None  # prepared
        True
        """
        x = spec[0]
        if not isinstance(x, tf.TensorSpec) or x.dtype.name != self.raw_dtype:
            return None
        if x.shape.rank == self.sample_rank:
            return SAMPLES
        return BATCHES if x.shape.rank == self.sample_rank + 1 else None

    def call(self, x, y=None, sample_weight=None):
        return keras.utils.pack_x_y_sample_weight(self.layer(x), y, sample_weight)

    def get_config(self):
        config = super().get_config()
        config.update(
            layer=keras.saving.serialize_keras_object(self.layer),
            raw_dtype=self.raw_dtype,
            sample_rank=self.sample_rank,
        )
        return config
