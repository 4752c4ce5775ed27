"""The zoo on JAX and PyTorch: the user verbs give TensorFlow's results (#43).

Run by `make test` under `KERAS_BACKEND=jax` and `KERAS_BACKEND=torch`
(skipped under TensorFlow, the reference): the shipped presets translate,
classify, caption, generate, predict, evaluate and give attention maps on
the shipped samples (`backends_worker.py`), compared with the same worker
run under TensorFlow in a subprocess (once for both backends' passes:
`tensorflow_reference.py`): token outputs (translations, captions,
classes, greedy ids) equal, floats within 1e-4. Each family's tiny model
(`tiny_models.py`) trains two steps on raw samples and evaluates; and what
stays TensorFlow-only (the SavedModel export, by `export`, each kind's
`export_serving` or the CLI, and `tf.distribute` strategies) refuses with a
`BackendError` (the CLI: one line) naming the backend. The CLI verbs,
`save_to_preset` and the plots: the other `test_backends_*.py`.
"""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from zoo import cli, registry
from zoo.base import backends

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path[:0] = [HERE, os.path.dirname(HERE)]  # this folder's helpers, tests/zoo's

import backends_worker  # noqa: E402
import tensorflow_reference  # noqa: E402
import tiny_models  # noqa: E402

BACKEND = keras.backend.backend()

pytestmark = pytest.mark.skipif(
    BACKEND == "tensorflow", reason="compares another backend with TensorFlow"
)

FLOAT_TOLERANCE = 1e-4
#: The translation families (the registry's), each with a tiny model here.
TRANSLATORS = [family.name for family in registry.families("translation")]


@pytest.fixture(scope="module")
def results(request):
    """`(here, tensorflow)`: the worker's outputs on this backend and on TF.

    TensorFlow's come from the cache when the other backend's pass computed
    them for this code (`tensorflow_reference.py`); if not, the TensorFlow
    run starts first and runs while this process computes.
    """
    worker = os.path.join(HERE, "backends_worker.py")
    reference = tensorflow_reference.Reference(request.config, "backends", worker)
    process = None
    if reference.answer is None:
        process = subprocess.Popen(
            [sys.executable, worker],
            env=dict(os.environ, KERAS_BACKEND="tensorflow", PYTHONPATH=ROOT),
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    try:
        here = backends_worker.outputs()
    finally:
        if process is not None:
            out, err = process.communicate(timeout=600)
    if process is not None:
        assert process.returncode == 0, err[-3000:]
        reference.keep(json.loads(out.strip().splitlines()[-1]))
    return here, reference.answer


def _close(actual, expected):
    np.testing.assert_allclose(
        np.asarray(actual, "float64"),
        np.asarray(expected, "float64"),
        rtol=FLOAT_TOLERANCE,
        atol=FLOAT_TOLERANCE,
    )


@pytest.mark.parametrize("family", TRANSLATORS)
def test_translations_equal_tensorflows(results, family):
    here, tensorflow = (r[family] for r in results)
    assert len(here["translations"]) == backends_worker.VERSES
    assert all(here["translations"])
    assert here["translations"] == tensorflow["translations"]
    assert here["greedy"] == tensorflow["greedy"]
    _close(here["logits"], tensorflow["logits"])
    assert here["evaluate"].keys() == tensorflow["evaluate"].keys()
    # Every metric, the Transformer's weighted `accuracy` and `tokens` (real
    # target tokens) included: Keras's loss multiplies the sample weights by
    # the mask in place, and `Task.compute_loss` hands it a copy.
    names = sorted(tensorflow["evaluate"])
    _close(
        [here["evaluate"][k] for k in names], [tensorflow["evaluate"][k] for k in names]
    )


def test_ram_classifies_as_on_tensorflow(results):
    here, tensorflow = (r["ram"] for r in results)
    assert here["classes"] == tensorflow["classes"]
    _close(here["scores"], tensorflow["scores"])
    _close(here["probabilities"], tensorflow["probabilities"])
    assert here["evaluate"].keys() == tensorflow["evaluate"].keys()
    _close(list(here["evaluate"].values()), list(tensorflow["evaluate"].values()))


@pytest.mark.parametrize("family", ["show_attend_tell", "transformer_captioner"])
def test_captions_and_attention_equal_tensorflows(results, family):
    here, tensorflow = (r[family] for r in results)
    assert len(here["captions"]) == backends_worker.IMAGES
    assert here["captions"] == tensorflow["captions"]
    assert here["tokens"] == tensorflow["tokens"]
    for mine, theirs in zip(here["attention"], tensorflow["attention"]):
        _close(mine, theirs)
    _close(list(here["evaluate"].values()), list(tensorflow["evaluate"].values()))


# PyTorch runs the smallest smoke test of each family (its GRU Seq2Seq is
# the slowest there); JAX all of them.
FIT_CASES = ["transformer", "ram", "show_attend_tell", "transformer_captioner"]
if BACKEND != "torch":
    FIT_CASES.insert(0, "seq2seq")


@pytest.mark.parametrize("name", FIT_CASES)
def test_fit_and_evaluate_on_raw_samples(name):
    model, x, y = tiny_models.case_with_samples(name)
    model.compile(
        optimizer=keras.optimizers.SGD(0.01), loss=tiny_models.CASES[name][2]()
    )
    before = [np.array(w) for w in model.get_weights()]
    start = model.evaluate(x, y, batch_size=4, verbose=0, return_dict=True)
    history = model.fit(x, y, batch_size=4, epochs=1, verbose=0)
    end = model.evaluate(x, y, batch_size=4, verbose=0, return_dict=True)
    assert len(history.history["loss"]) == 1
    assert all(np.isfinite(v) for v in [*start.values(), *end.values()])
    changed = [not np.array_equal(a, b) for a, b in zip(before, model.get_weights())]
    assert any(changed)
    # REINFORCE's loss need not fall in two steps, and the captioner's
    # batch normalization evaluates with moving statistics fit has moved.
    if name in TRANSLATORS:
        assert end["loss"] < start["loss"]


def test_export_names_the_backend(tmp_path):
    model = tiny_models.exportable_ram()
    with pytest.raises(backends.BackendError, match=f"this process runs '{BACKEND}'"):
        model.export(str(tmp_path / "export"))
    assert not (tmp_path / "export").exists()


@pytest.mark.parametrize("name", list(tiny_models.CASES))
def test_each_kinds_exporter_names_the_backend(name, tmp_path):
    """`export_serving` (the kind's exporter, under `export`) refuses too."""
    model = tiny_models.CASES[name][0](0)
    with pytest.raises(backends.BackendError, match=f"this process runs '{BACKEND}'"):
        model.export_serving(str(tmp_path / "export"))
    assert not (tmp_path / "export").exists()


def test_cli_export_refuses_in_one_line(tmp_path, capsys):
    argv = ["export", "ram_fashion_mnist_cluttered_100_long", str(tmp_path / "e")]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "needs the TensorFlow backend (KERAS_BACKEND=tensorflow)" in err
    assert repr(BACKEND) in err


def test_a_tf_distribute_strategy_is_refused_in_one_line(capsys):
    from zoo.training.harness import strategy_for

    assert strategy_for("auto").num_replicas_in_sync == 1
    with pytest.raises(SystemExit) as stopped:
        strategy_for("mirrored")
    assert stopped.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "error: --strategy mirrored needs the TensorFlow backend "
        f"(KERAS_BACKEND=tensorflow); this process runs {BACKEND!r}."
    )
