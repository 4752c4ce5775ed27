"""`Task`: the base of every zoo model (backbone, kind, presets, export).

A `Task` is a `zoo.base.pipeline_model.PipelineModel` (a functional
`keras.Model` whose `fit`, `evaluate` and `predict` take raw data through
its `preprocessor`) built on a family's backbone; it saves to / loads from
preset directories (`keras_attention.presets`; shipped presets are found
through `zoo.registry`), exports through its kind, and corrects the loss
under `tf.distribute` (`zoo.base.distributed_loss`).
"""

import keras

from keras_attention import presets
from zoo import registry
from zoo.base import backends, distributed_loss, parameter_budget, quantization
from zoo.base.backbone import base_config, set_dtype_policy, with_dtype_policy
from zoo.base.constructor_arguments import ArgumentsOf

# Re-exported: the family models import these from here.
from zoo.base.distributed_loss import global_batch_mean, logged_as_share  # noqa: F401
from zoo.base.pipeline_model import PipelineModel
from zoo.base.raw_inputs import given_dataset, sliced  # noqa: F401

# Re-exported: the CLI, the package and the tests import them from here.
from zoo.registry import list_presets, resolve_preset  # noqa: F401

# The model config entry that receives the preset's preprocessor.
PREPROCESSOR_KEY = "preprocessor"


@keras.saving.register_keras_serializable(package="zoo")
class Task(PipelineModel):
    """Base class of zoo models: a `PipelineModel` on a backbone, with presets.

    Adds to `PipelineModel` (raw-data `fit`/`evaluate`/`predict` through
    the `preprocessor`) the backbone, the task's kind (its export, held-out
    evaluation and CLI verbs), the config and the presets, and the loss
    under `tf.distribute`.

    A family's task is built on its backbone (`backbone_arguments` names
    the backbone class), from a `backbone=` instance or from the backbone's
    own arguments passed through the task (`build_backbone`); it reads each
    backbone argument as an attribute (`model.hidden_dim`) and lists them,
    flat, in its config (`get_config`). A `Task` can also be built directly
    from functional inputs and outputs, as below.

    Args:
        *args: `keras.Model` arguments (`inputs`, `outputs`).
        backbone: optional backbone the graph is built on (an instance of
            `backbone_arguments.cls`); its arguments become the task's
            attributes. Defaults to `None`.
        preprocessor: optional layer turning raw data into model inputs
            (see `zoo.base.raw_inputs.input_form`). Defaults to `None`.
        dtype: optional dtype policy (e.g. `"mixed_bfloat16"`). Defaults to
            the backbone's, or to the global policy.
        **kwargs: `keras.Model` arguments (`name`, `trainable`).

    Example:
    >>> from zoo.base.raw_inputs import FeaturePreprocessor
    >>> words = keras.layers.StringLookup(vocabulary=["in", "the", "beginning"])
    >>> ids = keras.Input((), dtype="int64", name="ids")
    >>> outputs = keras.layers.Dense(1)(keras.layers.Embedding(4, 2)(ids))
    >>> model = Task(ids, outputs, preprocessor=FeaturePreprocessor(words))
    >>> model.predict(["in", "the", "end"], verbose=0).shape
    (3, 1)
    """

    #: What the task does, in the zoo's one vocabulary of kinds:
    #: `"translation"`, `"captioning"` or `"classification"`, set by the kind
    #: class a family's task subclasses (`zoo.translation.TranslationTask`,
    #: `zoo.captioning.CaptioningTask`,
    #: `zoo.classification.ClassificationTask`). `None`: a task of no kind,
    #: which has no serving export, CLI verb or held-out evaluation.
    kind = None

    #: The `python -m zoo` commands that run this kind's user verbs (e.g.
    #: `("translate",)`).
    verbs = ()

    #: The backbone's arguments as the task takes them
    #: (`zoo.base.constructor_arguments.ArgumentsOf(TheBackbone)`); `None` for a task
    #: built from inputs and outputs.
    backbone_arguments = None

    def __setattr__(self, name, value):
        # Layers named before the graph is built (PyTorch).
        if not backends.set_before_init(self, name, value):
            super().__setattr__(name, value)

    def __init__(self, *args, backbone=None, preprocessor=None, dtype=None, **kwargs):
        super().__init__(*args, preprocessor=preprocessor, **kwargs)
        if dtype is None and backbone is not None:
            dtype = backbone.dtype_policy
        set_dtype_policy(self, dtype)
        if backbone is not None and self.backbone_arguments is not None:
            self.backbone = backbone
            # `backbone` is the backbone itself, even where a backbone
            # argument is called so (`ShowAttendTell`'s encoder name).
            self.backbone_arguments.copy_attributes(backbone, self, skip=("backbone",))

    @classmethod
    def build_backbone(cls, args, backbone, kwargs, dtype=None, name=None):
        """The task's backbone: `backbone`, or one built from its arguments.

        The backbone arguments given to the task (`args`, in the backbone's
        order, and the entries of `kwargs` named as in
        `backbone_arguments`, which are taken out of it) build the backbone
        with `dtype` and `name`; or `backbone` is the backbone, and the
        arguments given with it must agree with it. What is left in
        `kwargs` must be `keras.Model`'s `name` or `trainable`.

        Args:
            args: tuple. The task's positional arguments.
            backbone: `None`, a backbone (an instance of
                `backbone_arguments.cls`), or the value of a backbone
                argument that the task calls `backbone` (`ShowAttendTell`'s
                encoder name).
            kwargs: dict. The task's other keyword arguments.
            dtype: optional dtype policy of a backbone built here.
            name: optional str. The name of a backbone built here.

        Returns:
            The backbone.

        Raises:
            TypeError: an unknown argument (named), or a `backbone` of
                another class.
            ValueError: a bad backbone argument, or one that disagrees with
                the given backbone.

        Example:
        >>> from zoo.seq2seq import Seq2Seq
        >>> kwargs = {"embedding_dim": 4, "units": 3, "name": "tiny"}
        >>> backbone = Seq2Seq.build_backbone((10, 12), None, kwargs)
        >>> type(backbone).__name__, backbone.units, kwargs  # `name` is left
        ('Seq2SeqBackbone', 3, {'name': 'tiny'})
        >>> Seq2Seq.build_backbone((), backbone, {"units": 3}) is backbone
        True
        >>> Seq2Seq.build_backbone((), backbone, {"units": 5})
        Traceback (most recent call last):
        ...
        ValueError: Seq2Seq: `units` disagrees with the given Seq2SeqBackbone's units=3. Received: units=5
        """
        arguments = cls.backbone_arguments
        given = arguments.take(cls.__name__, args, kwargs)
        if isinstance(backbone, arguments.cls):
            arguments.check_agrees(cls.__name__, given, backbone)
            return backbone
        if backbone is not None:
            if isinstance(backbone, keras.Layer) or "backbone" not in arguments.names:
                raise TypeError(
                    f"`backbone` must be a {arguments.cls.__name__}. "
                    f"Received: backbone={backbone!r:.80}"
                )
            given["backbone"] = backbone
        return arguments.build(given, dtype=dtype, name=name)

    # Distribution ------------------------------------------------------------

    def compute_loss(
        self, x=None, y=None, y_pred=None, sample_weight=None, training=True
    ):
        """The compiled loss, averaged over the global batch under `tf.distribute`.

        Keras divides each replica's loss by that replica's own count of
        (unmasked) outputs, e.g. target tokens, and then averages the
        replicas, so a token in a short slice of the batch would weigh more
        than one in a long slice. The sample weights of each replica are
        scaled instead (`zoo.base.distributed_loss.global_average_weights`), which
        makes the summed gradients those of the mean over every output of
        the global batch, as on one device; the value returned is adjusted
        (without touching its gradient) so that the loss Keras logs is that
        mean too (`zoo.base.distributed_loss.logged_as_share`). On one device
        this is Keras's loss.

        The loss gets a copy of the sample weights: Keras merges a mask into
        them with an in-place `*=` (`keras.src.losses.loss.apply_mask`),
        which under PyTorch would change the tensor the step then hands the
        weighted metrics (they would count padding).

        Example:
        >>> import tensorflow as tf
        >>> ids = keras.Input((1,), name="ids")
        >>> model = Task(ids, ids)
        >>> model.compile(loss="mse")
        >>> float(model.compute_loss(y=tf.ones((2, 1)), y_pred=tf.zeros((2, 1))))
        1.0
        """
        if sample_weight is not None:
            sample_weight = keras.tree.map_structure(keras.ops.copy, sample_weight)
        sample_weight = distributed_loss.global_average_weights(
            y, y_pred, sample_weight
        )
        loss = super().compute_loss(x, y, y_pred, sample_weight, training=training)
        return distributed_loss.logged_as_share(
            loss, distributed_loss.batch_samples(x, y)
        )

    def train_step(self, *args):
        """Keras's training step, its logs shaped for multi-worker reduction.

        The loss is `compute_loss`'s (a mean over the global batch); under
        TensorFlow the logs get the leading axis `MultiWorkerMirroredStrategy`
        reduces over (`distributed_loss.per_worker_logs`), unchanged
        elsewhere. (JAX passes `(state, data)` and gets `(logs, state)`.)
        """
        if not backends.on_tensorflow():
            return super().train_step(*args)
        return distributed_loss.per_worker_logs(super().train_step(*args))

    def test_step(self, *args):
        """Keras's evaluation step, its logs as in `train_step`."""
        if not backends.on_tensorflow():
            return super().test_step(*args)
        return distributed_loss.per_worker_logs(super().test_step(*args))

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        # Keras 3 builds from the first distributed batch averaged over the
        # replicas, which fails under MultiWorkerMirroredStrategy; this
        # worker's part has the shapes (`distributed_loss.local_batch`).
        strategy = self._distribute_strategy
        if iterator is not None and strategy is not None:
            for _, _, batches in iterator:
                data_batch = distributed_loss.local_batch(strategy, next(batches))
                break
            iterator = None
        return super()._maybe_symbolic_build(iterator=iterator, data_batch=data_batch)

    # Config and presets ------------------------------------------------------

    def get_config(self):
        """The constructor arguments, with the serialized preprocessor.

        A task built on a backbone lists the backbone's arguments flat,
        under the task's names (as configs saved before the backbones
        existed do), then its own arguments, read from the attributes of
        the same names. A `Task` built from inputs and outputs has a
        functional config.
        """
        pre = self.preprocessor
        pre = None if pre is None else keras.saving.serialize_keras_object(pre)
        if self.backbone_arguments is None:
            config = super().get_config()
            if pre is not None:
                config[PREPROCESSOR_KEY] = pre
            return config
        config = base_config(self)
        config.update(self.backbone_arguments.config(self.backbone))
        for name in ArgumentsOf(type(self)).names:
            if name not in ("backbone", PREPROCESSOR_KEY):
                config[name] = getattr(self, name)
        config[PREPROCESSOR_KEY] = pre
        policies = quantization.policy_map(self)
        if policies is not None:
            config["dtype"] = keras.dtype_policies.serialize(policies)
        return config

    @classmethod
    def parameter_count(cls, config):
        """The parameters `cls.from_config(config)` would create, unbuilt.

        Asked by `from_config` before anything is built: a config above
        `zoo.base.parameter_budget.MAX_PARAMETERS` is refused there. The
        backbone counts its part (`Backbone.parameter_count`); a task with
        layers of its own on top adds theirs.

        Args:
            config: dict. The task's config (its constructor arguments).

        Returns:
            int, exact but for the bound of the alignment function
            (`zoo.base.parameter_budget.score_parameters`); `None` for a task
            built from inputs and outputs (no backbone to ask).

        Raises:
            ValueError: a size the constructor would refuse.

        Example:
        >>> from zoo.transformer import Transformer
        >>> config = {"vocabulary_size": 20, "num_layers": 1, "hidden_dim": 8,
        ...           "intermediate_dim": 16, "num_heads": 2}
        >>> Transformer.parameter_count(config) == Transformer(**config).count_params()
        True
        """
        arguments = cls.backbone_arguments
        if arguments is None:
            return None
        return arguments.cls.parameter_count(**arguments.values(config))

    @classmethod
    def from_config(cls, config):
        """Rebuilds a task from its `get_config()`.

        Zoo models' configs are their constructor arguments, with the
        preprocessor serialized as a Keras object (or given as a layer) and
        the dtype policy as a dict; a `Task` built from inputs and outputs
        has a functional config.

        Example:
        >>> ids = keras.Input((), dtype="int64", name="ids")
        >>> model = Task(ids, keras.layers.Embedding(4, 2)(ids))
        >>> type(Task.from_config(model.get_config())).__name__
        'Task'
        """
        config = with_dtype_policy(config)
        policies = config.get("dtype")
        if isinstance(policies, keras.dtype_policies.DTypePolicyMap):
            config["dtype"] = policies.default_policy
        count = cls.parameter_count(config)
        if count is not None:
            parameter_budget.check(cls.__name__, count)
        pre = config.get(PREPROCESSOR_KEY)
        if isinstance(pre, dict):
            config[PREPROCESSOR_KEY] = keras.saving.deserialize_keras_object(pre)
        if {"layers", "input_layers", "output_layers"} <= set(config):
            pre = config.pop(PREPROCESSOR_KEY, None)
            model = keras.Model.from_config.__func__(cls, config)
            model.preprocessor = pre
            return model
        model = cls(**config)
        if isinstance(policies, keras.dtype_policies.DTypePolicyMap):
            quantization.requantized(model, policies)
        return model

    def quantize(self, mode=None, config=None, filters=None, **kwargs):
        """Quantizes the weights of the model, not its preprocessor.

        `keras.Model.quantize` with its arguments and meaning, on the layers
        that own weights outside the `preprocessor`: Keras converts those
        that implement its quantization hooks (`Dense`, `EinsumDense`,
        `Embedding` and the layers built on them); the others keep their
        float weights, and one warning names those with a kernel (see
        `zoo.base.quantization`). The quantized model saves and loads as a
        preset (its config records each layer's policy), exports and
        serves.

        Args:
            mode: str. `"int8"`, `"int4"` or `"float8"` (Keras's modes).
                Optional if `config` is given.
            config: optional `keras.quantizers.QuantizationConfig`.
            filters: optional regex (or list of them) searched in layer
                names, or a callable `filters(layer) -> bool`: only the
                layers it matches are quantized. Defaults to `None` (all).
            **kwargs: `keras.Model.quantize`'s other arguments.

        Example:
        >>> from zoo.base.raw_inputs import FeaturePreprocessor
        >>> words = keras.layers.StringLookup(vocabulary=["in", "the"])
        >>> ids = keras.Input((), dtype="int64", name="ids")
        >>> outputs = keras.layers.Dense(4)(keras.layers.Embedding(3, 8)(ids))
        >>> model = Task(ids, outputs, preprocessor=FeaturePreprocessor(words))
        >>> model.quantize("int8")
        >>> sorted({layer.dtype_policy.name for layer in model.layers[1:]})
        ['int8_from_float32']
        >>> model.predict(["in", "the"], verbose=0).shape
        (2, 4)
        """
        pre = self.preprocessor
        skipped = () if pre is None else pre._flatten_layers()
        chosen = quantization.chosen_layers(filters, skipped)
        floats = [
            layer
            for layer in self._flatten_layers()
            if chosen(layer) and not quantization.quantizable(layer)
        ]
        left = {id(layer) for layer in floats}  # not handed to Keras
        with quantization.frozen_heap():
            super().quantize(
                mode,
                config=config,
                filters=lambda layer: chosen(layer) and id(layer) not in left,
                **kwargs,
            )
        quantization.warn_left_float(floats, mode or config.mode)
        # The searches compiled on the float weights (`zoo.base.generation`).
        self.__dict__.pop("_zoo_search_functions", None)

    def enable_lora(self, rank, target_layer_names=None):
        """LoRA fine-tuning: only the backbone's adapters train.

        `self.backbone.enable_lora` (keras-hub's API: the named layers get
        adapters, the rest of the backbone is frozen), with the task's own
        layers outside the backbone (an output projection) frozen too.
        Call it before `compile` and `fit`. The searches compiled before
        are dropped (they ran without the adapters). See
        `docs/fine_tuning.md` and `zoo.base.lora`.

        Args:
            rank: int >= 1. The adapters' rank.
            target_layer_names: optional list of layer names. Defaults to
                the backbone's `default_lora_layer_names()`.

        Example:
        >>> from zoo.transformer import Transformer
        >>> model = Transformer(vocabulary_size=20, num_layers=1, hidden_dim=8,
        ...                     intermediate_dim=16, num_heads=2)
        >>> model.enable_lora(2)
        >>> sorted({v.path.split("/")[-1] for v in model.trainable_weights})
        ['lora_kernel_a', 'lora_kernel_b']
        >>> model.get_layer("token_embedding").trainable  # outside the backbone
        False
        """
        self.backbone.enable_lora(rank, target_layer_names)
        backbone_layers = {id(layer) for layer in self.backbone._flatten_layers()}
        for layer in self._flatten_layers(include_self=False):
            if id(layer) not in backbone_layers:
                layer.trainable = False
        self.__dict__.pop("_zoo_search_functions", None)

    def merge_lora(self):
        """Adds the adapters to their kernels and removes them; all trains again.

        The model then equals what its preset reloads to, and exports
        without adapters. Returns the number of layers merged.

        Example:
        >>> from zoo.transformer import Transformer
        >>> model = Transformer(vocabulary_size=20, num_layers=1, hidden_dim=8,
        ...                     intermediate_dim=16, num_heads=2)
        >>> weights = len(model.trainable_weights)
        >>> model.enable_lora(2)
        >>> len(model.trainable_weights)  # the adapters of 6 layers
        12
        >>> model.merge_lora(), len(model.trainable_weights) == weights
        (6, True)
        """
        merged = self.backbone.merge_lora()
        for layer in self._flatten_layers(include_self=False):
            layer.trainable = True
        self.__dict__.pop("_zoo_search_functions", None)
        return merged

    def save_to_preset(self, directory, metadata=None):
        """Saves config, weights, preprocessor (with assets) and metadata.

        Args:
            directory: str or path-like. The preset directory to write
                (replaced whole if it holds a preset).
            metadata: optional dict stored in `metadata.json` (metrics, the
                training command, data split, hardware).

        Returns:
            The metadata written.

        Example:
        >>> import tempfile
        >>> from zoo.base.raw_inputs import FeaturePreprocessor
        >>> words = keras.layers.StringLookup(vocabulary=["in", "the"])
        >>> ids = keras.Input((), dtype="int64", name="ids")
        >>> model = Task(ids, keras.layers.Embedding(3, 2)(ids),
        ...              preprocessor=FeaturePreprocessor(words))
        >>> meta = model.save_to_preset(tempfile.mkdtemp(), metadata={"note": "tiny"})
        >>> sorted(meta["files"]), meta["note"]
        (['config.json', 'model.weights.h5', 'preprocessor.json'], 'tiny')
        """
        return presets.save_preset(
            self, directory, preprocessor=self.preprocessor, metadata=metadata
        )

    def export(self, filepath, format="tf_saved_model", verbose=None, **options):
        """Writes a serving SavedModel: raw inputs in, finished outputs out.

        The `"tf_saved_model"` format is the export of the task's kind
        (`export_serving`): tokenization, the beam search and
        detokenization (or the image handling) run inside the graph, so
        the artefact loads with `tf.saved_model.load` where neither the zoo,
        `keras_attention` nor Keras can be imported, and `python -m zoo
        serve` serves it. `python -m zoo export` writes the same. A task of
        no kind refuses it (as the CLI does); any other `format` is
        `keras.Model.export`'s, of the tensors-in, tensors-out model.

        Args:
            filepath: str or path-like. The directory to write.
            format: str. Defaults to `"tf_saved_model"`.
            verbose: optional bool, passed on to `keras.Model.export`.
            **options: the kind's export settings (e.g. `beam_width` for the
                generative tasks), else `keras.Model.export`'s.

        Returns:
            The export's description (a dict) for the zoo's exports, else
            what `keras.Model.export` returns.

        Raises:
            ValueError: a task of no kind, with `format="tf_saved_model"`.
            zoo.base.backends.BackendError: `format="tf_saved_model"` on a
                backend other than TensorFlow (the export is a TensorFlow
                graph).

        Example:
        >>> import tempfile
        >>> import numpy as np
        >>> from zoo.serving import export
        >>> from zoo.ram import RecurrentAttentionModel
        >>> model = RecurrentAttentionModel(
        ...     num_classes=3, num_glimpses=2, patch_size=4, glimpse_units=4,
        ...     location_units=4, glimpse_output_units=8, units=8, seed=0,
        ...     class_names=["cat", "dog", "owl"])
        >>> with tempfile.TemporaryDirectory() as directory:
        ...     description = model.export(directory)
        ...     exported = export.load(directory)  # TensorFlow alone runs it
        >>> description["kind"], description["signatures"]
        ('classification', ['serve', 'serve_bytes'])
        >>> outputs = exported(image=np.zeros((2, 28, 28, 1), "uint8"))
        >>> outputs["class_name"].shape, outputs["probabilities"].shape
        ((2,), (2, 3))
        >>> ids = keras.Input((), dtype="int64", name="ids")
        >>> Task(ids, ids).export("unused")
        Traceback (most recent call last):
        ...
        ValueError: Task has no kind (translation, captioning or classification), so it has no serving export: subclass a kind of zoo, or call keras.Model.export(model, path) for the tensors-in, tensors-out model.
        """
        if format != "tf_saved_model":
            return super().export(filepath, format=format, verbose=verbose, **options)
        backends.require_tensorflow("`export` (the serving SavedModel)")
        return self.export_serving(filepath, **options)

    def export_serving(self, filepath, **options):
        """The kind's SavedModel (see `export`); its description as a dict.

        A kind overrides it with its exporter; here, a task of no kind
        refuses with a `ValueError`.

        Example:
        >>> ids = keras.Input((), dtype="int64", name="ids")
        >>> Task(ids, ids).export_serving("unused")
        Traceback (most recent call last):
        ...
        ValueError: Task has no kind (translation, captioning or classification), so it has no serving export: subclass a kind of zoo, or call keras.Model.export(model, path) for the tensors-in, tensors-out model.
        """
        raise ValueError(
            _no_kind(self, "serving export") + ": subclass a kind of zoo, or "
            "call keras.Model.export(model, path) for the tensors-in, "
            "tensors-out model."
        )

    def evaluate_split(
        self, split="test", limit=None, beam_width=None, sword_path=None, data_path=None
    ):
        """Scores the task on a held-out split (`python -m zoo evaluate`).

        A kind overrides it with its metrics, printed and returned; a task
        of no kind refuses with a `ValueError`.

        Args:
            split: str. The split to score. Defaults to `"test"`.
            limit: optional int. Score the first `limit` samples.
            beam_width: optional int. The beam of a generative task.
            sword_path: optional str. The SWORD folder of the Bible texts.
            data_path: optional str. The Fashion-MNIST IDX folder.

        Returns:
            The kind's scores (a dict, or the error for a classifier).

        Example:
        >>> ids = keras.Input((), dtype="int64", name="ids")
        >>> Task(ids, ids).evaluate_split()
        Traceback (most recent call last):
        ...
        ValueError: Task has no kind (translation, captioning or classification), so it has no held-out evaluation.
        """
        raise ValueError(_no_kind(self, "held-out evaluation") + ".")

    @classmethod
    def metrics_summary(cls, metrics):
        """One line of the quality a preset of this task records (`metrics`).

        Each kind reads the metrics its evaluation writes; a task of no
        kind reports none.

        Example:
        >>> Task.metrics_summary({"loss": 1.0})
        '(no metrics recorded)'
        """
        return registry.NO_METRICS

    @classmethod
    def preset_note(cls, metadata):
        """A line on what a preset of this task is good for, or `None`.

        `python -m zoo presets` prints it under the preset (a glimpse
        classifier: the image sizes of its training canvas).

        Example:
        >>> Task.preset_note({"class_name": "Task"}) is None
        True
        """
        return None

    @classmethod
    def from_preset(cls, preset, load_weights=True, **overrides):
        """Loads a shipped preset by name, or a preset directory.

        The preset is verified and loaded safely (`keras_attention.presets`);
        its preprocessor (with its assets, e.g. vocabularies) becomes the
        model's `preprocessor` argument. It is then checked for consistency:
        its vocabularies must match the model's vocabulary sizes and
        `end_token_id`, and its sequence lengths must lie in
        `[2, MAX_SEQUENCE_LENGTH]`. `Task.from_preset` loads any task class;
        a subclass's `from_preset` refuses a preset of another class.

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

        Example:
        >>> import tempfile
        >>> features = keras.Input((2,), name="features")
        >>> model = Task(features, keras.layers.Dense(1)(features))
        >>> directory = tempfile.mkdtemp()
        >>> _ = model.save_to_preset(directory)
        >>> loaded = Task.from_preset(directory)
        >>> all((a == b).all() for a, b in zip(loaded.get_weights(), model.get_weights()))
        True
        """
        directory = resolve_preset(preset)
        if cls is Task:  # Any family's preset: their classes must be known.
            for family in registry.families():
                family.task  # noqa: B018  (imports it, registering its objects)

        def give_preprocessor(config, preprocessor):
            if preprocessor is not None:
                config[PREPROCESSOR_KEY] = preprocessor

        model, _, meta = presets.load_preset(
            directory,
            expected_class=None if cls is Task else cls,
            load_weights=load_weights,
            configure=give_preprocessor,
            **overrides,
        )
        _check_consistent(model, directory)
        model.preset_metadata = meta
        return model


def _no_kind(task, what):
    """Why a task of no kind has no `what`."""
    return (
        f"{type(task).__name__} has no kind (translation, captioning or "
        f"classification), so it has no {what}"
    )


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
