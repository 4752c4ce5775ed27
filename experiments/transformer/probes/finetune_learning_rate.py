"""Fine-tuning learning rate of the Transformer preset: held-out loss before/after.

For each learning rate: loads `transformer_bible_en_es`, evaluates the loss
on the first 128 verses of the shipped test sample, fits `STEPS` steps of
16 shipped training pairs with Adam (clipnorm 1.0), evaluates again. What
the demo's and `examples/finetune_from_preset.py`'s default came from.

Usage (session 27, 2-core AMD EPYC, load 3-5):
    python experiments/transformer/probes/finetune_learning_rate.py \
        transformer_bible_en_es 8 1e-3,5e-4,1e-4,3e-5
"""

import sys

import keras

import zoo
from zoo.data import bible, parallel_text

name = sys.argv[1]
steps = int(sys.argv[2])
pairs = parallel_text.read_tsv(bible.sample_path("train"))
held = parallel_text.read_tsv(bible.sample_path("test"))
print("sizes", len(pairs), len(held))
held = held[:128]
src, tgt = [p[0] for p in held], [p[1] for p in held]
for lr in [float(x) for x in sys.argv[3].split(",")]:
    keras.utils.set_random_seed(0)
    m = zoo.from_preset(name)
    m.compile(
        optimizer=keras.optimizers.Adam(lr, clipnorm=1.0),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        weighted_metrics=["accuracy"],
    )
    b = m.evaluate(src, tgt, batch_size=32, verbose=0, return_dict=True)
    m.fit(
        [p[0] for p in pairs],
        [p[1] for p in pairs],
        batch_size=16,
        epochs=1,
        steps_per_epoch=steps,
        verbose=0,
    )
    a = m.evaluate(src, tgt, batch_size=32, verbose=0, return_dict=True)
    print(
        name,
        "lr",
        lr,
        "steps",
        steps,
        "held-out loss",
        round(b["loss"], 4),
        "->",
        round(a["loss"], 4),
        flush=True,
    )
