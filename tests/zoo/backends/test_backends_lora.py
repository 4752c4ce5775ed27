"""LoRA and QLoRA on every family (`zoo.base.lora`), through Keras's own LoRA.

Every registered family's tiny task (`families.cases("TASK_CASES")`) gets
adapters on its default targets: only they train, the preset holds them
merged (the loaded model gives the in-memory model's outputs), they save
and load alone (`.lora.h5`), merge in memory, and the same holds after
`quantize("int8")` (QLoRA, where saving re-quantizes the merged kernel as
Keras does). The recurrent families' defaults include their cells'
kernels and recurrent kernels and the `Additive` score's kernels
(`keras_attention.lora`). The file runs under every backend (the Makefile's
`tests/zoo/backends/test_backends*.py`): every family on TensorFlow, a
translator and a classifier on JAX and PyTorch (`OTHER_BACKENDS_FAMILIES`).
"""

import os
import sys

import keras
import numpy as np
import pytest

from zoo.base import lora
from zoo.base.task import Task

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import families  # noqa: E402
import tiny_models  # noqa: E402

BACKEND = keras.backend.backend()
#: TensorFlow's pass runs every family; JAX's and PyTorch's run one
#: translator and one classifier (attention projections; RAM's glimpse
#: Dense layers and its recurrent core, `keras_attention.lora`'s cells):
#: every family under JAX took 26 minutes of a loaded CI.
OTHER_BACKENDS_FAMILIES = ("ram", "transformer")
#: A recurrent cell and an `Additive` score among each family's defaults,
#: each adapted on both its kernels.
RAW_KERNEL_TARGETS = {
    "seq2seq": {"lstm": "recurrent_kernel", "score": "key_kernel"},
    "show_attend_tell": {"lstm": "recurrent_kernel", "score": "key_kernel"},
    "ram": {"core": "recurrent_kernel"},
}
ALL_CASES = families.cases("TASK_CASES")
CASES = {
    name: case
    for name, case in ALL_CASES.items()
    if BACKEND == "tensorflow" or name in OTHER_BACKENDS_FAMILIES
}


def _outputs(model, batch):
    outputs = model(batch, training=False)
    if isinstance(outputs, dict):
        outputs = outputs["logits"]
    return keras.ops.convert_to_numpy(outputs)


def _tiny_task(family):
    task, arguments, _, _, batch, extra = ALL_CASES[family]
    keras.utils.set_random_seed(1)
    model = task(**arguments, **extra)
    model(batch, training=False)
    return model, batch


def _with_random_adapters(model, rank=2, seed=0):
    """`model` with adapters of random values (fresh ones add nothing)."""
    model.enable_lora(rank)
    rng = np.random.default_rng(seed)
    for layer in lora.lora_layers(model.backbone):
        for variable in lora.adapters(layer):
            variable.assign(rng.normal(0, 0.3, variable.shape).astype("float32"))
    return model


def _float_values(model):
    return {
        v.path: keras.ops.convert_to_numpy(v)
        for v in model.weights
        if keras.backend.is_float_dtype(v.dtype)
    }


@pytest.mark.parametrize("family", sorted(CASES))
def test_each_family_names_default_targets_keras_lora_reaches(family):
    model, _ = _tiny_task(family)
    names = model.backbone.default_lora_layer_names()
    assert names
    model.enable_lora(2)
    adapted = lora.lora_layers(model.backbone)
    assert sorted({layer.name for layer in adapted}) == sorted(names)
    assert all(layer.lora_rank == 2 for layer in adapted)
    assert sorted(v.path for v in model.trainable_weights) == sorted(
        f"{layer.path}/{name}"
        for layer in adapted
        for name in lora.adapter_names(layer)
    )
    assert 0 < lora.trainable_share(model) < 1
    by_name = {layer.name: layer for layer in adapted}
    for name, kernel in RAW_KERNEL_TARGETS.get(family, {}).items():
        assert f"lora_{kernel}_b" in lora.adapter_names(by_name[name])


FIT_CASES = sorted(set(tiny_models.CASES) & set(CASES))


@pytest.mark.parametrize("quantized", [False, True], ids=["lora", "qlora"])
@pytest.mark.parametrize("name", FIT_CASES)
def test_fit_trains_only_the_adapters(name, quantized):
    model, x, y = tiny_models.case_with_samples(name)
    if quantized:
        model.quantize("int8")
    model.enable_lora(2)
    model.compile(
        optimizer=keras.optimizers.SGD(0.1), loss=tiny_models.CASES[name][2]()
    )
    before = _float_values(model)
    history = model.fit(x, y, batch_size=4, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    after = _float_values(model)
    changed = {path for path in before if not np.array_equal(before[path], after[path])}
    adapters = {
        v.path
        for layer in lora.lora_layers(model.backbone)
        for v in lora.adapters(layer)
    }
    assert changed and changed <= adapters, changed
    assert all("lora_" in path for path in adapters)


@pytest.mark.parametrize("family", sorted(CASES))
def test_a_preset_holds_the_adapters_merged(family, tmp_path):
    model, batch = _tiny_task(family)
    plain = _outputs(model, batch)
    _with_random_adapters(model)
    expected = _outputs(model, batch)
    assert not np.allclose(expected, plain, atol=1e-4)  # the adapters act
    model.save_to_preset(tmp_path)
    loaded = Task.from_preset(tmp_path)
    assert not lora.lora_layers(loaded.backbone)
    np.testing.assert_allclose(_outputs(loaded, batch), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("family", sorted(CASES))
def test_merge_lora_keeps_the_outputs_and_removes_the_adapters(family):
    model, batch = _tiny_task(family)
    count = len(model.weights)
    expected = _outputs(_with_random_adapters(model), batch)
    adapted = len(lora.lora_layers(model.backbone))
    assert model.merge_lora() == adapted > 0
    assert len(model.weights) == count and not lora.lora_layers(model.backbone)
    assert all("lora" not in v.path for v in model.weights)
    assert len(model.trainable_weights) > 0
    np.testing.assert_allclose(_outputs(model, batch), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("family", sorted(CASES))
def test_adapters_save_and_load_alone(family, tmp_path):
    model, batch = _tiny_task(family)
    _with_random_adapters(model)
    path = str(tmp_path / "adapters.lora.h5")
    model.backbone.save_lora_weights(path)
    fresh, _ = _tiny_task(family)  # the same base weights, no adapters
    fresh.backbone.load_lora_weights(path)
    np.testing.assert_allclose(
        _outputs(fresh, batch), _outputs(model, batch), rtol=1e-6, atol=1e-6
    )
    other, _ = _tiny_task(family)
    other.enable_lora(3)
    with pytest.raises(ValueError, match="rank 2"):
        other.backbone.load_lora_weights(path)
    with pytest.raises(ValueError, match=r"\.lora\.h5"):
        model.backbone.save_lora_weights(str(tmp_path / "adapters.h5"))


@pytest.mark.parametrize("family", sorted(CASES))
def test_qlora_saves_and_reloads_as_the_merged_model(family, tmp_path):
    model, batch = _tiny_task(family)
    float_outputs = _outputs(model, batch)
    model.quantize("int8")
    _with_random_adapters(model)
    adapted = _outputs(model, batch)
    model.save_to_preset(tmp_path)
    loaded = Task.from_preset(tmp_path)
    assert {layer.quantization_mode for layer in loaded._flatten_layers()} >= {"int8"}
    # Saving re-quantizes kernel + adapter (Keras's `save_own_variables`):
    # the preset equals the model merged in memory, and stays near the
    # adapted one.
    model.merge_lora()
    np.testing.assert_allclose(
        _outputs(loaded, batch), _outputs(model, batch), rtol=1e-5, atol=1e-5
    )
    tolerance = (
        0.03 * np.abs(adapted - float_outputs).max() + 0.03 * np.abs(adapted).max()
    )
    np.testing.assert_allclose(_outputs(loaded, batch), adapted, atol=tolerance)


def test_targets_keras_lora_does_not_reach_are_refused_by_name():
    model, _ = _tiny_task("seq2seq")
    with pytest.raises(ValueError, match="does not reach.*lstm_cell"):
        model.enable_lora(2, ["lstm_cell"])  # inside Keras's LSTM layer
    with pytest.raises(ValueError, match="no_such_layer"):
        model.enable_lora(2, ["no_such_layer"])
    with pytest.raises(ValueError, match="rank"):
        model.enable_lora(0)


@pytest.mark.tensorflow_only
def test_a_merged_translator_exports_its_adapted_translations(tmp_path):
    import tensorflow as tf

    from zoo.serving import export

    texts = ["In the beginning God created the heavens.", "And the earth was void."]
    translator = tiny_models.randomized(tiny_models.transformer(0), 0.3)
    plain = translator.translate(texts, beam_width=1)
    _with_random_adapters(translator, seed=3)
    adapted = translator.translate(texts, beam_width=1)
    assert adapted != plain  # the compiled search sees the adapters
    translator.merge_lora()
    assert translator.translate(texts, beam_width=1) == adapted
    translator.export(tmp_path / "translator", beam_width=1)
    answer = export.load(str(tmp_path / "translator"))(text=tf.constant(texts))
    assert [t.decode("utf-8") for t in np.asarray(answer["translation"])] == adapted
