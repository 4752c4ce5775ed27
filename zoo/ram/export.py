"""Exports a `RecurrentAttentionModel` as a SavedModel that classifies images.

The SavedModel needs TensorFlow only (no zoo, Keras or keras-hub) and holds
everything between raw images and finished answers:

- `serve` (also `serving_default`): `image`, uint8
  `(batch, height, width, channels)`, any size, 1 or 3 channels;
- `serve_bytes`: `image_bytes`, string `(batch,)` of encoded PNG / JPEG /
  GIF / BMP files (an alpha channel is dropped; files of different sizes
  are classified one by one);

both returning `class_id` int32 `(batch,)`, `class_name` string `(batch,)`,
`probabilities` float32 `(batch, num_classes)` and `glimpse_path` float32
`(batch, num_glimpses, 2)`: what `classify`, `predict` (softmax of the
logits) and `glimpses` return. The image is read as the model reads it
(`ImagePreprocessor`, `to_model_pixels`): uint8 pixels in `[0, 255]`, RGB
turned gray for a one-channel model, gray repeated for a three-channel one.

Example:
>>> import tempfile
>>> import numpy as np
>>> from zoo.ram import RecurrentAttentionModel
>>> model = RecurrentAttentionModel(
...     num_classes=3, num_glimpses=2, patch_size=4, glimpse_units=4,
...     location_units=4, glimpse_output_units=8, units=8, seed=0,
...     class_names=["cat", "dog", "owl"])
>>> path = export_classifier(model, tempfile.mkdtemp())
>>> import tensorflow as tf
>>> serve = tf.saved_model.load(path).signatures["serving_default"]
>>> outputs = serve(image=tf.zeros((2, 28, 28, 1), tf.uint8))
>>> sorted(outputs), tuple(outputs["glimpse_path"].shape)
(['class_id', 'class_name', 'glimpse_path', 'probabilities'], (2, 2, 2))
"""

from zoo import quiet
from zoo.base import backends
from zoo.serving import image_export

tf = quiet.LazyModule("tensorflow", "Exporting a glimpse classifier (a SavedModel)")

#: The channel counts an exported classifier takes.
CHANNELS = (1, 3)


def export_classifier(model, path):
    """Writes `model` as a SavedModel with the `serve` and `serve_bytes` signatures.

    With `test_samples > 1` the model samples its glimpse paths, and so
    does the export (its outputs then differ from call to call); with the
    default `test_samples=1` the export returns what `classify`, `predict`
    and `glimpses` return, up to float rounding.

    Args:
        model: a `zoo.ram.RecurrentAttentionModel`.
        path: str or path-like. The SavedModel directory to write.

    Returns:
        The path, as a str.

    Raises:
        TypeError: `model` has no RAM outputs.
        zoo.base.backends.BackendError: not on the TensorFlow backend.
    """
    backends.require_tensorflow("export_classifier() (a TensorFlow SavedModel)")
    if not all(hasattr(model, name) for name in ("num_glimpses", "num_classes")):
        raise TypeError(
            "`model` must be a zoo.ram.RecurrentAttentionModel. "
            f"Received: model={type(model).__name__}"
        )
    names = model.class_names
    if names is None:
        names = [str(i) for i in range(model.num_classes)]
    names = tf.constant(list(names))

    def answer(images):
        outputs = model(images, training=False)
        logits = tf.cast(outputs["logits"], tf.float32)
        class_id = tf.cast(tf.argmax(logits, axis=-1), tf.int32)
        return {
            "class_id": class_id,
            "class_name": tf.gather(names, class_id),
            "probabilities": tf.nn.softmax(logits, axis=-1),
            "glimpse_path": tf.cast(outputs["locations"], tf.float32),
        }

    # One function called by both signatures: the model is traced once per
    # channel count, not again for each way `serve_bytes` calls it.
    @tf.function(input_signature=[image_export.image_spec()], autograph=False)
    def serve(image):
        return image_export.by_channels(image, {c: answer for c in CHANNELS})

    def serve_bytes(image_bytes):
        images, same_size = image_export.decode_batch(image_bytes)

        def one_by_one():
            def one(i):
                outputs = serve(images.read(i)[None])
                return {key: value[0] for key, value in outputs.items()}

            signature = {
                "class_id": tf.TensorSpec([], tf.int32),
                "class_name": tf.TensorSpec([], tf.string),
                "probabilities": tf.TensorSpec([model.num_classes], tf.float32),
                "glimpse_path": tf.TensorSpec([model.num_glimpses, 2], tf.float32),
            }
            return tf.map_fn(
                one, tf.range(images.size()), fn_output_signature=signature
            )

        return tf.cond(same_size, lambda: serve(images.stack()), one_by_one)

    description = {
        "kind": "classification",
        "model": type(model).__name__,
        "class_names": [n.decode() for n in names.numpy().tolist()],
        "num_glimpses": model.num_glimpses,
        "channels": list(CHANNELS),
    }
    return image_export.write_archive(path, serve, serve_bytes, description)
