"""GlimpseSensor and GlimpseNetwork against NumPy slicing and NumPy layers."""

import math

import keras
import numpy as np
import pytest

from keras_attention.layers import GlimpseNetwork, GlimpseSensor

RNG = np.random.default_rng(0)


def np_glimpse(images, locations, patch_size, num_scales=1, scale_factor=2):
    """Reference retina: zero-pad, slice with NumPy, average-pool by reshape."""
    batch, height, width, channels = images.shape
    out = np.zeros((batch, num_scales, patch_size, patch_size, channels))
    for k in range(num_scales):
        side = patch_size * scale_factor**k
        padded = np.pad(images, ((0, 0), (side, side), (side, side), (0, 0)))
        for b, (y, x) in enumerate(np.asarray(locations, "float64")):
            top = int(np.floor((y + 1) / 2 * height - side / 2 + 0.5))
            left = int(np.floor((x + 1) / 2 * width - side / 2 + 0.5))
            top, left = max(top, -side), max(left, -side)  # off-image: zeros
            top, left = min(top, height), min(left, width)
            crop = padded[b, top + side : top + 2 * side, left + side : left + 2 * side]
            f = scale_factor**k
            crop = crop.reshape(patch_size, f, patch_size, f, channels)
            out[b, k] = crop.mean(axis=(1, 3))
    return out


def np_relu(x):
    return np.maximum(x, 0.0)


def image(height, width, channels=1, batch=1):
    return RNG.uniform(size=(batch, height, width, channels)).astype("float32")


def run(layer, images, locations):
    return keras.ops.convert_to_numpy(
        layer(images, np.asarray(locations, "float32").reshape(-1, 2))
    )


# --- GlimpseSensor: exact crops at known locations ---------------------------


def test_centre_crop_is_plain_slice():
    img = image(28, 28)
    out = run(GlimpseSensor(8), img, [0.0, 0.0])
    assert out.shape == (1, 1, 8, 8, 1)
    np.testing.assert_array_equal(out[0, 0], img[0, 10:18, 10:18])


def test_first_coordinate_is_row():
    img = image(20, 20)
    # y = -0.5 -> row centre 5, x = 0.5 -> column centre 15.
    out = run(GlimpseSensor(2), img, [-0.5, 0.5])
    np.testing.assert_array_equal(out[0, 0], img[0, 4:6, 14:16])
    swapped = run(GlimpseSensor(2), img, [0.5, -0.5])
    np.testing.assert_array_equal(swapped[0, 0], img[0, 14:16, 4:6])


def test_corners_are_zero_padded():
    img = image(10, 12, channels=2)
    sensor = GlimpseSensor(4)
    top_left = run(sensor, img, [-1.0, -1.0])[0, 0]
    np.testing.assert_array_equal(top_left[2:, 2:], img[0, :2, :2])
    np.testing.assert_array_equal(top_left[:2], 0.0)
    np.testing.assert_array_equal(top_left[:, :2], 0.0)
    bottom_right = run(sensor, img, [1.0, 1.0])[0, 0]
    np.testing.assert_array_equal(bottom_right[:2, :2], img[0, -2:, -2:])
    np.testing.assert_array_equal(bottom_right[2:], 0.0)
    np.testing.assert_array_equal(bottom_right[:, 2:], 0.0)
    top_right = run(sensor, img, [-1.0, 1.0])[0, 0]
    np.testing.assert_array_equal(top_right[2:, :2], img[0, :2, -2:])
    np.testing.assert_array_equal(top_right[:2], 0.0)


def test_partial_patch_at_edge():
    img = image(16, 16)
    # Centre (8, 1): a 6-wide patch starts at column -2.
    out = run(GlimpseSensor(6), img, [0.0, -0.875])[0, 0]
    np.testing.assert_array_equal(out[:, :2], 0.0)
    np.testing.assert_array_equal(out[:, 2:], img[0, 5:11, 0:4])


def test_location_off_the_image_reads_zeros():
    img = image(12, 12, batch=2) + 1.0
    out = run(GlimpseSensor(4, num_scales=2), img, [[3.0, 3.0], [-5.0, 0.0]])
    np.testing.assert_array_equal(out, 0.0)


def test_two_scales_by_hand():
    img = np.arange(64, dtype="float32").reshape(1, 8, 8, 1)
    out = run(GlimpseSensor(2, num_scales=2, scale_factor=2), img, [0.0, 0.0])
    np.testing.assert_array_equal(out[0, 0, :, :, 0], img[0, 3:5, 3:5, 0])
    # 4x4 patch rows/cols 2..5, pooled by 2x2 blocks.
    block = img[0, 2:6, 2:6, 0]
    expected = block.reshape(2, 2, 2, 2).mean(axis=(1, 3))
    np.testing.assert_allclose(out[0, 1, :, :, 0], expected, rtol=1e-6)


@pytest.mark.parametrize("height,width", [(28, 28), (60, 60), (61, 47)])
@pytest.mark.parametrize(
    "patch_size,num_scales,scale_factor", [(8, 3, 2), (5, 2, 3), (3, 3, 1)]
)
def test_multiscale_matches_numpy(height, width, patch_size, num_scales, scale_factor):
    img = image(height, width, channels=3, batch=6)
    locations = np.array(
        [
            [0.0, 0.0],
            [-1.0, -1.0],
            [1.0, 1.0],
            [0.3, -0.7],
            [-0.95, 0.6],
            [0.82, -0.13],
        ],
        "float32",
    )
    sensor = GlimpseSensor(patch_size, num_scales, scale_factor)
    out = run(sensor, img, locations)
    assert out.shape == (6, num_scales, patch_size, patch_size, 3)
    ref = np_glimpse(img, locations, patch_size, num_scales, scale_factor)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)


def test_scale_factor_one_repeats_the_patch():
    img = image(20, 20)
    out = run(GlimpseSensor(4, num_scales=3, scale_factor=1), img, [0.1, -0.2])
    np.testing.assert_array_equal(out[0, 1], out[0, 0])
    np.testing.assert_array_equal(out[0, 2], out[0, 0])


def test_large_image_matches_numpy_crop():
    img = image(1000, 1000)
    locations = np.array([[0.25, -0.5]], "float32")
    out = run(GlimpseSensor(8, num_scales=3), img, locations)
    np.testing.assert_array_equal(out[0, 0], img[0, 621:629, 246:254])
    ref = np_glimpse(img, locations, 8, 3, 2)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)


def test_uint8_images_are_cast_after_the_gather():
    pixels = RNG.integers(0, 256, size=(2, 30, 30, 1), dtype="uint8")
    locations = np.array([[0.23, -0.31], [-0.97, 0.88]], "float32")
    out = run(GlimpseSensor(6, num_scales=2), pixels, locations)
    assert out.dtype == np.float32
    ref = np_glimpse(pixels.astype("float64"), locations, 6, 2, 2)
    np.testing.assert_allclose(out, ref, rtol=1e-6)


def test_any_image_size_in_a_compiled_model():
    images = keras.Input((None, None, 2))
    locations = keras.Input((2,))
    sensor = GlimpseSensor(4, num_scales=2)
    model = keras.Model([images, locations], sensor(images, locations))
    assert model.output_shape == (None, 2, 4, 4, 2)
    for height, width in [(28, 28), (61, 47)]:
        img = image(height, width, channels=2, batch=3)
        loc = RNG.uniform(-1, 1, size=(3, 2)).astype("float32")
        out = model.predict([img, loc], verbose=0)
        ref = np_glimpse(img, loc, 4, 2, 2)
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)


# --- GlimpseNetwork -----------------------------------------------------------


def w(layer, name):
    return keras.ops.convert_to_numpy(getattr(layer, name))


def np_network(net, rho, loc):
    """The glimpse network's dense layers in NumPy, on `rho` (batch, size)."""
    h_g = np_relu(rho @ w(net.glimpse_dense, "kernel") + w(net.glimpse_dense, "bias"))
    h_l = np_relu(loc @ w(net.location_dense, "kernel") + w(net.location_dense, "bias"))
    return np_relu(
        h_g @ w(net.glimpse_output_dense, "kernel")
        + w(net.glimpse_output_dense, "bias")
        + h_l @ w(net.location_output_dense, "kernel")
    )


def test_network_matches_numpy():
    net = GlimpseNetwork(
        glimpse_units=6,
        location_units=5,
        output_units=7,
        patch_size=3,
        num_scales=2,
        scale_factor=2,
        bias_initializer=keras.initializers.RandomNormal(seed=1),
    )
    img = image(20, 17, channels=2, batch=4)
    loc = RNG.uniform(-1, 1, size=(4, 2)).astype("float32")
    out = run(net, img, loc)
    assert out.shape == (4, 7)

    rho = np_glimpse(img, loc, 3, 2, 2).reshape(4, -1)
    ref = np_network(net, rho, loc)
    assert np.any(ref > 0) and np.any(ref == 0)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)
    assert len(net.trainable_weights) == 7


def np_conv3x3_relu(x, kernel, bias):
    """'same' 3x3 convolution + ReLU of `(n, h, w, c)` in NumPy."""
    n, h, w, _ = x.shape
    padded = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    out = np.zeros((n, h, w, kernel.shape[-1]))
    for dy in range(3):
        for dx in range(3):
            out += padded[:, dy : dy + h, dx : dx + w] @ kernel[dy, dx]
    return np_relu(out + bias)


def np_max_pool2(x):
    """2x2 max pooling, stride 2, 'same' padding (odd sides keep the edge)."""
    n, h, w, c = x.shape
    padded = np.full((n, h + h % 2, w + w % 2, c), -np.inf)
    padded[:, :h, :w] = x
    return padded.reshape(n, padded.shape[1] // 2, 2, -1, 2, c).max(axis=(2, 4))


@pytest.mark.parametrize("patch_size", [5, 6])
def test_convolutional_what_path_matches_numpy(patch_size):
    net = GlimpseNetwork(
        glimpse_units=6,
        location_units=5,
        output_units=7,
        patch_size=patch_size,
        num_scales=2,
        glimpse_filters=(3, 4),
        bias_initializer=keras.initializers.RandomNormal(seed=1),
    )
    img = image(23, 19, channels=2, batch=3)
    loc = RNG.uniform(-1, 1, size=(3, 2)).astype("float32")
    out = run(net, img, loc)

    # Every scale's patch through the same two convolutions and poolings.
    x = np_glimpse(img, loc, patch_size, 2, 2)
    x = x.reshape(3 * 2, patch_size, patch_size, 2)
    for conv in net.glimpse_convolutions[::2]:
        x = np_max_pool2(np_conv3x3_relu(x, w(conv, "kernel"), w(conv, "bias")))
    side = math.ceil(math.ceil(patch_size / 2) / 2)
    assert x.shape == (6, side, side, 4)
    rho = x.reshape(3, -1)
    ref = np_network(net, rho, loc)
    assert np.any(ref > 0)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)
    # Two convolutions with a kernel and a bias each, besides the seven.
    assert len(net.trainable_weights) == 11


def test_convolutional_path_weights_do_not_depend_on_the_image_size():
    shapes = []
    for side in (16, 64):
        net = GlimpseNetwork(4, 4, 4, patch_size=4, num_scales=3, glimpse_filters=[2])
        run(net, image(side, side, batch=1), np.zeros((1, 2), "float32"))
        shapes.append([tuple(v.shape) for v in net.weights])
    assert shapes[0] == shapes[1]


@pytest.mark.parametrize("glimpse_filters,weights", [(None, 7), ((2, 3), 11)])
def test_gradients_reach_every_weight_and_the_images(glimpse_filters, weights):
    keras.utils.set_random_seed(0)
    images = keras.Input((12, 12, 1))
    locations = keras.Input((2,))
    # A 1x1 convolution before the sensor: its kernel only learns if
    # gradients flow through the gather back to the image.
    features = keras.layers.Conv2D(2, 1, name="pixels")(images)
    g = GlimpseNetwork(
        8,
        8,
        4,
        patch_size=3,
        num_scales=2,
        glimpse_filters=glimpse_filters,
        name="glimpse",
    )(features, locations)
    model = keras.Model([images, locations], keras.layers.Dense(1)(g))
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    img = image(12, 12, batch=8)
    loc = RNG.uniform(-0.8, 0.8, size=(8, 2)).astype("float32")
    target = RNG.normal(size=(8, 1)).astype("float32")
    before = [keras.ops.convert_to_numpy(v) for v in model.trainable_weights]
    model.train_on_batch([img, loc], target)
    after = [keras.ops.convert_to_numpy(v) for v in model.trainable_weights]
    names = [v.path for v in model.trainable_weights]
    assert sum("glimpse" in n for n in names) == weights
    for name, old, new in zip(names, before, after, strict=True):
        assert not np.allclose(old, new), f"{name} received no gradient"


# --- Serialization ------------------------------------------------------------


def test_configs_round_trip():
    sensor = GlimpseSensor(5, num_scales=3, scale_factor=3, name="eye")
    clone = GlimpseSensor.from_config(sensor.get_config())
    assert (clone.patch_size, clone.num_scales, clone.scale_factor) == (5, 3, 3)
    assert clone.name == "eye"
    net = GlimpseNetwork(4, 3, 2, patch_size=6, num_scales=2, scale_factor=3)
    config = GlimpseNetwork.from_config(net.get_config()).get_config()
    assert config == net.get_config()
    assert config["output_units"] == 2 and config["scale_factor"] == 3
    assert config["glimpse_filters"] is None
    conv = GlimpseNetwork(4, 3, 2, glimpse_filters=(5, 6))
    config = GlimpseNetwork.from_config(conv.get_config()).get_config()
    assert config == conv.get_config() and config["glimpse_filters"] == [5, 6]


def test_model_save_and_load_without_custom_objects(tmp_path):
    images = keras.Input((None, None, 1))
    locations = keras.Input((2,))
    sensor = GlimpseSensor(4, num_scales=2)(images, locations)
    g = GlimpseNetwork(8, 4, 6, patch_size=4, num_scales=2)(images, locations)
    conv = GlimpseNetwork(8, 4, 6, patch_size=4, num_scales=2, glimpse_filters=[3])(
        images, locations
    )
    model = keras.Model([images, locations], [sensor, g, conv])
    img = image(30, 22, batch=2)
    loc = np.array([[0.2, -0.4], [-1.0, 1.0]], "float32")
    expected = model.predict([img, loc], verbose=0)
    path = str(tmp_path / "glimpse.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    got = loaded.predict([img, loc], verbose=0)
    for a, b in zip(expected, got, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    layer_types = {type(layer).__name__ for layer in loaded.layers}
    assert {"GlimpseSensor", "GlimpseNetwork"} <= layer_types


# --- Errors -------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs,name,error",
    [
        ({"patch_size": 0}, "patch_size", ValueError),
        ({"patch_size": -3}, "patch_size", ValueError),
        ({"patch_size": 2.5}, "patch_size", TypeError),
        ({"patch_size": True}, "patch_size", TypeError),
        ({"patch_size": 4, "num_scales": 0}, "num_scales", ValueError),
        ({"patch_size": 4, "scale_factor": 0}, "scale_factor", ValueError),
        ({"patch_size": 4, "scale_factor": 1.5}, "scale_factor", TypeError),
    ],
)
def test_sensor_rejects_bad_arguments(kwargs, name, error):
    with pytest.raises(error, match=name):
        GlimpseSensor(**kwargs)


@pytest.mark.parametrize(
    "name", ["glimpse_units", "location_units", "output_units", "patch_size"]
)
def test_network_rejects_bad_arguments(name):
    with pytest.raises(ValueError, match=name):
        GlimpseNetwork(**{name: 0})


@pytest.mark.parametrize(
    "glimpse_filters,error",
    [
        ((8, 0), ValueError),
        ([2.5], TypeError),  # a bad type, as in Keras (int_argument)
        ((True,), TypeError),
        (16, TypeError),
        ("16", TypeError),
    ],
)
def test_network_rejects_bad_glimpse_filters(glimpse_filters, error):
    with pytest.raises(error, match=r"glimpse_filters.*Received: glimpse_filters="):
        GlimpseNetwork(glimpse_filters=glimpse_filters)


@pytest.mark.parametrize(
    "images_shape,locations_shape,match",
    [
        ((2, 8, 8, 1), (2, 3), "locations"),
        ((2, 8, 8, 1), (2,), "locations"),
        ((2, 8, 8, 1), (2, 2, 1), "locations"),
        ((2, 8, 8), (2, 2), "images"),
        ((2, 8, 8, 1), (3, 2), "batch size"),
    ],
)
def test_bad_shapes(images_shape, locations_shape, match):
    images = np.zeros(images_shape, "float32")
    locations = np.zeros(locations_shape, "float32")
    with pytest.raises(ValueError, match=match):
        GlimpseSensor(2)(images, locations)
    with pytest.raises(ValueError, match=match):
        GlimpseNetwork(4, 4, 4, patch_size=2)(images, locations)


def test_network_needs_known_channels():
    with pytest.raises(ValueError, match="channels"):
        GlimpseNetwork(4, 4, 4, patch_size=2)(
            keras.Input((None, None, None)), keras.Input((2,))
        )
