"""The classification kind: what every image classifier of the zoo shares.

`ClassificationTask` (`task.py`): the `classify` verb, the export's
contract and the metrics line of a classifier's presets.
"""

from zoo.classification.task import ClassificationTask

__all__ = ["ClassificationTask"]
