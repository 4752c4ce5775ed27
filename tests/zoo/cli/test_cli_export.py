"""`python -m zoo export` / `serve`: bad arguments end in one line and exit 2.

The exports are tested family by family (`tests/zoo/*/test_export.py`; the RAM
one exports the shipped preset through `python -m zoo export` and tests
`Task.export`), the server in `test_serve.py`.
"""

import os

import pytest

from zoo import cli

pytestmark = pytest.mark.tensorflow_only

RAM = "ram_fashion_mnist_translated_seeking_annealed"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["export", RAM, "{tmp}/x", "--beam", "3"], "beam"),
        (["export", "no_such_preset", "{tmp}/x"], "no_such_preset"),
        (["serve", "{tmp}/missing"], "missing"),
    ],
)
def test_bad_export_and_serve_arguments_end_in_one_line(
    argv, message, tmp_path, capsys
):
    argv = [a.format(tmp=tmp_path) for a in argv]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err
    assert not os.path.exists(tmp_path / "x" / "saved_model.pb")


@pytest.mark.parametrize(
    "argv",
    [["serve", "d", "--batch-delay-ms", "-1"], ["serve", "d", "--port", "0"]],
)
def test_bad_serve_options_are_refused_by_the_parser(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    assert exit_info.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_export_under_a_dtype_policy_keeps_the_signature_dtypes(tmp_path, capsys):
    import numpy as np
    import tensorflow as tf

    out = tmp_path / "bf16"
    assert cli.main(["export", RAM, str(out), "--dtype", "mixed_bfloat16"]) == 0
    assert "Exported" in capsys.readouterr().out
    serve = tf.saved_model.load(str(out)).signatures["serving_default"]
    rng = np.random.default_rng(0)
    images = rng.integers(0, 255, (3, 60, 60, 1), dtype=np.uint8)
    outputs = serve(image=tf.constant(images))
    assert outputs["probabilities"].dtype == tf.float32
    assert outputs["glimpse_path"].dtype == tf.float32
    np.testing.assert_allclose(outputs["probabilities"].numpy().sum(-1), 1.0, atol=1e-5)


def test_an_unknown_dtype_is_refused_by_the_parser(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["export", RAM, str(tmp_path / "x"), "--dtype", "float8"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'float8'" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "x")


def test_a_task_of_no_kind_is_refused_alike_by_export_and_the_cli(tmp_path, capsys):
    import keras

    from zoo import Task

    features = keras.Input((2,), name="features")
    model = Task(features, keras.layers.Dense(1)(features))
    preset = tmp_path / "plain"
    model.save_to_preset(str(preset))
    with pytest.raises(ValueError, match="has no kind") as refused:
        model.export(str(tmp_path / "by_method"))
    assert cli.main(["export", str(preset), str(tmp_path / "by_cli")]) == 2
    assert capsys.readouterr().err.strip() == f"error: {refused.value}"
    assert not os.path.exists(tmp_path / "by_method" / "saved_model.pb")
    assert not os.path.exists(tmp_path / "by_cli" / "saved_model.pb")
