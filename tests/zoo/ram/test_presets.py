"""`zoo.ram.PRESETS` lists exactly the presets shipped in zoo/ram/presets/."""

import os

import zoo
from zoo.ram import PRESETS


def test_presets_name_every_shipped_folder():
    shipped = os.path.join(os.path.dirname(zoo.ram.__file__), "presets")
    assert sorted(PRESETS) == sorted(os.listdir(shipped))
    listed = zoo.list_presets()
    for name, description in PRESETS.items():
        assert name in listed
        assert isinstance(description, str) and description.strip()
