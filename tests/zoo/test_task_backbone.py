"""Every zoo task is built from a `backbone=` or from the backbone's arguments.

The two forms give the same model (config, weights layout, outputs); the
config is flat (the backbone's arguments under the task's names), loads the
shipped presets' `config.json` unchanged and round-trips; the backbone's
arguments are the task's attributes; a misspelt argument is a `TypeError`
naming it, and an argument that contradicts a given backbone a `ValueError`.
`zoo.base.constructor_arguments.ArgumentsOf` is tested on its own at the end.
"""

import json
import os
import sys

import keras
import numpy as np
import pytest

from zoo import RecurrentAttentionModel, Seq2Seq, ShowAttendTell, Transformer, registry
from zoo.base.constructor_arguments import ArgumentsOf
from zoo.ram import RecurrentAttention, RecurrentAttentionBackbone
from zoo.show_attend_tell import ShowAttendTellBackbone
from zoo.transformer import TransformerBackbone

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import families  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RNG = np.random.default_rng(0)

# Per registered family (its `test_backbone.py`): the task, its arguments
# (the backbone's, under the task's names), the backbone class, the same
# arguments under the backbone's names, a batch, and task-only arguments.
CASES = families.cases("TASK_CASES")
TASK_ONLY = {family: case[5] for family, case in CASES.items()}


def _without_name(config):
    return {key: value for key, value in config.items() if key != "name"}


def _outputs(model, batch):
    outputs = model(batch, training=False)
    if isinstance(outputs, dict):
        outputs = outputs["logits"]
    return keras.ops.convert_to_numpy(outputs)


@pytest.mark.parametrize("family", sorted(CASES))
def test_built_from_a_backbone_equals_built_from_its_arguments(family):
    task, arguments, backbone_class, backbone_arguments, batch, _ = CASES[family]
    keras.utils.set_random_seed(1)
    from_arguments = task(**arguments, **TASK_ONLY.get(family, {}))
    backbone = backbone_class(**backbone_arguments)
    from_backbone = task(backbone=backbone, **TASK_ONLY.get(family, {}))
    assert from_backbone.backbone is backbone
    assert _without_name(from_backbone.get_config()) == _without_name(
        from_arguments.get_config()
    )
    assert [w.shape for w in from_backbone.weights] == [
        w.shape for w in from_arguments.weights
    ]
    from_backbone.set_weights(from_arguments.get_weights())
    np.testing.assert_allclose(
        _outputs(from_backbone, batch), _outputs(from_arguments, batch), atol=1e-6
    )


@pytest.mark.parametrize("family", sorted(CASES))
def test_the_config_is_flat_and_round_trips(family):
    task, arguments, backbone_class, _, _, _ = CASES[family]
    model = task(**arguments, dtype="mixed_bfloat16")
    config = model.get_config()
    json.dumps(config)
    # Flat: every backbone argument, under the task's name, no nested backbone.
    assert set(task.backbone_arguments.names) <= set(config)
    assert not any(isinstance(value, keras.Model) for value in config.values())
    rebuilt = task.from_config(config)
    assert _without_name(rebuilt.get_config()) == _without_name(config)
    assert rebuilt.dtype_policy.name == "mixed_bfloat16"
    assert rebuilt.backbone.dtype_policy.name == "mixed_bfloat16"
    assert type(rebuilt.backbone) is backbone_class


@pytest.mark.parametrize("family", sorted(CASES))
def test_backbone_arguments_are_task_attributes(family):
    task, arguments, _, _, _, _ = CASES[family]
    model = task(**arguments)
    config = model.backbone.get_config()
    for name in task.backbone_arguments.names:
        if name == "backbone":  # ShowAttendTell: the backbone itself
            continue
        theirs = task.backbone_arguments.parameters[name].name
        value = getattr(model, name)
        expected = getattr(model.backbone, theirs, config[theirs])
        assert value == expected, name
    for name, value in arguments.items():
        assert getattr(model, name) == value


def test_named_attributes_of_each_family():
    ram = RecurrentAttentionModel(num_glimpses=3, patch_size=5, num_classes=4)
    assert (ram.num_glimpses, ram.patch_size, ram.num_classes, ram.channels) == (
        3,
        5,
        4,
        1,
    )
    assert ram.backbone.num_glimpses == ram.backbone.recurrent_attention.num_glimpses
    transformer = Transformer(20, 1, 8, 16, 2)  # positional: the backbone's order
    assert (transformer.num_layers, transformer.hidden_dim) == (1, 8)
    assert (transformer.intermediate_dim, transformer.num_heads) == (16, 2)
    seq2seq = Seq2Seq(10, 12, 4, 3)
    assert (seq2seq.embedding_dim, seq2seq.units) == (4, 3)
    captioner = ShowAttendTell(10, units=6, annotation_dim=8, freeze_backbone=True)
    assert captioner.freeze_backbone and captioner.backbone.freeze_encoder
    assert captioner.image_shape == (84, 84, 1)
    assert isinstance(captioner.backbone, ShowAttendTellBackbone)
    assert captioner.get_config()["backbone"] == "small"


@pytest.mark.parametrize("family", sorted(CASES))
def test_a_misspelt_argument_is_a_type_error_naming_it(family):
    task, arguments, backbone_class, backbone_arguments, _, _ = CASES[family]
    with pytest.raises(TypeError, match=r"unexpected keyword arguments: unitz\b"):
        task(**arguments, unitz=3)
    with pytest.raises(TypeError, match="unitz"):
        backbone_class(**backbone_arguments, unitz=3)
    with pytest.raises(TypeError, match="unitz"):
        task(backbone=backbone_class(**backbone_arguments), unitz=3)
    with pytest.raises(TypeError, match="positional"):
        task(*range(40))


@pytest.mark.parametrize("family", sorted(CASES))
def test_a_given_backbone_is_checked(family):
    task, arguments, backbone_class, backbone_arguments, _, _ = CASES[family]
    backbone = backbone_class(**backbone_arguments)
    # Arguments that agree with the backbone are accepted ...
    model = task(backbone=backbone, **arguments)
    assert model.backbone is backbone
    # ... one that does not is named.
    name = next(n for n in ("units", "num_layers", "hidden_dim") if n in arguments)
    with pytest.raises(ValueError, match=f"Received: {name}=9"):
        task(backbone=backbone, **{name: 9})
    with pytest.raises(TypeError, match="backbone"):
        task(backbone=keras.layers.Dense(2))


def test_a_task_follows_the_dtype_of_a_given_backbone():
    backbone = TransformerBackbone(20, 1, 8, 16, 2, dtype="mixed_bfloat16")
    model = Transformer(backbone=backbone)
    assert model.dtype_policy.name == "mixed_bfloat16"
    rebuilt = Transformer.from_config(model.get_config())
    assert rebuilt.backbone.dtype_policy.name == "mixed_bfloat16"


def test_ram_backbone_passes_the_agent_arguments_through():
    backbone = RecurrentAttentionBackbone(3, num_glimpses=2, channels=3, cell="lstm")
    agent = backbone.recurrent_attention
    assert (agent.num_classes, agent.num_glimpses, agent.cell) == (3, 2, "lstm")
    assert backbone.channels == 3 and backbone.cell == "lstm"
    config = backbone.get_config()
    assert set(ArgumentsOf(RecurrentAttention).names) < set(config)
    rebuilt = RecurrentAttentionBackbone.from_config(config)
    assert rebuilt.get_config() == {**config, "name": rebuilt.name}
    model = RecurrentAttentionModel(policy_learning_rate_scale=0.5, num_glimpses=2)
    location_policy = model.backbone.recurrent_attention.location_policy
    assert location_policy.learning_rate_scale == 0.5
    assert model.get_config()["policy_learning_rate_scale"] == 0.5


def _shipped_configs():
    found = []
    for family in sorted(os.listdir(os.path.join(ROOT, "zoo"))):
        folder = os.path.join(ROOT, "zoo", family, "presets")
        if not os.path.isdir(folder):
            continue
        for name in sorted(os.listdir(folder)):
            path = os.path.join(folder, name, "config.json")
            if os.path.isfile(path):
                found.append(path)
    return found


TASKS = {family.task.__name__: family.task for family in registry.families()}


@pytest.mark.parametrize(
    "path", _shipped_configs(), ids=lambda p: os.path.basename(os.path.dirname(p))
)
def test_shipped_configs_load_unchanged(path):
    with open(path, encoding="utf-8") as f:
        saved = json.load(f)
    task = TASKS[saved["class_name"]]
    config = {k: v for k, v in saved["config"].items() if k != "preprocessor"}
    model = task.from_config(config)
    written = model.get_config()
    for key, value in config.items():
        assert json.loads(json.dumps(written[key])) == value, key
    assert set(written) - set(config) <= {
        "dtype",
        "preprocessor",
        "class_names",
        "reinforce_core",
        "policy_learning_rate_scale",
        "random_first_glimpse",
        "glimpse_filters",
        "num_key_value_heads",
    }


# === ArgumentsOf ===


class Inner:
    def __init__(self, units, depth=2, label="x", dtype=None, name=None):
        self.units, self.depth, self.label = units, depth, label
        self.dtype, self.name = dtype, name

    def get_config(self):
        return {"units": self.units, "depth": self.depth, "label": self.label}


class Outer:
    """Takes `Inner`'s arguments through `*args` / `**kwargs`, plus `size`."""

    passed_arguments = ArgumentsOf(Inner)

    def __init__(self, *args, size=1, **kwargs):
        self.inner = self.passed_arguments.build(
            self.passed_arguments.take("Outer", args, kwargs)
        )
        self.size = size

    def get_config(self):
        return {"size": self.size, **self.passed_arguments.config(self.inner)}


def test_arguments_of_reads_names_order_and_renames():
    arguments = ArgumentsOf(Inner, renamed={"layers": "depth"})
    assert arguments.names == ("units", "layers", "label")
    assert arguments.positional == ("units", "layers", "label")
    kwargs = {"label": "y", "name": "model", "trainable": False}
    given = arguments.take("Task", (4, 3), kwargs)
    assert given == {"units": 4, "layers": 3, "label": "y"}
    assert kwargs == {"name": "model", "trainable": False}  # keras.Model's
    inner = arguments.build(given, dtype="float16")
    assert (inner.units, inner.depth, inner.dtype) == (4, 3, "float16")
    assert arguments.config(inner) == given


def test_arguments_of_a_class_that_passes_arguments_through():
    arguments = ArgumentsOf(Outer)
    assert arguments.names == ("units", "depth", "label", "size")
    assert arguments.positional == ("units", "depth", "label")  # not `size`
    outer = arguments.build(arguments.take("Task", (5,), {"size": 2}))
    assert (outer.size, outer.inner.units, outer.inner.depth) == (2, 5, 2)
    assert arguments.config(outer) == {"units": 5, "depth": 2, "label": "x", "size": 2}


def test_arguments_of_refuses_what_it_cannot_place():
    arguments = ArgumentsOf(Inner)
    with pytest.raises(TypeError, match="at most 3 positional"):
        arguments.take("Task", (1, 2, 3, 4), {})
    with pytest.raises(TypeError, match="multiple values for argument `units`"):
        arguments.take("Task", (1,), {"units": 2})
    with pytest.raises(TypeError, match="Task got unexpected keyword arguments: deep"):
        arguments.take("Task", (), {"deep": 2, "name": "x"})
    with pytest.raises(ValueError, match="`depth` disagrees .* Received: depth=5"):
        arguments.check_agrees("Task", {"depth": 5}, Inner(1))
    arguments.check_agrees("Task", {"depth": 2, "units": 1}, Inner(1))
    # A required argument left out is passed as None, for the class to name.
    assert arguments.build({}).units is None
