"""The parameter budget: counts from configs against built models (#40).

`Task.parameter_count(config)` is arithmetic on the config; each count is
checked here against `count_params()` of the model Keras builds from the
same config (the independent reference), for the tiny models of every
family and for configs that take each branch of the counts.
"""

import inspect
import json
import os
import sys
import zipfile

import keras
import pytest

from keras_attention import scores
from zoo.base import parameter_budget
from zoo.ram import RecurrentAttentionModel
from zoo.seq2seq import Seq2Seq
from zoo.show_attend_tell import ShowAttendTell
from zoo.transformer import Transformer

pytestmark = pytest.mark.tensorflow_only

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import tiny_models  # noqa: E402


def _score_weights(model):
    """The weights of the alignment functions in `model`."""
    return sum(int(keras.ops.size(w)) for w in model.weights if "/score/" in w.path)


@pytest.mark.parametrize("name", sorted(tiny_models.CASES))
def test_the_count_of_each_tiny_model_bounds_it_exactly_but_for_its_score(name):
    model = tiny_models.CASES[name][0](0)
    count = type(model).parameter_count(model.get_config())
    actual = model.count_params()
    # Never below; above only by what the score's bound adds, which is
    # less than the score's own weights here.
    assert actual <= count <= actual + _score_weights(model), (count, actual)


# Configs that take each branch of the counts, with scores that have no
# weights (so the count is exact): task class -> configs.
EXACT = {
    Seq2Seq: [
        dict(cell="lstm", bidirectional=True, style="luong", score="dot"),
        dict(cell="gru", bidirectional=False, style="bahdanau", score="cosine"),
        dict(cell="lstm", encoder_layers=2, style="luong", score="scaled_dot"),
        dict(
            cell="gru",
            style="luong",
            score="dot",
            window=1,
            local="predictive",
            bidirectional=False,
        ),
    ],
    Transformer: [
        dict(tie_embeddings=False),
        dict(target_vocabulary_size=15, normalize_first=True),
        dict(target_vocabulary_size=15, tie_embeddings=False, num_layers=2),
    ],
    RecurrentAttentionModel: [
        dict(cell="lstm"),
        dict(channels=3, glimpse_filters=[2, 3], patch_size=5, num_scales=2),
    ],
    ShowAttendTell: [
        dict(feedback="weights", score="dot", image_shape=(85, 61, 3)),
        dict(gating=False, score="dot", attention="hard"),
    ],
}
SIZES = {
    Seq2Seq: dict(
        source_vocabulary_size=11, target_vocabulary_size=13, embedding_dim=4, units=6
    ),
    Transformer: dict(
        vocabulary_size=17, num_layers=1, hidden_dim=8, intermediate_dim=12, num_heads=2
    ),
    RecurrentAttentionModel: dict(
        num_classes=3,
        num_glimpses=2,
        patch_size=4,
        glimpse_units=5,
        location_units=3,
        glimpse_output_units=7,
        units=6,
    ),
    ShowAttendTell: dict(vocabulary_size=9, annotation_dim=6, embedding_dim=5, units=6),
}


@pytest.mark.parametrize(
    "task, config",
    [(task, config) for task, configs in EXACT.items() for config in configs],
    ids=lambda x: x.__name__ if isinstance(x, type) else "-".join(map(str, x.values())),
)
def test_the_count_is_exact_on_every_branch(task, config):
    config = {**SIZES[task], **config}
    if config.get("score") in ("dot", "cosine", "scaled_dot") and task is Seq2Seq:
        # These scores need query and key of one width: the memory is
        # units * directions, the query units.
        config["bidirectional"] = False
    model = task(**config)
    assert task.parameter_count(config) == model.count_params()


# Scores that compare a query and a key of one width.
SAME_WIDTH = ("Dot", "ScaledDot", "Cosine", "TanhSum")
SCORE_CASES = [
    (cls, dims)
    for cls in sorted(set(scores.ALIASES.values()), key=lambda cls: cls.__name__)
    for dims in ((4, 4),) + (() if cls.__name__ in SAME_WIDTH else ((3, 5), (6, 4)))
]


@pytest.mark.parametrize(
    "cls, dims",
    SCORE_CASES,
    ids=lambda x: x.__name__ if isinstance(x, type) else str(x),
)
@pytest.mark.parametrize("width", [None, 2, 40])
def test_every_score_keeps_within_its_bound(cls, dims, width):
    # The bound the counts use, against the weights each score builds, for
    # every size argument a score takes (`units`, `max_length`).
    query_dim, key_dim = dims
    arguments = inspect.signature(cls).parameters
    config = {}
    for name in ("units", "max_length"):
        if name in arguments:
            config[name] = width if name == "units" else (width or 7)
    identifier = scores.serialize(cls(**config))
    layer = scores.get(identifier)
    # Keys without a static length, as in every zoo model.
    layer.build((None, 1, query_dim), (None, None, key_dim))
    bound = parameter_budget.score_parameters(identifier, query_dim, key_dim)
    assert layer.count_params() <= bound
    if not layer.count_params():
        assert bound == 0


def test_the_budget_refuses_a_config_before_building_and_is_settable(monkeypatch):
    model = tiny_models.ram()
    config = model.get_config()
    count = model.count_params()
    monkeypatch.setattr(parameter_budget, "MAX_PARAMETERS", count - 1)
    with pytest.raises(ValueError) as info:
        RecurrentAttentionModel.from_config(config)
    assert str(info.value).startswith(
        f"RecurrentAttentionModel: the config asks for {count:,} parameters, "
        f"over the budget of {count - 1:,} (zoo.base.parameter_budget.MAX_PARAMETERS)"
    )
    monkeypatch.setattr(parameter_budget, "MAX_PARAMETERS", count)
    assert RecurrentAttentionModel.from_config(config).count_params() == count


def test_a_bad_size_gets_the_constructors_error_before_any_arithmetic():
    # A string where a size goes must not be multiplied ("x" * 10**9).
    config = {**SIZES[Seq2Seq], "units": "x" * 10}
    with pytest.raises(TypeError, match="`units` must be an int >= 1"):
        Seq2Seq.from_config(config)
    config = {**SIZES[RecurrentAttentionModel], "glimpse_filters": 10**9}
    with pytest.raises(TypeError, match="`glimpse_filters` must be a sequence"):
        RecurrentAttentionModel.from_config(config)


def test_a_keras_file_over_the_budget_is_refused_before_building(tmp_path):
    # A `.keras` file is a config too: `keras.saving.load_model` rebuilds
    # the task through `from_config`, which counts first. The edited RAM
    # asks for 17 billion weights (a 1024-pixel patch x 8192 units).
    path = str(tmp_path / "ram.keras")
    tiny_models.ram().save(path)
    with zipfile.ZipFile(path) as archive:
        files = {name: archive.read(name) for name in archive.namelist()}
    config = json.loads(files["config.json"])
    config["config"].update(patch_size=1024, glimpse_units=8192)
    files["config.json"] = json.dumps(config).encode()
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    with pytest.raises(ValueError, match=r"asks for 17,180,\d{3},\d{3} parameters"):
        keras.saving.load_model(path)
