"""Oversized presets are refused by size, before any file is copied or parsed.

Each case makes one file of a tiny preset larger than its kind's limit (and
re-signs it where the checksum would otherwise refuse it first); the load
must raise a `PresetError` naming the file, its size and the limit. The
cases that the old loader would copy or parse whole (a 3 GiB sparse weights
file) run in a bounded child process (`tests/bounded.py`), so that they stop
by themselves on such code.
"""

import ctypes
import ctypes.util
import importlib.util
import json
import os

import keras
import pytest

from keras_attention import presets
from keras_attention.presets import PresetError, rebuild, verification

_spec = importlib.util.spec_from_file_location(
    "bounded",
    os.path.join(os.path.dirname(os.path.dirname(__file__)), "bounded.py"),
)
bounded = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bounded)


_spec = importlib.util.spec_from_file_location(
    "tampered_presets", os.path.join(os.path.dirname(__file__), "tampered_presets.py")
)
tampered = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tampered)
_save, _sign = tampered.save, tampered.sign


def _pad_json(directory, name, size):
    """Pads a JSON file with spaces (still valid JSON) to `size` bytes."""
    path = directory / name
    data = path.read_bytes().rstrip()
    path.write_bytes(data + b" " * (size - len(data)))
    _sign(directory, name)


# file -> (its limit, what the message calls it)
OVERSIZED = {
    "config.json": ("MAX_JSON_BYTES", "a JSON file"),
    "preprocessor.json": ("MAX_JSON_BYTES", "a JSON file"),
    "assets/tokens.txt": ("MAX_ASSET_BYTES", "an asset"),
}


@pytest.mark.parametrize("name", sorted(OVERSIZED))
def test_file_over_its_limit_is_refused_before_it_is_read(tmp_path, name):
    limit_name, kind = OVERSIZED[name]
    limit = getattr(presets, limit_name)
    directory = _save(tmp_path / "p")
    if name.endswith(".json"):
        _pad_json(directory, name, limit + 1)
    else:  # A vocabulary of a million short words, one per line.
        words = b"".join(b"w%07d\n" % i for i in range(limit // 9 + 1))
        (directory / name).write_bytes(words)
        _sign(directory, name)
    size = os.path.getsize(directory / name)
    with pytest.raises(PresetError) as info:
        presets.load_preset(str(directory))
    message = str(info.value)
    assert str(directory / name) in message, message
    assert f"{size} bytes" in message and f"{limit} bytes" in message, message
    assert f"limit for {kind}" in message, message
    with pytest.raises(PresetError, match="limit for"):
        presets.verify_preset(str(directory))


def test_files_over_the_total_limit_are_refused(tmp_path, monkeypatch):
    directory = _save(tmp_path / "p")
    total = sum(
        os.path.getsize(os.path.join(root, name))
        for root, _, names in os.walk(directory)
        for name in names
    )
    monkeypatch.setattr(verification, "MAX_TOTAL_BYTES", total - 1)
    with pytest.raises(PresetError, match=f"too large: its files hold {total} bytes"):
        presets.load_preset(str(directory))
    monkeypatch.setattr(verification, "MAX_TOTAL_BYTES", total)
    presets.load_preset(str(directory))  # The limit itself is allowed.


def test_metadata_over_its_limit_is_refused(tmp_path):
    directory = _save(tmp_path / "p")
    path = directory / presets.METADATA_FILE
    data = path.read_bytes().rstrip()
    path.write_bytes(data + b" " * (presets.MAX_JSON_BYTES + 1 - len(data)))
    with pytest.raises(PresetError, match=r"metadata.json is too large: 4194305"):
        presets.read_metadata(str(directory))


def _keep_size_fallocate(path, size):
    """Allocates `size` bytes on disk for `path` without changing its size
    (Linux `fallocate(FALLOC_FL_KEEP_SIZE)`); False where unsupported."""
    libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    fallocate = getattr(libc, "fallocate", None)
    if fallocate is None:
        return False
    fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
    fd = os.open(path, os.O_WRONLY)
    try:
        return fallocate(fd, 1, 0, size) == 0  # 1: FALLOC_FL_KEEP_SIZE.
    finally:
        os.close(fd)


def test_allocated_size_counts_as_well_as_apparent(tmp_path):
    directory = _save(tmp_path / "p")
    name = "assets/tokens.txt"
    apparent = os.path.getsize(directory / name)
    allocated = presets.MAX_ASSET_BYTES * 9 // 8 + 4096  # Past the slack.
    if not _keep_size_fallocate(directory / name, allocated):
        pytest.skip("no fallocate(FALLOC_FL_KEEP_SIZE) on this file system")
    assert os.path.getsize(directory / name) == apparent  # Still valid.
    with pytest.raises(
        PresetError, match=f"tokens.txt is too large: .*apparent size {apparent} "
    ) as info:
        presets.load_preset(str(directory))
    assert f"allocated {os.stat(directory / name).st_blocks * 512} bytes" in str(
        info.value
    )


# The bounded children refuse the preset from its files and JSON, before
# Keras rebuilds anything on a backend: the same run in every pass, a few
# seconds of a backend's start-up each. They run in the TensorFlow pass.
backend_independent_child = pytest.mark.skipif(
    keras.backend.backend() != "tensorflow",
    reason="backend-independent (refused before Keras builds): runs in the "
    "TensorFlow pass",
)

LOAD = """
from keras_attention import presets
try:
    presets.load_preset({directory!r})
except presets.PresetError as e:
    print("PresetError:", e)
"""


@backend_independent_child
def test_sparse_weights_file_is_refused_before_it_is_copied(tmp_path):
    # 3 GiB apparent, nothing allocated: cheap to make, and a loader that
    # copies before it checks writes 3 GiB to the temporary folder (the
    # child may write no file over 256 MiB, and the test stops there).
    directory = _save(tmp_path / "p")
    size = 3 << 30
    with open(directory / presets.WEIGHTS_FILE, "r+b") as f:
        f.truncate(size)
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    outcome = bounded.run(
        LOAD.format(directory=str(directory)),
        memory=2 << 30,
        seconds=60,
        env={"TMPDIR": str(temporary)},
    )
    assert outcome.stopped is None and outcome.returncode == 0, outcome
    assert "PresetError:" in outcome.output, outcome
    assert f"model.weights.h5 is too large: {size} bytes" in outcome.output, outcome
    assert f"{presets.MAX_WEIGHTS_BYTES} bytes (2.0 GiB) limit" in outcome.output
    assert os.listdir(temporary) == []  # Nothing was copied.


def test_a_file_that_grows_after_its_size_check_is_cut_off(tmp_path, monkeypatch):
    # The read is bounded too: a file that passed the size check and then
    # grew (stood in here by skipping the check) is refused at its limit.
    directory = _save(tmp_path / "p")
    _pad_json(directory, "config.json", presets.MAX_JSON_BYTES + 1)
    monkeypatch.setattr(verification, "check_size", lambda fd, name, path: 0)
    with pytest.raises(PresetError, match="config.json grew past the 4194304 bytes"):
        presets.load_preset(str(directory))


# Keras rebuilds `{"class_name": "__numpy__", ...}` as `np.array(value,
# dtype)`: 173 bytes asking for 16 elements of 400 MB each.
NUMPY = {
    "class_name": "__numpy__",
    "config": {"value": ["x"] * 16, "dtype": "U100000000"},
}

LOAD_EACH = """
from keras_attention import presets
for directory in {directories!r}:
    try:
        presets.load_preset(directory)
        print("loaded", directory)
    except presets.PresetError as e:
        print("PresetError:", e)
"""


@backend_independent_child
def test_numpy_array_of_a_huge_dtype_is_refused_before_it_is_built(tmp_path):
    # As the whole preprocessor.json, and nested in a layer of config.json.
    whole = _save(tmp_path / "whole")
    (whole / presets.PREPROCESSOR_FILE).write_text(json.dumps(NUMPY))
    _sign(whole, presets.PREPROCESSOR_FILE)
    nested = _save(tmp_path / "nested", preprocessor=False)  # Only Keras's.
    config = json.loads((nested / presets.CONFIG_FILE).read_text())
    config["config"]["layers"][-1]["config"]["bias_initializer"] = {
        "class_name": "Constant",
        "config": {"value": NUMPY},
    }
    (nested / presets.CONFIG_FILE).write_text(json.dumps(config))
    _sign(nested, presets.CONFIG_FILE)
    directories = [str(whole), str(nested)]
    outcome = bounded.run(
        LOAD_EACH.format(directories=directories), memory=2 << 30, seconds=90
    )
    assert outcome.stopped is None and outcome.returncode == 0, outcome
    for directory, name in zip(directories, ["preprocessor.json", "config.json"]):
        assert (
            f"Cannot rebuild the {'object' if 'pre' in name else 'model'} in "
            f"{directory}/{name}: it holds a '__numpy__' array of dtype "
            "'U100000000'"
        ) in outcome.output, outcome


def _externalize_first_dataset(weights, outside):
    """Rewrites a weights file so its first dataset is stored outside it
    (HDF5 "external" storage), which Keras refuses to read."""
    import h5py
    import numpy as np

    names = []
    with h5py.File(weights, "r") as f:
        f.visititems(lambda name, item: names.append(name) or None)
        first = next(n for n in names if isinstance(f[n], h5py.Dataset))
        value = np.asarray(f[first])
    value.tofile(outside)
    with h5py.File(weights, "r+") as f:
        del f[first]
        f.create_dataset(
            first,
            shape=value.shape,
            dtype=value.dtype,
            external=[(str(outside), 0, value.nbytes)],
        )


def test_weights_error_carries_keras_cause_not_only_its_last_line(tmp_path):
    # Keras's message ends with "[<Dense name=dense, built=True>]"; the
    # reason it could not load the weights is in its middle.
    directory = _save(tmp_path / "p", preprocessor=False)
    _externalize_first_dataset(directory / presets.WEIGHTS_FILE, tmp_path / "x.bin")
    _sign(directory, presets.WEIGHTS_FILE)
    with pytest.raises(PresetError) as info:
        presets.load_preset(str(directory))
    message = str(info.value)
    assert message.startswith(f"Cannot read weights file {directory}/model.weights.h5")
    assert "Not allowed: H5 file with external Dataset" in message, message
    assert "\n" not in message


def test_a_long_cause_keeps_both_ends_and_says_how_much_was_cut():
    error = ValueError("a" * 1000 + "x" * 1000 + "z" * 3000)
    assert rebuild.cause(error) == (
        "a" * 1000 + " [... 1000 characters cut ...] " + "z" * 3000
    )


def test_the_cause_chain_is_kept_outermost_first():
    try:
        try:
            raise OSError("disk says no\nat block 7")
        except OSError as inner:
            raise ValueError("Could not load") from inner
    except ValueError as outer:
        assert rebuild.cause(outer) == (
            "Could not load Caused by: disk says no at block 7"
        )
