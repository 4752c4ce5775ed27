"""Image inputs of an exported SavedModel, converted inside the graph.

The image models' exports (`zoo.ram.export`, `zoo.captioning.export`)
share two serving signatures: `serve` takes a uint8 batch
`image (batch, height, width, channels)` of any size and channel count,
`serve_bytes` takes `image_bytes (batch,)`, encoded PNG, JPEG, GIF or BMP
files. This module holds what both need, in TensorFlow ops only, so the
SavedModel runs where neither the zoo nor Keras can be imported:
`by_channels` runs a function traced for each accepted channel count,
`decode` and `decode_batch` turn encoded files into uint8 images, and
`write_archive` writes the endpoints (which refuse inputs of another rank
when they run) and a small description of the export
(`assets.extra/zoo_export.json`, which `zoo.serving.server` reads).
"""

import os

import keras

from zoo import quiet
from zoo.serving.export import write_metadata

tf = quiet.LazyModule("tensorflow", "Exporting an image model (a SavedModel)")


def image_spec():
    """The uint8 batch that `serve` takes: any batch, size and channel count."""
    return tf.TensorSpec([None, None, None, None], tf.uint8, name="image")


def bytes_spec():
    """The encoded files that `serve_bytes` takes."""
    return tf.TensorSpec([None], tf.string, name="image_bytes")


def by_channels(images, functions):
    """Runs `functions[c](images)` for the channel count `c` of `images`.

    Each function is traced with `images` of a static channel count, so the
    graph follows the same path as an eager call on such images. A channel
    count without a function fails with an `InvalidArgumentError` naming it.

    Args:
        images: tensor `(batch, height, width, channels)`, channels unknown
            until run time.
        functions: dict `{channels: callable(images) -> outputs}`; every
            callable returns the same structure.

    Returns:
        The outputs of the function for the images' channel count.

    Example:
    >>> images = tf.zeros((2, 5, 5, 3), tf.uint8)
    >>> int(by_channels(images, {1: lambda x: tf.shape(x)[-1],
    ...                          3: lambda x: 10 * tf.shape(x)[-1]}))
    30
    """
    counts = sorted(functions)
    channels = tf.shape(images)[-1]
    known = tf.equal(channels, counts)
    check = tf.debugging.Assert(
        tf.reduce_any(known),
        [
            f"`image` must have {' or '.join(map(str, counts))} channels. Received:",
            channels,
        ],
    )
    with tf.control_dependencies([check]):
        images = tf.identity(images)
    branches = [_with_channels(functions[count], images, count) for count in counts]
    return tf.switch_case(
        tf.argmax(tf.cast(known, tf.int32), output_type=tf.int32), branches
    )


def _with_channels(function, images, count):
    def branch():
        return function(with_static_shape(images, [None, None, None, count]))

    return branch


def with_static_shape(tensor, shape):
    """`tensor` with the known sizes of `shape` (`None`: keep its own) set.

    A reshape to the same shape, not `tf.ensure_shape`: inside a branch
    chosen by the tensor's run-time shape, Grappler reads an `EnsureShape`
    as a fact about the tensor everywhere and may fold the branch choice to
    that shape (seen with TensorFlow 2.21 in a `tf.map_fn`).

    Example:
    >>> x = tf.zeros((2, 3))
    >>> with_static_shape(x, [None, 3]).shape
    TensorShape([2, 3])
    """
    dynamic = tf.shape(tensor)
    sizes = [dynamic[i] if size is None else size for i, size in enumerate(shape)]
    return tf.reshape(tensor, tf.stack(sizes))


def decode(image_bytes):
    """One encoded image (PNG, JPEG, GIF's first frame, BMP) -> uint8 `(H, W, C)`.

    Gray stays one channel, colour three; an alpha channel is dropped
    (gray + alpha -> gray, RGBA -> RGB).

    Example:
    >>> rgba = tf.fill((2, 3, 4), tf.constant(7, tf.uint8))
    >>> tuple(decode(tf.io.encode_png(rgba)).shape)
    (2, 3, 3)
    """
    image = tf.io.decode_image(image_bytes, channels=0, expand_animations=False)
    channels = tf.shape(image)[-1]
    keep = tf.where(tf.equal(channels % 2, 0), channels - 1, channels)
    return image[..., :keep]


def decode_batch(image_bytes):
    """Decodes every file once: `(images, same_size)`.

    Args:
        image_bytes: string tensor `(batch,)` of encoded images.

    Returns:
        A `tf.TensorArray` of uint8 images `(H, W, C)` (sizes may differ)
        and a bool scalar: whether all have one shape, so that
        `images.stack()` is a batch.

    Example:
    >>> files = tf.stack([tf.io.encode_png(tf.zeros((4, 6, 1), tf.uint8))] * 2)
    >>> images, same_size = decode_batch(files)
    >>> tuple(images.stack().shape), bool(same_size)
    ((2, 4, 6, 1), True)
    """
    count = tf.shape(image_bytes)[0]
    images = tf.TensorArray(
        tf.uint8, size=count, infer_shape=False, element_shape=[None, None, None]
    )
    shapes = tf.TensorArray(tf.int32, size=count, element_shape=[3])

    def body(i, images, shapes):
        image = decode(image_bytes[i])
        return i + 1, images.write(i, image), shapes.write(i, tf.shape(image))

    _, images, shapes = tf.while_loop(
        lambda i, *_: i < count, body, (tf.constant(0), images, shapes)
    )
    shapes = shapes.stack()
    same_size = tf.reduce_all(tf.equal(shapes, shapes[:1]))
    return images, same_size


def write_archive(path, serve, serve_bytes, description):
    """Writes a SavedModel of the two image endpoints and its description.

    Args:
        path: str or path-like. The SavedModel directory.
        serve: the tf.function on uint8 images (`image_spec()`), also
            `serving_default`.
        serve_bytes: the tf.function on encoded files (`bytes_spec()`).
        description: JSON-serializable dict stored by
            `zoo.serving.export.write_metadata` (the kind of model, its settings),
            with the signature names added.

    Returns:
        The path, as a str.
    """
    path = os.fspath(path)

    # A loaded signature does not check its inputs' shapes: without these,
    # one unbatched (60, 60, 1) image would be classified as 60 images.
    def checked_serve(image):
        return serve(tf.ensure_shape(image, image_spec().shape))

    def checked_serve_bytes(image_bytes):
        return serve_bytes(tf.ensure_shape(image_bytes, bytes_spec().shape))

    archive = keras.export.ExportArchive()
    archive.add_endpoint("serve", checked_serve, input_signature=[image_spec()])
    archive.add_endpoint(
        "serve_bytes", checked_serve_bytes, input_signature=[bytes_spec()]
    )
    archive.write_out(path, verbose=False)
    write_metadata(path, dict(description, signatures=["serve", "serve_bytes"]))
    return path
