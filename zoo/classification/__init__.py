"""The classification kind: what every image classifier of the zoo shares.

`ClassificationTask` (`task.py`): the `classify` verb, the export's
contract and the metrics line of a classifier's presets.
"""

from zoo import lazy

__getattr__, __dir__ = lazy.exports(
    __name__,
    {
        "ClassificationTask": "zoo.classification.task",
    },
)

__all__ = ["ClassificationTask"]
