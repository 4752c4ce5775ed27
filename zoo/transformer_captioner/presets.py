"""The shipped Transformer-captioner presets: name -> one-line description.

Load one with `TransformerCaptioner.from_preset(name)`; its folder is
`zoo/transformer_captioner/presets/<name>/` and its model card is
`zoo/transformer_captioner/README.md`.

Example:
>>> sorted(PRESETS)
['transformer_captioner_fashion_scenes']
"""

PRESETS = {
    "transformer_captioner_fashion_scenes": (
        "Self-attention over a 7x7 CNN grid and a 2-block Transformer decoder "
        "captioning 84x84 Fashion-MNIST scenes (see the model card for its "
        "held-out numbers)."
    ),
}
