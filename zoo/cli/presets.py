"""`presets`: the shipped presets, their metrics and what each is good for.

It reads only the registry and each preset's `metadata.json`: no Keras, no
model code, so it answers at once.
"""

import textwrap

from zoo import registry


def add_parser(sub):
    sub.add_parser("presets", help="list shipped presets")


def metrics_summary(meta):
    """One line of the measured quality stored in a preset's metadata.

    The family of the task class it names says which metrics its kind
    reports (`Family.metrics_summary`, the kind's `Task.metrics_summary`).

    Example:
    >>> metrics_summary({"class_name": "RecurrentAttentionModel",
    ...                  "metrics": {"test_error_percent": 14.98}})
    'test error 14.98%'
    >>> metrics_summary({"class_name": "Unknown", "metrics": {"x": 1}})
    '(no metrics recorded)'
    """
    family = registry.for_class_name(meta.get("class_name"))
    if family is None:
        return registry.NO_METRICS
    return family.metrics_summary(meta.get("metrics", {}))


def image_sizes(meta):
    """For an image model's metadata: the image sizes it is good for.

    The family answers (`Family.note`, its task's `Task.preset_note`).

    Returns:
        str, or `None` for a preset that works at any size.

    Example:
    >>> image_sizes({"class_name": "RecurrentAttentionModel",
    ...              "data": {"variant": "cluttered", "canvas_size": 100}})
    'trained on 100x100 canvases: good for image sides 50 to 125'
    >>> image_sizes({"class_name": "Seq2Seq"}) is None
    True
    """
    family = registry.for_class_name(meta.get("class_name"))
    return None if family is None else family.note(meta)


def presets(args):
    found = registry.list_presets()
    if not found:
        print("No presets shipped yet.")
        return 0
    descriptions = {
        name: text
        for family in registry.families()
        for name, text in family.presets.items()
    }
    for name, path in found.items():
        meta = registry.read_metadata(path)
        print(f"{name:40s} {meta.get('class_name', '?'):24s} {metrics_summary(meta)}")
        for line in textwrap.wrap(descriptions.get(name, ""), 76):
            print(f"    {line}")
        sizes = image_sizes(meta)
        if sizes:
            print(f"    {sizes}")
        print(f"    {path}")
    return 0
