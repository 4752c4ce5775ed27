"""The metrics line of a captioner's presets, without Keras.

`CaptioningTask.metrics_summary` and `python -m zoo presets` (through the
registry) both call `metrics_summary`.
"""

from zoo.registry import NO_METRICS


def metrics_summary(metrics):
    """BLEU-4 and attention correctness of each decoding in `metrics`.

    Example:
    >>> metrics_summary({"test": {"beam3": {
    ...     "bleu4": 61.234, "attention": {"peak": 80.0, "either": 90.0}}}})
    'beam3: BLEU-4 61.23, attention peak on the named item 80.0%'
    """
    parts = []
    for name, values in metrics.get("test", {}).items():
        if isinstance(values, dict) and "bleu4" in values:
            text = f"{name}: BLEU-4 {values['bleu4']:.2f}"
            attention = values.get("attention", {})
            if "peak" in attention:  # The card's and the README's number.
                text += f", attention peak on the named item {attention['peak']:.1f}%"
            parts.append(text)
    return ", ".join(parts) or NO_METRICS
