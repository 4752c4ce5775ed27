"""What every zoo model stands on: the task, its raw inputs, the backbone.

- `zoo.base.task`: `Task` (the backbone, config and presets, `export`
  through the task's kind), a `PipelineModel`.
- `zoo.base.pipeline_model`: `PipelineModel` (`fit`/`evaluate`/`predict`
  on raw data through the model's preprocessor, batching).
- `zoo.base.raw_inputs`: the raw inputs (the data forms a model takes, the
  preprocessor's input form).
- `zoo.base.backbone`, `zoo.base.constructor_arguments`: the backbone and
  the arguments a task passes on to it.
- `zoo.base.preprocessor`: `Preprocessor`, the base layer of preprocessors
  (TensorFlow preprocessing that feeds a model on any Keras backend).
- `zoo.base.backends`: which backend runs; `require_tensorflow` for what is
  TensorFlow-only (the serving export, `tf.distribute`).
- `zoo.base.generation`: `GenerativeTask` (cached greedy and beam search).
- `zoo.base.transformer_stacks`, `zoo.base.cached_decoder`: the token
  embedding and block stacks that both Transformer families build, check,
  count and run, and their cached decoding.
- `zoo.base.distributed_loss`, `zoo.base.teacher_forcing`,
  `zoo.base.truncation`: loss corrections under `tf.distribute`, the
  shifted decoder inputs, the truncation warning.

Imports run one way: the kinds and families import this package; it
imports neither.
"""
