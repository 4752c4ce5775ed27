"""The metrics line of a classifier's presets, without Keras.

`ClassificationTask.metrics_summary` and `python -m zoo presets` (through
the registry) both call `metrics_summary`.
"""

from zoo.registry import NO_METRICS


def metrics_summary(metrics):
    """The test error a classifier's preset records.

    Example:
    >>> metrics_summary({"test_error_percent": 14.98})
    'test error 14.98%'
    >>> metrics_summary({})
    '(no metrics recorded)'
    """
    if "test_error_percent" in metrics:
        return f"test error {metrics['test_error_percent']:.2f}%"
    return NO_METRICS
