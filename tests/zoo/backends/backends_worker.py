"""The user verbs on the shipped presets and samples, on this process's backend.

`outputs()` returns what `translate` (both translation presets), `generate`,
`predict` on raw sentences, `classify` (RAM), `caption` and
`attention_maps` give on a few samples, as plain Python values.
`tests/zoo/backends/test_backends.py` calls it in-process on JAX or PyTorch and runs
this file as a script under TensorFlow for the reference (it prints the
outputs as JSON on its last line).
"""

import json
import os
import sys

VERSES = 4
IMAGES = 4


def _translation(name, cls, pairs):
    import keras

    model = cls.from_preset(name)
    sources = [source for source, _ in pairs]
    translations = model.translate(sources, beam_width=2)
    ids = model.preprocessor(sources)["encoder_token_ids"]
    greedy = model.generate(ids[:2], max_length=8)
    prepared, _, _ = model.preprocessor(
        sources[:2], [target for _, target in pairs[:2]]
    )
    logits = model.predict(prepared, verbose=0)
    model.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return {
        "evaluate": model.evaluate(pairs, batch_size=2, verbose=0, return_dict=True),
        "translations": translations,
        "greedy": [[int(t) for t in row] for row in greedy],
        "logits": [[float(v) for v in row] for row in logits[:, 0, :8]],
    }


def _evaluate(model, x, y):
    import keras

    model.compile(
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return model.evaluate(x, y, batch_size=2, verbose=0, return_dict=True)


def outputs():
    import numpy as np

    from zoo import registry
    from zoo.data import bible, fashion_mnist, parallel_text, scenes
    from zoo.ram import RecurrentAttentionModel
    from zoo.seq2seq import Seq2Seq
    from zoo.transformer import Transformer

    pairs = parallel_text.read_tsv(bible.sample_path("test"))[:VERSES]
    result = {
        "seq2seq": _translation("seq2seq_bahdanau_bible_en_es", Seq2Seq, pairs),
        "transformer": _translation("transformer_bible_en_es", Transformer, pairs),
    }
    ram = RecurrentAttentionModel.from_preset("ram_fashion_mnist_cluttered_100_long")
    data = fashion_mnist.load("test", "cluttered", canvas_size=100, sample=True)
    images, labels = data[0][:IMAGES], data[1][:IMAGES]
    names, scores = ram.classify(images, top_k=2)
    probabilities = ram.predict(images, verbose=0)
    result["ram"] = {
        "classes": np.asarray(names).tolist(),
        "scores": np.asarray(scores).tolist(),
        "probabilities": np.asarray(probabilities).tolist(),
        "evaluate": _evaluate(ram, images, labels),
    }
    scene = scenes.load("test", num_scenes=IMAGES, sample=True)
    scene_images = scene["images"]
    for family, preset in (
        ("show_attend_tell", "show_attend_tell_fashion_scenes"),
        ("transformer_captioner", "transformer_captioner_fashion_scenes"),
    ):
        captioner = registry.get(family).task.from_preset(preset)
        captions = captioner.caption(scene_images, beam_width=2)
        prepared = captioner.preprocessor(scene_images[:2])
        tokens = captioner.generate(prepared["images"], max_length=6)
        maps = captioner.attention_maps(scene_images[:2], tokens)
        result[family] = {
            "captions": captions,
            "evaluate": _evaluate(captioner, scene_images, scene["captions"]),
            "tokens": [[int(t) for t in row] for row in tokens],
            "attention": [np.asarray(m["weights"]).tolist() for m in maps],
        }
    return result


if __name__ == "__main__":
    sys.path.insert(
        0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    )
    print(json.dumps(outputs()))
