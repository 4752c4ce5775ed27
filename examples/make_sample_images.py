"""Writes the two sample images the README's `caption` and `classify` read.

`examples/images/scene.png`: a held-out scene of the captioner's sample
data (`zoo.data.scenes`, 84x84 grayscale: Fashion-MNIST items in a scene);
`examples/images/item.png`: a held-out Fashion-MNIST item on a 60x60 canvas,
the RAM preset's training size. Both come from the samples the repository
ships (`zoo/data/samples/`), so the command needs no download:

    python examples/make_sample_images.py            # examples/images/
    python examples/make_sample_images.py --out DIR
"""

import argparse
import os

import numpy as np
from PIL import Image

from zoo.data import fashion_mnist, scenes

FOLDER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "images")


def sample_images():
    """`{"scene.png": uint8 (H, W, 3), "item.png": uint8 (60, 60)}`."""
    items, _ = fashion_mnist.load_arrays("test", path=fashion_mnist.sample_path())
    canvas = fashion_mnist.translate(items[:1], canvas_size=60, seed=0)[0]
    scene = scenes.load("test", num_scenes=1, sample=True, seed=5)["images"][0]
    return {
        "scene.png": np.asarray(scene, np.uint8),
        "item.png": np.asarray(canvas, np.uint8).squeeze(),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=FOLDER, help="folder (default: %(default)s)")
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    for name, pixels in sample_images().items():
        path = os.path.join(args.out, name)
        Image.fromarray(pixels).save(path)
        print(path)


if __name__ == "__main__":
    main()
