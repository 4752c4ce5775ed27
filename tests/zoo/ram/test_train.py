"""The table script on the shipped sample: results, preset and figure."""

import json

import numpy as np
import pytest

from zoo.ram import RecurrentAttentionModel, evaluation, train

pytestmark = pytest.mark.tensorflow_only


def test_table_rows_preset_and_plot(tmp_path):
    out, results, plot = tmp_path / "preset", tmp_path / "t.json", tmp_path / "g.png"
    rows = train.main(
        [
            "--data", "sample",
            "--epochs", "1",
            "--rows", "ram_translated_6", "fc_translated",
            "--units", "32",
            "--batch-size", "64",
            "--max-steps", "3",
            "--out", str(out),
            "--results", str(results),
            "--plot", str(plot),
            "--random-first-glimpse",
            "--verbose", "0",
        ]
    )  # fmt: skip
    assert set(rows) == {"ram_translated_6", "fc_translated"}
    for row in rows.values():
        assert 0.0 <= row["test_error_percent"] <= 100.0
        assert row["test_images"] == 1000
    saved = json.loads(results.read_text())
    assert saved["rows"]["fc_translated"]["model"] == "fc"
    assert saved["command"].startswith("python -m zoo.ram.train --data sample")
    model = RecurrentAttentionModel.from_preset(str(out))
    meta = model.preset_metadata
    assert meta["command"] == saved["command"]
    assert set(meta["table"]) == set(rows)
    assert (
        meta["metrics"]["test_error_percent"]
        == rows["ram_translated_6"]["test_error_percent"]
    )
    assert meta["metrics"]["steps"] == 3  # --max-steps: per row
    # The per-epoch history is beside the preset, not in its metadata.
    assert "history" not in meta["metrics"]
    with open(meta["metrics"]["history_file"]) as f:
        history = json.load(f)["history"]
    assert history == rows["ram_translated_6"]["history"]
    assert len(history["loss"]) == meta["metrics"]["epochs"] == 1
    assert all(row["steps"] == 3 for row in rows.values())
    # The data as data: `zoo evaluate` reads the variant and seeds back.
    assert meta["data"]["variant"] == "translated"
    assert meta["data"]["seeds"] == {"train": 0, "test": 1}
    assert meta["hardware"]["cores"] >= 1 and meta["hardware"]["devices"]
    assert model.class_names[0] == "T-shirt/top"
    assert model.num_glimpses == 6 and model.num_scales == 3
    assert model.random_first_glimpse is True
    assert model.predict(np.zeros((1, 60, 60), "uint8"), verbose=0).shape == (1, 10)
    assert plot.read_bytes()[:4] == b"\x89PNG"


def test_baselines_take_any_size():
    convnet = train.small_convnet()
    for size in (28, 61):
        assert convnet(np.zeros((2, size, size, 1), "float32")).shape == (2, 10)
    assert train.fully_connected((60, 60, 1)).output_shape == (None, 10)


def test_fresh_canvases_train_on_items_and_test_on_fixed_canvases(tmp_path):
    results = tmp_path / "t.json"
    rows = train.main(
        [
            "--data", "sample",
            "--epochs", "1",
            "--rows", "ram_translated_6", "fc_translated", "fc_centered",
            "--units", "16",
            "--batch-size", "64",
            "--max-steps", "2",
            "--fresh-canvases",
            "--results", str(results),
            "--verbose", "0",
        ]
    )  # fmt: skip
    assert rows["fc_translated"]["parameters"] == (60 * 60 * 256 + 256) + (
        256 * 256 + 256
    ) + (256 * 10 + 10)
    assert rows["fc_centered"]["parameters"] == (28 * 28 * 256 + 256) + (
        256 * 256 + 256
    ) + (256 * 10 + 10)
    assert all(row["test_images"] == 1000 for row in rows.values())
    assert "--fresh-canvases" in json.loads(results.read_text())["command"]


def test_canvas_size_and_retina_options_reach_every_ram_row(tmp_path):
    results = tmp_path / "t.json"
    rows = train.main(
        [
            "--data", "sample",
            "--epochs", "1",
            "--rows", "ram_cluttered_6", "fc_cluttered", "ram_centered_2",
            "--canvas-size", "100",
            "--num-glimpses", "3",
            "--patch-size", "8",
            "--num-scales", "2",
            "--units", "16",
            "--batch-size", "64",
            "--max-steps", "2",
            "--results", str(results),
            "--verbose", "0",
        ]
    )  # fmt: skip
    retina = {"num_glimpses": 3, "patch_size": 8, "num_scales": 2}
    assert rows["ram_cluttered_6"]["options"] == {**retina, "scale_factor": 2}
    assert rows["ram_centered_2"]["options"] == retina  # centred rows keep 28x28
    assert rows["fc_cluttered"]["options"] == {}
    assert rows["ram_cluttered_6"]["task"] == "cluttered 100x100 (8 pieces 8x8)"
    assert rows["ram_centered_2"]["task"] == "centred 28x28"
    assert rows["fc_cluttered"]["parameters"] == (100 * 100 * 256 + 256) + (
        256 * 256 + 256
    ) + (256 * 10 + 10)
    table = train.format_table(rows)
    assert (
        "| cluttered 100x100 (8 pieces 8x8) | RAM, 3 glimpses, 8x8, 2 scale(s) |"
        in table
    )


def test_glimpse_filters_give_ram_rows_a_convolutional_glimpse_network():
    rows = train.main(
        ["--data", "sample", "--units", "16", "--num-glimpses", "2",
         "--num-scales", "2", "--patch-size", "6", "--batch-size", "64",
         "--epochs", "1", "--max-steps", "2", "--verbose", "0",
         "--rows", "ram_centered_6", "fc_centered", "--glimpse-filters", "4", "8"]
    )  # fmt: skip
    ram, fc = rows["ram_centered_6"], rows["fc_centered"]
    assert ram["glimpse_filters"] == [4, 8] and "glimpse_filters" not in fc
    plain = train.build_model(
        "ram", ram["options"], 28, train.parse_args(["--units", "16"])
    )
    # Two 3x3 convolutions (1 -> 4 -> 8 channels); the 6x6 patch pools to
    # 2x2, so theta_g^0 reads 2 scales x 2 x 2 x 8 features, not 2 x 6 x 6.
    convs = (9 * 1 * 4 + 4) + (9 * 4 * 8 + 8)
    dense_change = (2 * 2 * 2 * 8 - 2 * 6 * 6) * 128
    assert ram["parameters"] == plain.count_params() + convs + dense_change
    assert "conv glimpse network (4-8 filters)" in train.format_table(rows)
    assert "conv glimpse" not in train.format_table({"fc_centered": fc})


def test_out_without_the_preset_row_is_refused(capsys):
    with pytest.raises(SystemExit) as exit_info:
        train.parse_args(["--out", "p", "--rows", "ram_cluttered_6"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--out" in err and "ram_translated_6" in err and "ram_cluttered_6" in err
    args = train.parse_args(["--out", "p", "--rows", "ram_translated_6", "fc_centered"])
    assert args.out == "p" and args.preset_row == "ram_translated_6"
    with pytest.raises(SystemExit) as exit_info:
        train.parse_args(["--out", "p", "--preset-row", "ram_cluttered_6",
                          "--rows", "ram_translated_6"])  # fmt: skip
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--preset-row ram_cluttered_6" in err and "ram_translated_6" in err
    with pytest.raises(SystemExit) as exit_info:  # Only RAM rows are presets.
        train.parse_args(["--out", "p", "--preset-row", "conv_cluttered"])
    assert exit_info.value.code == 2
    assert "--preset-row" in capsys.readouterr().err


def test_preset_row_writes_a_cluttered_row_that_evaluation_reads_as_cluttered(
    tmp_path,
):
    out = tmp_path / "cluttered"
    rows = train.main(
        ["--data", "sample", "--rows", "ram_cluttered_6", "--units", "16",
         "--num-glimpses", "2", "--num-scales", "1", "--patch-size", "4",
         "--batch-size", "64", "--epochs", "1", "--max-steps", "1",
         "--verbose", "0", "--preset-row", "ram_cluttered_6", "--out", str(out)]
    )  # fmt: skip
    meta = RecurrentAttentionModel.from_preset(str(out)).preset_metadata
    assert meta["data"]["variant"] == "cluttered"
    assert meta["data"]["canvas_size"] == 60
    assert "cluttered 60x60" in meta["task"]
    assert meta["metrics"]["test_error_percent"] == pytest.approx(
        rows["ram_cluttered_6"]["test_error_percent"]
    )
    assert evaluation.preset_data(meta) == ("cluttered", {"train": 0, "test": 1}, 60)


@pytest.mark.parametrize(
    "argv",
    [
        ["--canvas-size", "0"],
        ["--num-glimpses", "-1"],
        ["--patch-size", "x"],
        ["--glimpse-filters", "16", "0"],
    ],
)
def test_retina_options_refuse_non_positive_values(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        train.parse_args(argv)
    assert exit_info.value.code == 2
    assert argv[0] in capsys.readouterr().err


def test_initial_weights_start_the_ram_rows_from_a_preset(tmp_path):
    tiny = ["--data", "sample", "--rows", "ram_translated_6", "--units", "16",
            "--num-glimpses", "2", "--num-scales", "1", "--patch-size", "4",
            "--batch-size", "64", "--verbose", "0"]  # fmt: skip
    first = tmp_path / "first"
    train.main([*tiny, "--epochs", "1", "--max-steps", "2", "--out", str(first)])
    args = train.parse_args([*tiny, "--initial-weights", str(first)])
    model = train.build_model(
        "ram", train.row_options("ram_translated_6", args), 60, args
    )
    saved = RecurrentAttentionModel.from_preset(str(first))
    for got, want in zip(model.get_weights(), saved.get_weights(), strict=True):
        np.testing.assert_array_equal(got, want)
    # The whole command runs from them and records the option.
    second = tmp_path / "second"
    train.main([*tiny, "--initial-weights", str(first), "--epochs", "1",
                "--max-steps", "1", "--out", str(second)])  # fmt: skip
    assert (
        "--initial-weights"
        in RecurrentAttentionModel.from_preset(str(second)).preset_metadata["command"]
    )
    other = train.parse_args(
        [*tiny, "--num-scales", "2", "--initial-weights", str(first)]
    )
    with pytest.raises(
        ValueError, match=r"--initial-weights.*different network.*first"
    ):
        train.build_model(
            "ram", train.row_options("ram_translated_6", other), 60, other
        )


def test_anneal_fraction_lowers_every_rows_rate_for_the_end_of_its_budget(tmp_path):
    tiny = ["--data", "sample", "--units", "16", "--num-glimpses", "2",
            "--num-scales", "1", "--patch-size", "4", "--batch-size", "64",
            "--epochs", "1", "--max-steps", "4", "--learning-rate", "0.01",
            "--verbose", "0"]  # fmt: skip
    out = tmp_path / "preset"
    rows = train.main(
        [*tiny, "--rows", "ram_translated_6", "fc_translated",
         "--anneal-fraction", "0.25", "--anneal-factor", "0.5",
         "--out", str(out)]
    )  # fmt: skip
    for row in rows.values():  # The last of 4 steps at half the rate.
        assert row["anneal"] == {"fraction": 0.25, "factor": 0.5, "from_step": 3}
        assert row["learning_rate"] == 0.01
    meta = RecurrentAttentionModel.from_preset(str(out)).preset_metadata
    assert meta["metrics"]["anneal"]["from_step"] == 3
    assert "--anneal-fraction 0.25" in meta["command"]
    plain = train.main([*tiny, "--rows", "fc_translated"])
    assert "anneal" not in plain["fc_translated"]


@pytest.mark.parametrize(
    "argv, named",
    [
        (["--anneal-fraction", "1"], "--anneal-fraction"),
        (["--anneal-fraction", "0"], "--anneal-fraction"),
        (["--anneal-fraction", "0.2", "--anneal-factor", "0"], "--anneal-factor"),
        (["--anneal-factor", "0.5"], "--anneal-factor needs --anneal-fraction"),
    ],
)
def test_anneal_options_refuse_bad_values(argv, named, capsys):
    with pytest.raises(SystemExit) as exit_info:
        train.parse_args(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "error:" in err.strip().splitlines()[-1] and named in err


def test_test_samples_scores_ram_rows_both_ways(tmp_path):
    rows = train.main(
        ["--data", "sample", "--units", "16", "--num-glimpses", "2",
         "--num-scales", "1", "--patch-size", "4", "--batch-size", "64",
         "--epochs", "1", "--max-steps", "2", "--verbose", "0",
         "--rows", "ram_centered_6", "fc_centered", "--test-samples", "3"]
    )  # fmt: skip
    ram, fc = rows["ram_centered_6"], rows["fc_centered"]
    assert 0.0 <= ram["test_error_one_path_percent"] <= 100.0
    assert "test_error_one_path_percent" not in fc
    table = train.format_table(rows)
    assert f"(one path {ram['test_error_one_path_percent']:.2f})" in table


def test_one_path_model_keeps_the_weights_and_follows_the_mean_path():
    args = train.parse_args(
        ["--units", "16", "--test-samples", "4", "--patch-size", "4",
         "--num-scales", "1", "--num-glimpses", "2"]
    )  # fmt: skip
    options = train.row_options("ram_centered_6", args)
    sampled = train.build_model("ram", options, 28, args)
    assert sampled.test_samples == 4
    copy = train.one_path_model(sampled, options, args)
    assert copy.test_samples == 1 and copy.num_glimpses == 2
    for a, b in zip(sampled.get_weights(), copy.get_weights()):
        np.testing.assert_array_equal(a, b)
    images = np.random.default_rng(0).integers(0, 255, (3, 28, 28), "uint8")
    np.testing.assert_array_equal(  # one path: the same logits every call
        copy.predict_on_batch(images), copy.predict_on_batch(images)
    )
    with pytest.raises(SystemExit):  # a positive count, checked by the parser
        train.parse_args(["--test-samples", "0"])


def test_fresh_canvases_draw_new_clutter_for_cluttered_rows(monkeypatch):
    from zoo.data import fashion_mnist

    calls = []
    compose = fashion_mnist.cluttered_dataset

    def recorded(items, labels, batch_size, canvas_size, **kwargs):
        calls.append((items.shape, canvas_size))
        return compose(items, labels, batch_size, canvas_size, **kwargs)

    monkeypatch.setattr(fashion_mnist, "cluttered_dataset", recorded)
    argv = ["--data", "sample", "--epochs", "1", "--rows", "fc_cluttered",
            "--batch-size", "64", "--max-steps", "2", "--verbose", "0"]  # fmt: skip
    rows = train.main(argv + ["--fresh-canvases", "--canvas-size", "64"])
    assert calls == [((2000, 28, 28), 64)]  # the sample's items, every epoch
    assert rows["fc_cluttered"]["parameters"] == (64 * 64 * 256 + 256) + (
        256 * 256 + 256
    ) + (256 * 10 + 10)
    train.main(argv)  # fixed canvases: composed once by fashion_mnist.load
    assert len(calls) == 1
