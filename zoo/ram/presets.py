"""The presets shipped with the Recurrent Attention Model family.

Each name is a folder of `zoo/ram/presets/`, loaded with
`RecurrentAttentionModel.from_preset(name)` or `zoo.from_preset(name)`; its
model card is `zoo/ram/README.md`.

Example:
>>> sorted(PRESETS)
['ram_fashion_mnist_cluttered_100', 'ram_fashion_mnist_cluttered_100_long', 'ram_fashion_mnist_translated', 'ram_fashion_mnist_translated_200', 'ram_fashion_mnist_translated_long', 'ram_fashion_mnist_translated_seeking', 'ram_fashion_mnist_translated_seeking_annealed']
"""

PRESETS = {
    "ram_fashion_mnist_cluttered_100": (
        "6 glimpses of 4 scales (12x12 to 96x96), a convolutional glimpse "
        "network (16-32 filters), trained 100 minutes on cluttered 100x100 "
        "canvases (first glimpse at random in training, REINFORCE reaching the "
        "core, location std 0.25): its glimpses go to the item among the "
        "clutter (slope 0.76-0.82 after the second); 14.20% test error."
    ),
    "ram_fashion_mnist_cluttered_100_long": (
        "ram_fashion_mnist_cluttered_100 trained 100 minutes more with the "
        "same command (the step-size schedule again): 12.28% test error on "
        "cluttered 100x100 canvases, glimpses still on the item (slope "
        "0.78-0.82 after the second)."
    ),
    "ram_fashion_mnist_translated": (
        "RAM, 6 glimpses of 3 scales (12x12 to 48x48), LSTM core: Fashion-MNIST "
        "items at random positions of a 60x60 canvas, 27.43% test error."
    ),
    "ram_fashion_mnist_translated_long": (
        "The same network trained 150 epochs on canvases drawn afresh every "
        "epoch (policy step size 0.1): 14.60% test error on the same 60x60 "
        "test canvases."
    ),
    "ram_fashion_mnist_translated_seeking": (
        "6 glimpses of 2 scales (12x12, 24x24), first glimpse at random in "
        "training, REINFORCE reaching the core: its glimpses follow the item "
        "(slope 0.72-0.79 after the second); 21.18% test error."
    ),
    "ram_fashion_mnist_translated_200": (
        "6 glimpses of 4 scales (12x12 to 96x96), trained on items at random "
        "positions of a 200x200 canvas (first glimpse at random in training, "
        "REINFORCE reaching the core): it searches for the item, 31.10% test "
        "error on 200x200 canvases."
    ),
    "ram_fashion_mnist_translated_seeking_annealed": (
        "The seeking preset trained 100 more minutes at a tenth of the step "
        "size (Adam, lr 1e-4): its glimpses follow the item more closely "
        "(slope 0.8-0.9 after the second) and 14.98% test error."
    ),
}
