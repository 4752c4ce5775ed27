"""Image files for the CLI's image verbs (`caption`, `classify`)."""

import os


def read_image(path, channels, size=None):
    """A PNG/JPEG file as a uint8 array `(H, W, channels)`, resized to `size`.

    16-bit images are scaled to 8 bits (not wrapped modulo 256); a file that
    is not a readable, non-empty image raises a `ValueError` naming it.
    """
    import numpy as np
    from PIL import Image, UnidentifiedImageError

    if not os.path.isfile(path):
        raise FileNotFoundError(f"No image file {path!r}")
    try:
        with Image.open(path) as image:
            image.load()
            if image.width == 0 or image.height == 0:
                raise ValueError(f"{path!r} is an empty (0x0) image")
            if image.mode in ("I", "I;16", "I;16B", "I;16L", "F"):
                wide = np.asarray(image, dtype="float64")
                # 16-bit PNGs arrive as mode I (32-bit ints) holding 0-65535.
                scale = 255.0 / 65535.0 if image.mode != "F" else 255.0
                image = Image.fromarray(
                    np.clip(np.rint(wide * scale), 0, 255).astype("uint8")
                )
            image = image.convert("L" if channels == 1 else "RGB")
            if size is not None and image.size != (size[1], size[0]):
                image = image.resize((size[1], size[0]), Image.NEAREST)
            array = np.asarray(image, dtype="uint8")
    except (UnidentifiedImageError, OSError, SyntaxError) as e:
        raise ValueError(f"{path!r} is not a readable image ({e})") from e
    return array.reshape(array.shape[0], array.shape[1], channels)
