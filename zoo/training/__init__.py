"""Training: the shared harness, its run directory, CLI flags and callbacks.

- `zoo.training.harness`: `TrainingRun` (budgets, checkpoints, resume,
  metadata, the preset), `compile_classifier`.
- `zoo.training.run_directory`: the run folder a training resumes from.
- `zoo.training.strategy`: the `--strategy` on each backend (`tf.distribute`
  on TensorFlow, `keras.distribution.DataParallel` on JAX).
- `zoo.training.flags`: the command-line flags every `train.py` shares.
- `zoo.training.callbacks`: step and time budgets, annealing.

Each family's `train.py` keeps only what is its own.
"""

from zoo import lazy

__getattr__, __dir__ = lazy.exports(
    __name__,
    {
        "TrainingRun": "zoo.training.harness",
        "compile_classifier": "zoo.training.harness",
    },
)

__all__ = ["TrainingRun", "compile_classifier"]
