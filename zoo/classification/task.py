"""`ClassificationTask`: the classification kind (images in, class names out)."""

from zoo.base.task import Task
from zoo.classification import summary
from zoo.serving.export import read_metadata


class ClassificationTask(Task):
    """The classification kind: a task that names the class of each image.

    A subclass (`zoo.RecurrentAttentionModel`) supplies the network and:

    - `classify(images, top_k=1, batch_size=None) -> (names, probabilities)`,
      its user verb (`python -m zoo classify`);
    - `write_export(filepath)`: its SavedModel with the image signatures of
      `zoo.serving.image_export` (`serve`, `serve_bytes`), whose description
      says `kind: "classification"`;
    - `evaluate_split(split, limit, data_path=...)`: its held-out error,
      stored in a preset's metrics as `test_error_percent`.

    Example:
    >>> import zoo
    >>> ClassificationTask.kind, ClassificationTask.verbs
    ('classification', ('classify',))
    >>> issubclass(zoo.RecurrentAttentionModel, ClassificationTask)
    True
    """

    kind = "classification"
    verbs = ("classify",)

    def export_serving(self, filepath, beam_width=None, **options):
        """Writes the classifier's export (`write_export`); its description.

        Raises:
            ValueError: a `beam_width` (a classifier has no beam search).

        Example:
        >>> import zoo
        >>> model = zoo.RecurrentAttentionModel(num_classes=3, num_glimpses=2)
        >>> model.export_serving("unused", beam_width=3)
        Traceback (most recent call last):
        ...
        ValueError: A classifier has no beam search: leave `beam_width` out. Received: beam_width=3
        """
        if beam_width is not None:
            raise ValueError(
                "A classifier has no beam search: leave `beam_width` out. "
                f"Received: beam_width={beam_width!r}"
            )
        self.write_export(filepath, **options)
        return read_metadata(filepath)

    def write_export(self, filepath):
        """Writes the SavedModel (the family's own signatures).

        Example:
        >>> class Plain(ClassificationTask):
        ...     pass
        >>> Plain.__new__(Plain).write_export("unused")
        Traceback (most recent call last):
        ...
        NotImplementedError: Plain must define write_export(filepath).
        """
        raise NotImplementedError(
            f"{type(self).__name__} must define write_export(filepath)."
        )

    @classmethod
    def metrics_summary(cls, metrics):
        """The test error a classifier's preset records.

        Example:
        >>> ClassificationTask.metrics_summary({"test_error_percent": 14.98})
        'test error 14.98%'
        >>> ClassificationTask.metrics_summary({})
        '(no metrics recorded)'
        """
        return summary.metrics_summary(metrics)
