"""The metrics line of a translator's presets, without Keras.

`TranslationTask.metrics_summary` and `python -m zoo presets` (through the
registry) both call `metrics_summary`.
"""

from zoo.registry import NO_METRICS


def metrics_summary(metrics):
    """BLEU and chrF of each decoding in a preset's test metrics.

    Example:
    >>> metrics_summary({"test": {"beam4": {"bleu": 20.5, "chrf": 44.25}}})
    'beam4: BLEU 20.50 chrF 44.25'
    >>> metrics_summary({})
    '(no metrics recorded)'
    """
    test = metrics.get("test", {})
    parts = [
        f"{name}: BLEU {values['bleu']:.2f} chrF {values['chrf']:.2f}"
        for name, values in test.items()
        if isinstance(values, dict) and "bleu" in values
    ]
    return ", ".join(parts) or NO_METRICS
