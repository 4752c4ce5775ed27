"""The captioning export and the CLI serve a `TransformerCaptioner` as they
serve `ShowAttendTell`: the SavedModel's captions and attention equal
`caption(..., return_attention=True)`'s."""

import numpy as np
import pytest
import tensorflow as tf

from zoo import cli
from zoo.captioning.export import export_captioner
from zoo.transformer_captioner import TransformerCaptioner

pytestmark = pytest.mark.tensorflow_only

PRESET = "transformer_captioner_fashion_scenes"


def test_export_of_the_preset_gives_caption_s_captions_and_maps(tmp_path):
    model = TransformerCaptioner.from_preset(PRESET)
    assert model.kind == "captioning"
    path = export_captioner(model, tmp_path / "export", beam_width=2, max_length=12)
    serve = tf.saved_model.load(path).signatures["serving_default"]
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (2, 84, 84, 1), dtype="uint8")
    answer = {k: v.numpy() for k, v in serve(image=tf.constant(images)).items()}
    captions, maps = model.caption(
        images, beam_width=2, max_length=12, return_attention=True
    )
    assert [c.decode() for c in answer["caption"]] == captions
    for i, wanted in enumerate(maps):
        length = int(answer["length"][i])
        assert length == len(wanted["tokens"])
        assert answer["output_truncated"][i] == ("[END]" not in wanted["tokens"])
        np.testing.assert_allclose(
            answer["attention"][i, :length], wanted["weights"], rtol=1e-4, atol=1e-5
        )


def test_cli_captions_with_a_plot(tmp_path, capsys):
    image = np.zeros((84, 84, 1), "uint8")
    image[20:48, 10:38] = 200
    path = tmp_path / "scene.png"
    tf.io.write_file(str(path), tf.io.encode_png(image))
    plot = tmp_path / "words.png"
    argv = ["caption", PRESET, str(path), "--beam", "2", "--plot", str(plot)]
    assert cli.main(argv) == 0
    assert f"{path}: a " in capsys.readouterr().out
    assert plot.stat().st_size > 1000
