"""The presets shipped with the Transformer family.

Each name is a folder of `zoo/transformer/presets/`, loaded with
`Transformer.from_preset(name)` or `zoo.from_preset(name)`; its model card
is `zoo/transformer/README.md`.

Example:
>>> sorted(PRESETS)
['transformer_bible_en_es']
"""

PRESETS = {
    "transformer_bible_en_es": (
        "Bible domain only: English -> Spanish Bible verses (WEB -> RV1909); "
        "everyday sentences come out as nonsense. Transformer 'small' (3+3 "
        "pre-norm layers, d_model 256, 8.3 M parameters): 21.73 BLEU greedy, "
        "23.17 beam 4 on the test books."
    ),
}
