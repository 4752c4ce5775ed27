"""`Task.quantize("int8")` on every family, through Keras's own API.

Every registered family's tiny task (`families.cases("TASK_CASES")`) is
quantized: its outputs stay near the float model's, its weights shrink,
and it saves to and loads from a preset quantized (the config records each
layer's policy; the loaded model gives the in-memory quantized model's
outputs) without `custom_objects`. A task with a preprocessor (the tiny
Transformer's tokenizers) keeps it float; the exports of a quantized
translator and RAM run (TensorFlow). The file runs under every backend
(the Makefile's `tests/zoo/backends/test_backends*.py`).
"""

import os
import sys

import keras
import numpy as np
import pytest

from zoo.base.task import Task

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import families  # noqa: E402
import tiny_models  # noqa: E402

CASES = families.cases("TASK_CASES")
TEXTS = ["In the beginning God created the heavens.", "And the earth was void."]


def _outputs(model, batch):
    outputs = model(batch, training=False)
    if isinstance(outputs, dict):
        outputs = outputs["logits"]
    return keras.ops.convert_to_numpy(outputs)


def _weight_bytes(model):
    return sum(
        int(np.prod(v.shape))
        * np.dtype(keras.backend.standardize_dtype(v.dtype)).itemsize
        for v in model.weights
    )


def _policies(model):
    return {
        layer.path: layer.dtype_policy.name
        for layer in model._flatten_layers()
        if layer.quantization_mode is not None
    }


def _tiny_task(family):
    task, arguments, _, _, batch, extra = CASES[family]
    keras.utils.set_random_seed(1)
    return task(**arguments, **extra), batch


@pytest.mark.parametrize("family", sorted(CASES))
def test_int8_keeps_outputs_near_the_float_model_and_shrinks_weights(family):
    model, batch = _tiny_task(family)
    expected = _outputs(model, batch)
    float_bytes = _weight_bytes(model)
    model.quantize("int8")
    outputs = _outputs(model, batch)
    assert _policies(model) and set(_policies(model).values()) == {"int8_from_float32"}
    # int8 weights and activations, scaled per channel: within 3% of the
    # largest output (a float model's own rounding is 1e-6).
    tolerance = 0.03 * np.abs(expected).max()
    np.testing.assert_allclose(outputs, expected, atol=tolerance)
    assert _weight_bytes(model) < float_bytes


@pytest.mark.parametrize("family", sorted(CASES))
def test_a_quantized_task_saves_and_loads_as_a_preset(family, tmp_path):
    model, batch = _tiny_task(family)
    model.quantize("int8")
    model.save_to_preset(tmp_path)
    loaded = Task.from_preset(tmp_path)
    assert type(loaded) is type(model)
    assert _policies(loaded) == _policies(model)
    np.testing.assert_allclose(
        _outputs(loaded, batch), _outputs(model, batch), rtol=1e-5, atol=1e-6
    )
    # Saved again, the config is the same (the policies round-trip).
    assert loaded.get_config()["dtype"] == model.get_config()["dtype"]


def test_filters_choose_the_layers_and_the_preprocessor_stays_float(tmp_path):
    model = tiny_models.transformer(0)
    tiny_models.randomized(model, 0.3)
    expected = model.translate(TEXTS, beam_width=1)
    model.quantize("int8", filters="feedforward")
    quantized = _policies(model)
    assert quantized and all("feedforward" in path for path in quantized)
    model.quantize(
        "int8",
        filters=lambda layer: (
            layer.quantization_mode is None and layer.name != "token_embedding"
        ),
    )
    pre_layers = list(model.preprocessor._flatten_layers())
    assert all(layer.quantization_mode is None for layer in pre_layers)
    outputs = model.translate(TEXTS, beam_width=1)
    assert len(outputs) == len(expected) and all(isinstance(t, str) for t in outputs)
    model.save_to_preset(tmp_path)
    loaded = Task.from_preset(tmp_path)
    assert loaded.translate(TEXTS, beam_width=1) == outputs


@pytest.mark.tensorflow_only
def test_the_exports_of_a_quantized_translator_and_ram_run(tmp_path):
    from zoo.serving import export

    translator = tiny_models.transformer(0)
    tiny_models.randomized(translator, 0.3)
    translator.quantize("int8")
    translator.export(tmp_path / "translator", beam_width=1)
    import tensorflow as tf

    exported = export.load(str(tmp_path / "translator"))
    answer = exported(text=tf.constant(TEXTS))
    translations = [t.decode("utf-8") for t in np.asarray(answer["translation"])]
    assert translations == translator.translate(TEXTS, beam_width=1)

    ram = tiny_models.exportable_ram()
    ram.quantize("int8")
    images = np.random.default_rng(0).integers(0, 255, (2, 8, 8, 1), "uint8")
    ram.export(tmp_path / "ram")
    outputs = export.load(str(tmp_path / "ram"))(image=images)
    names, probabilities = ram.classify(images)
    assert [n.decode("utf-8") for n in np.asarray(outputs["class_name"])] == list(
        names[:, 0]
    )
    np.testing.assert_allclose(
        np.asarray(outputs["probabilities"]).max(axis=1), probabilities[:, 0], atol=1e-5
    )


@pytest.mark.tensorflow_only  # the shipped presets' searches: slow to compile on JAX
def test_the_cli_quantizes_a_preset_with_quantize_int8(tmp_path, capsys):
    from zoo import cli
    from zoo.data import fashion_mnist

    images, _ = fashion_mnist.load_arrays("test", fashion_mnist.sample_path())
    path = str(tmp_path / "item.png")
    keras.utils.save_img(path, images[0][..., None], scale=False)
    ram = "ram_fashion_mnist_translated_seeking_annealed"
    assert cli.main(["classify", ram, path, "--quantize", "int8"]) == 0
    name = capsys.readouterr().out.splitlines()[0].split(": ", 1)[1].rsplit(" (", 1)[0]
    assert name in fashion_mnist.CLASS_NAMES
    argv = ["translate", "seq2seq_bahdanau_bible_en_es", "Jesus wept.", "--beam", "1"]
    assert cli.main([*argv, "--quantize", "int8"]) == 0
    assert capsys.readouterr().out.strip()
    with pytest.raises(SystemExit):
        cli.main(["classify", ram, path, "--quantize", "int4"])
