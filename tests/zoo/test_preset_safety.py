"""Zoo presets: tampered configs read no outside file, inconsistent ones fail
at load, names mean shipped presets, and the shipped presets still load.

Each case edits a copy of a tiny saved preset and re-signs the edit in
`metadata.json` (an attacker can), so only the load-time checks stand.
"""

import hashlib
import importlib.util
import json
import os
import re
import shutil

import keras
import numpy as np
import pytest
from keras.src.backend.common import global_state

import zoo
from keras_attention import presets
from keras_attention.presets import PresetError
from zoo import cli, registry
from zoo.base import parameter_budget
from zoo.base.task import MAX_SEQUENCE_LENGTH, Task, list_presets
from zoo.cli import common

pytestmark = pytest.mark.tensorflow_only

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location(
    "tiny_models", os.path.join(HERE, "tiny_models.py")
)
tiny_models = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tiny_models)
_spec = importlib.util.spec_from_file_location(
    "bounded", os.path.join(os.path.dirname(HERE), "bounded.py")
)
bounded = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bounded)

# The smallest shipped preset.
SHIPPED = "ram_fashion_mnist_translated_seeking_annealed"


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """Tiny Seq2Seq and ShowAttendTell presets, saved once."""
    root = tmp_path_factory.mktemp("saved")
    tiny_models.seq2seq().save_to_preset(str(root / "seq2seq"))
    tiny_models.show_attend_tell().save_to_preset(str(root / "captioner"))
    return root


@pytest.fixture
def copy(saved, tmp_path):
    def make(name="seq2seq"):
        return shutil.copytree(saved / name, tmp_path / name)

    return make


def _sign(directory, name):
    meta_path = directory / presets.METADATA_FILE
    meta = json.loads(meta_path.read_text())
    meta["files"][name] = hashlib.sha256((directory / name).read_bytes()).hexdigest()
    meta_path.write_text(json.dumps(meta))


def _edit_json(directory, name, change):
    path = directory / name
    config = json.loads(path.read_text())
    change(config)
    path.write_text(json.dumps(config))
    _sign(directory, name)


def _set_preprocessor(key, value):
    return lambda d: _edit_json(
        d, "preprocessor.json", lambda c: c["config"].__setitem__(key, value)
    )


def _tokenizer_with_vocabulary(path):
    def change(config):
        config["config"]["source_tokenizer"]["config"]["vocabulary"] = path

    return lambda d: _edit_json(d, "preprocessor.json", change)


def _cut_vocabulary(keep, drop=()):
    def tamper(d):
        name = "assets/target_tokenizer/vocabulary.txt"
        lines = (d / name).read_text(encoding="utf-8").splitlines()
        lines = [t for t in lines if t not in drop][:keep]
        (d / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
        _sign(d, name)

    return tamper


@pytest.fixture(params=[False, True], ids=["safe-default", "unsafe-enabled"])
def unsafe(request):
    """Runs a test as is, and after `keras.config.enable_unsafe_deserialization()`."""
    before = global_state.get_global_attribute("safe_mode_saving")
    if request.param:
        keras.config.enable_unsafe_deserialization()
    yield
    global_state.set_global_attribute("safe_mode_saving", before)


# Item 1: a vocabulary named by path in a config is never read.
VOCABULARY_PATHS = {
    "dev-zero": (_set_preprocessor("source_tokenizer", "/dev/zero"), "Refusing"),
    "dev-stdin": (_set_preprocessor("source_tokenizer", "/dev/stdin"), "Refusing"),
    "etc-passwd": (_set_preprocessor("target_tokenizer", "/etc/passwd"), "Refusing"),
    "file-descriptor-0": (
        _set_preprocessor("source_tokenizer", 0),
        "must be a list of tokens or the path",
    ),
    "keras-hub-vocabulary-path": (
        _tokenizer_with_vocabulary("/etc/passwd"),
        "vocabulary file outside of the model archive",
    ),
}


@pytest.mark.parametrize("case", sorted(VOCABULARY_PATHS))
def test_vocabulary_path_in_config_is_not_read(copy, unsafe, case):
    tamper, pattern = VOCABULARY_PATHS[case]
    directory = copy()
    tamper(directory)
    with pytest.raises(PresetError, match=f"(?s)preprocessor.json: .*{pattern}"):
        zoo.from_preset(str(directory))


# Item 2: backbone weights named in a config are never opened or downloaded.
@pytest.mark.parametrize("weights", ["imagenet", "/tmp/backbone_notop.h5"])
def test_backbone_weights_in_config_are_refused(copy, monkeypatch, weights):
    from keras.src.utils import file_utils

    def no_download(*args, **kwargs):
        raise AssertionError("from_preset tried a download")

    monkeypatch.setattr(file_utils, "get_file", no_download)
    directory = copy("captioner")
    for backbone in ("small", "MobileNetV2"):
        _edit_json(
            directory,
            "config.json",
            lambda c, b=backbone: c["config"].update(
                backbone=b, backbone_weights=weights
            ),
        )
        with pytest.raises(PresetError, match="may not name backbone weights"):
            zoo.from_preset(str(directory))


# Item 6: a preset whose parts disagree fails at load, not at translate.
INCONSISTENT = {
    "no-end-token": (_cut_vocabulary(None, drop=("[END]",)), "lacks .* \\[END\\]"),
    "vocabulary-cut": (_cut_vocabulary(-10), r"holds \d+ tokens, but .* for \d+"),
    "huge-sequence-length": (
        _set_preprocessor("source_sequence_length", 10**12),
        f"source_sequence_length=1000000000000 is outside \\[2, {MAX_SEQUENCE_LENGTH}",
    ),
}


@pytest.mark.parametrize("case", sorted(INCONSISTENT))
def test_inconsistent_preset_fails_at_load(copy, case):
    tamper, pattern = INCONSISTENT[case]
    directory = copy()
    tamper(directory)
    with pytest.raises(PresetError, match=pattern):
        zoo.from_preset(str(directory))


def test_end_token_id_must_match_the_vocabulary(copy):
    directory = copy("captioner")
    _edit_json(directory, "config.json", lambda c: c["config"].update(end_token_id=5))
    with pytest.raises(PresetError, match="end_token_id=5 is not the id of"):
        zoo.from_preset(str(directory))


def test_nan_weights_fail_at_load(tmp_path):
    model = tiny_models.seq2seq()
    variable = model.weights[0]
    variable.assign(np.full(variable.shape, np.nan, "float32"))
    model.save_to_preset(str(tmp_path / "nan"))
    with pytest.raises(PresetError, match="NaN or infinite values"):
        zoo.from_preset(str(tmp_path / "nan"))


# Item 7: a name is a shipped preset; a path is a path.
def test_local_folder_cannot_stand_in_for_a_shipped_preset(copy, tmp_path, monkeypatch):
    shutil.copytree(copy(), tmp_path / "work" / SHIPPED)
    shutil.copytree(copy("captioner"), tmp_path / "work" / "mine")
    monkeypatch.chdir(tmp_path / "work")
    with pytest.warns(UserWarning, match=f"Loading the shipped preset '{SHIPPED}'"):
        model = zoo.from_preset(SHIPPED)
    assert type(model).__name__ == "RecurrentAttentionModel"
    with pytest.warns(UserWarning, match="not the folder"):
        assert type(common.load_preset(SHIPPED)).__name__ == "RecurrentAttentionModel"
    assert type(zoo.from_preset(f"./{SHIPPED}")).__name__ == "Seq2Seq"
    with pytest.raises(
        ValueError, match="To load the folder 'mine' here, pass './mine'"
    ):
        zoo.from_preset("mine")
    assert type(zoo.from_preset("./mine")).__name__ == "ShowAttendTell"
    assert type(zoo.from_preset(tmp_path / "work" / "mine")).__name__ == (
        "ShowAttendTell"
    )


# Item 5: malformed files end the CLI with one line and exit status 2.
CLI_CASES = {
    "metadata-list": lambda d: (d / "metadata.json").write_text("[1, 2]"),
    "metadata-null": lambda d: (d / "metadata.json").write_text("null"),
    "config-not-utf8": lambda d: (
        (d / "config.json").write_bytes(b'{"class_name": "\xff"}'),
        _sign(d, "config.json"),
    ),
    "config-list": lambda d: (
        (d / "config.json").write_text("[]"),
        _sign(d, "config.json"),
    ),
    "preprocessor-config-list": lambda d: _edit_json(
        d, "preprocessor.json", lambda c: c.__setitem__("config", [1])
    ),
    "preprocessor-vocabulary-path": _set_preprocessor("source_tokenizer", "/dev/zero"),
}


@pytest.mark.parametrize("case", sorted(CLI_CASES))
def test_cli_reports_a_malformed_preset_in_one_line(copy, capsys, case):
    directory = copy()
    CLI_CASES[case](directory)
    assert cli.main(["translate", str(directory), "Jesus wept."]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err, err
    assert "Traceback" not in err


def test_shipped_presets_load_unchanged():
    shipped = list_presets()
    # Every preset the families register, each in its folder.
    assert sorted(shipped) == sorted(registry.presets())
    for name, directory in shipped.items():
        before = presets.verify_preset(directory)
        model = Task.from_preset(name)
        assert type(model).__name__ == before["class_name"]
        # Well under the parameter budget, counted within 0.1% (the score).
        count = type(model).parameter_count(model.get_config())
        assert model.count_params() <= count <= 1.001 * model.count_params()
        assert count < parameter_budget.MAX_PARAMETERS / 16
        assert presets.verify_preset(directory) == before
        assert not [n for n in os.listdir(os.path.dirname(directory)) if "." in n[:1]]


def _child_load(directory, then=""):
    """A program that loads a preset and prints the `PresetError` (and the
    seconds the load took), for `bounded.run`."""
    return f"""
import time
import zoo
from keras_attention.presets import PresetError
start = time.monotonic()
try:
    model = zoo.from_preset({str(directory)!r})
    {then}
except PresetError as e:
    print("PresetError:", e)
print(f"load seconds: {{time.monotonic() - start:.2f}}")
"""


def test_huge_vocabulary_is_refused_by_size_before_it_is_read(copy):
    # The vocabulary padded to 30 MiB with one-word lines: the loader
    # without a cap on assets built a 3.3-million-word tokenizer (68 s,
    # 3.9 GB) before the consistency check refused it. Bounded: the child
    # is stopped at 2 GiB or 60 s.
    directory = copy()
    name = "assets/target_tokenizer/vocabulary.txt"
    size = 30 << 20
    words = (directory / name).read_bytes()
    words += b"".join(b"w%07d\n" % i for i in range(size // 9 + 1))
    (directory / name).write_bytes(words[:size])
    _sign(directory, name)
    outcome = bounded.run(_child_load(directory), memory=2 << 30, seconds=60)
    assert outcome.stopped is None and outcome.returncode == 0, outcome
    assert f"{name} is too large: {size} bytes" in outcome.output, outcome
    load_seconds = float(outcome.output.split("load seconds:")[1])
    assert load_seconds < 5, outcome  # Refused by its size, not parsed.


def _set_config(**changes):
    return lambda d: _edit_json(d, "config.json", lambda c: c["config"].update(changes))


# Architecture sizes over `zoo.base.backbone.MAX_SIZES` (and, below, products
# over the parameter budget): preset -> (edit, error).
OVERSIZED = {
    "units": ("seq2seq", _set_config(units=12000), "`units` must be at most 8192"),
    "vocabulary": (
        "seq2seq",
        _set_config(target_vocabulary_size=10**8),
        "`target_vocabulary_size` must be at most 262144",
    ),
    "heads": (
        "transformer",
        _set_config(num_heads=2**20, hidden_dim=2**20),
        "`hidden_dim` must be at most 8192",
    ),
    "glimpses": (
        "ram",
        _set_config(num_glimpses=10**9),
        "`num_glimpses` must be at most 1000",
    ),
    "retina": (
        "ram",
        _set_config(num_scales=12, scale_factor=16),
        "The coarsest glimpse patch, .* must be at most 8192",
    ),
    "image": (
        "captioner",
        _set_config(image_shape=[84, 10**6, 1]),
        r"`image_shape` must be positive and at most \(8192, 8192, 4\)",
    ),
}
# Sizes within MAX_SIZES whose product is over the parameter budget
# (`zoo.base.parameter_budget`): units=4000 took 4 GB and 172 s before.
OVER_BUDGET = r"asks for [\d,]+ parameters, over the budget of 268,435,456"
OVERSIZED.update(
    {
        "units-product": ("seq2seq", _set_config(units=4000), OVER_BUDGET),
        "layers-x-width": (
            "transformer",
            _set_config(num_layers=256, hidden_dim=4096, intermediate_dim=16384),
            OVER_BUDGET,
        ),
        "retina-x-units": (
            "ram",
            _set_config(patch_size=1024, glimpse_units=8192),
            OVER_BUDGET,
        ),
        "image-x-units": (
            "captioner",
            _set_config(image_shape=[8192, 8192, 1], feedback="weights", units=1024),
            OVER_BUDGET,
        ),
        "vocabulary-x-embedding": (
            "captioner",
            _set_config(vocabulary_size=262_144, embedding_dim=8192),
            OVER_BUDGET,
        ),
    }
)


def test_architecture_sizes_over_their_limits_are_refused_at_load(saved, tmp_path):
    # units=12000 passed 5 GiB, num_glimpses=10**9 loaded and `classify`
    # never returned: all the cases run in one child, stopped at 2 GiB or
    # 120 s, each then run on an image (the RAM) or asked to count its weights.
    tiny_models.ram().save_to_preset(str(tmp_path / "ram"))
    tiny_models.transformer().save_to_preset(str(tmp_path / "transformer"))
    directories = {}
    for case, (preset, edit, _) in OVERSIZED.items():
        source = (
            tmp_path / preset if preset in ("ram", "transformer") else saved / preset
        )
        directories[case] = shutil.copytree(source, tmp_path / "cases" / case)
        edit(directories[case])
    program = "import numpy as np\nresults = {}\n" + "".join(
        _child_load(
            directory,
            then="model(np.zeros((1, 28, 28, 1), 'float32')) "
            "if hasattr(model, 'classify') else model.count_params()",
        ).replace('print(f"load', f'print({case!r}, f"load')
        for case, directory in directories.items()
    )
    outcome = bounded.run(program, memory=2 << 30, seconds=120)
    assert outcome.stopped is None and outcome.returncode == 0, outcome
    errors = [line for line in outcome.output.splitlines() if "PresetError:" in line]
    assert len(errors) == len(OVERSIZED), outcome
    for line, (case, (_, _, pattern)) in zip(errors, OVERSIZED.items()):
        assert f"{directories[case]}/config.json" in line, line
        assert re.search(pattern, line), (case, line)
    # Each refused before anything was built (the largest took 0.1 s).
    for seconds in re.findall(r"load seconds: ([\d.]+)", outcome.output):
        assert float(seconds) < 10, outcome
