"""Where does the recurrent attention model look? Plot its glimpse paths.

Loads the default RAM preset `ram_fashion_mnist_translated_seeking_annealed`
(Fashion-MNIST items at random positions of a 60x60 canvas, 6 glimpses that
go to the item), classifies translated
test items from the shipped sample, and saves `demo_output/ram_glimpses.png`:
each canvas with the path of glimpse centres, the finest patch of every
glimpse (numbered) and the coarser scales of the first one. Then it feeds
the same canvases as float RGB images (converted to gray by the model's
preprocessor).

Usage:
    python examples/ram_glimpses.py [--preset DIR] [--out PNG]
"""

import argparse
import os
import sys

import numpy as np

try:
    import zoo
except ImportError:  # a source checkout without `pip install -e .`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import zoo

from zoo.data import fashion_mnist
from zoo.ram import RecurrentAttentionModel
from zoo.ram.plotting import plot_glimpses


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="ram_fashion_mnist_translated_seeking_annealed")
    p.add_argument("--out", default="demo_output/ram_glimpses.png")
    args = p.parse_args(argv)

    model = RecurrentAttentionModel.from_preset(args.preset)
    images, labels = fashion_mnist.load("test", "translated", sample=True, seed=1)
    images, labels = images[:8], labels[:8]
    predicted = model.predict(images, verbose=0).argmax(-1)
    names = fashion_mnist.CLASS_NAMES
    for y, p_ in zip(labels, predicted):
        print(f"true {names[y]:12s} predicted {names[p_]}")
    plot_glimpses(
        images,
        model.glimpses(images),
        args.out,
        model.patch_size,
        model.num_scales,
        model.scale_factor,
        titles=[f"{names[y]} / {names[p_]}" for y, p_ in zip(labels, predicted)],
    )
    print(f"saved {args.out}")

    # uint8 or float, grayscale or RGB: the preprocessor standardizes them.
    rgb = np.repeat(images[..., None], 3, axis=-1).astype("float32") / 255.0
    same = (model.predict(rgb, verbose=0).argmax(-1) == predicted).mean()
    print(f"float RGB input gives the same classes as uint8 gray: {same:.0%}")
    print(f"zoo {zoo.__version__}, preset: {model.preset_metadata.get('command', '')}")


if __name__ == "__main__":
    main()
