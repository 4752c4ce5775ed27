"""The presets shipped with the Recurrent Attention Model family.

Each name is a folder of `zoo/ram/presets/`, loaded with
`RecurrentAttentionModel.from_preset(name)` or `zoo.from_preset(name)`; its
model card is `zoo/ram/README.md`. The first is the default. Five more
presets were trained; they are not shipped, and their commands are in
`experiments/ram/README.md`.

Example:
>>> list(PRESETS)
['ram_fashion_mnist_translated_seeking_annealed', 'ram_fashion_mnist_cluttered_100_long']
"""

PRESETS = {
    "ram_fashion_mnist_translated_seeking_annealed": (
        "The default. 6 glimpses of 2 scales (12x12, 24x24), LSTM core: a "
        "Fashion-MNIST item at a random place of a 60x60 canvas; its glimpses "
        "go to the item (slope 0.76-0.91 after the first). 14.98% test error "
        "on 60x60 canvases; not for much larger canvases (81.20% on 200x200)."
    ),
    "ram_fashion_mnist_cluttered_100_long": (
        "6 glimpses of 4 scales (12x12 to 96x96), a convolutional glimpse "
        "network: the item among 8 pieces of clutter on a 100x100 canvas; its "
        "glimpses find the item (slope 0.78-0.82 after the second). 12.28% "
        "test error on cluttered 100x100 canvases."
    ),
}
