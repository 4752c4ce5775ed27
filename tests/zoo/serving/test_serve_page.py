"""`zoo.serving.server`'s page in a real headless browser: load, upload, run, look.

Chromium is driven by chromedriver through the W3C WebDriver HTTP protocol,
spoken with `urllib` (no browser package to install): the test loads `GET /`
of a served tiny export, gives the file input a PNG, clicks Run and reads
what the page drew. The rendered text must be what the SavedModel answers
for the same file; the glimpse points must sit where the `(y, x)` in
`[-1, 1]` convention puts them, over the image drawn pixel for pixel; a
captioner's overlay must be as opaque as each cell's attention weight says.
Skipped when chromium or chromedriver is not installed (Debian's `chromium
chromium-driver`, installed by `.ci/run`).
"""

import base64
import json
import os
import shutil
import subprocess
import sys
import time
import types
import urllib.error
import urllib.request

import keras
import numpy as np
import pytest
import tensorflow as tf

from zoo.captioning.export import export_captioner
from zoo.ram.export import export_classifier
from zoo.serving.server import Limits, ModelServer, Signatures, make_server
from zoo.show_attend_tell import CaptionPreprocessor, ShowAttendTell

pytestmark = pytest.mark.tensorflow_only

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import tiny_models  # noqa: E402
from serving_helpers import base_url, free_port, serving  # noqa: E402

NAMES = ["cat", "dog", "owl", "yak"]
VOCABULARY = ["[PAD]", "[UNK]", "[START]", "[END]", "a", "bag", "coat", "##s"]
#: The page's settings: longest canvas side and attention opacity.
CLASSIFIER_SIDE, WORD_SIDE, OVERLAY_ALPHA = 320, 128, 0.6
ELEMENT = "element-6066-11e4-a52e-4f735466cecf"  # The W3C element key.


class Browser:
    """One chromedriver session, over the W3C WebDriver HTTP protocol."""

    def __init__(self, url, session):
        self.url = f"{url}/session/{session}"

    def call(self, method, path, body=None):
        return _call(self.url + path, method, body)

    def open(self, url):
        self.call("POST", "/url", {"url": url})

    def find(self, css):
        return self.call("POST", "/element", {"using": "css selector", "value": css})[
            ELEMENT
        ]

    def type(self, css, text):
        self.call("POST", f"/element/{self.find(css)}/value", {"text": text})

    def click(self, css):
        self.call("POST", f"/element/{self.find(css)}/click", {})

    def script(self, code, *args):
        return self.call("POST", "/execute/sync", {"script": code, "args": list(args)})

    def run(self, timeout=60):
        """Clicks Run and waits for the page to say done (or an error)."""
        self.click("#run")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = self.script(
                "return document.getElementById('status').dataset.state"
            )
            if state in ("done", "error"):
                return state
            time.sleep(0.1)
        raise AssertionError(f"The page did not answer in {timeout} s.")

    def pixels(self, css):
        """A canvas's RGBA pixels, `(height, width, 4)` uint8."""
        width, height, data = self.script(
            "const c = document.querySelector(arguments[0]);"
            "const d = c.getContext('2d').getImageData(0, 0, c.width, c.height);"
            "return [c.width, c.height, Array.from(d.data)];",
            css,
        )
        return np.asarray(data, "uint8").reshape(height, width, 4)

    def screenshot(self, path):
        """Saves the viewport as a PNG; returns it decoded, `(H, W, 3)`."""
        data = base64.b64decode(self.call("GET", "/screenshot"))
        with open(path, "wb") as file:
            file.write(data)
        return tf.io.decode_png(data, channels=3).numpy()


def _call(url, method, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url, data, {"Content-Type": "application/json"}, method=method
    )
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return json.loads(response.read())["value"]
    except urllib.error.HTTPError as error:
        raise AssertionError(json.loads(error.read())["value"]["message"]) from None


@pytest.fixture(scope="module")
def browser():
    if not (CHROMIUM and CHROMEDRIVER):
        pytest.skip(
            "needs chromium and chromedriver "
            "(Debian: apt-get install chromium chromium-driver)"
        )
    port = free_port()
    driver = subprocess.Popen(
        [CHROMEDRIVER, f"--port={port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    session = None
    try:
        for _ in range(100):
            try:
                if _call(url + "/status", "GET")["ready"]:
                    break
            except (OSError, AssertionError):
                time.sleep(0.1)
        arguments = [
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--window-size=1000,1000",
        ]
        options = {"binary": CHROMIUM, "args": arguments}
        capabilities = {"browserName": "chrome", "goog:chromeOptions": options}
        session = _call(
            url + "/session", "POST", {"capabilities": {"alwaysMatch": capabilities}}
        )["sessionId"]
        yield Browser(url, session)
    finally:
        if session is not None:
            _call(f"{url}/session/{session}", "DELETE")  # Ends chromium.
        driver.terminate()
        driver.wait(30)


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
    """`(url, signatures)` of a served tiny RAM export."""
    model = tiny_models.exportable_ram(3, "rnn", NAMES)
    path = export_classifier(model, tmp_path_factory.mktemp("ram"))
    signatures = tf.saved_model.load(path).signatures
    with serving(make_server(path, "127.0.0.1", 0)) as address:
        yield base_url(address), signatures


@pytest.fixture(scope="module")
def captioner(tmp_path_factory):
    """`(url, signatures)` of a served tiny greedy captioner export."""
    keras.utils.set_random_seed(0)
    model = ShowAttendTell(
        len(VOCABULARY),
        annotation_dim=8,
        embedding_dim=8,
        units=16,
        dropout=0.0,
        seed=0,
        preprocessor=CaptionPreprocessor(VOCABULARY, sequence_length=6),
    )
    path = export_captioner(
        tiny_models.randomized(model, 0.3), tmp_path_factory.mktemp("sat"), beam_width=1
    )
    signatures = tf.saved_model.load(path).signatures
    with serving(make_server(path, "127.0.0.1", 0)) as address:
        yield base_url(address), signatures


def write_png(tmp_path, image):
    path = tmp_path / "input.png"
    path.write_bytes(tf.io.encode_png(image).numpy())
    return path


def answer(signatures, path):
    files = tf.constant([path.read_bytes()])
    outputs = signatures["serve_bytes"](image_bytes=files)
    return {k: v.numpy()[0] for k, v in outputs.items()}


def text(browser, css):
    return browser.script(
        "return document.querySelector(arguments[0]).textContent", css
    )


def upscaled(image, canvas_side):
    """The image as the page draws it: whole-pixel upscaling, opaque RGBA."""
    scale = canvas_side // max(image.shape[:2])
    big = np.repeat(np.repeat(image, scale, axis=0), scale, axis=1)
    if big.shape[-1] == 1:
        big = np.repeat(big, 3, axis=-1)
    return np.concatenate([big, np.full(big.shape[:2] + (1,), 255, "uint8")], -1)


def test_classifier_page_draws_the_glimpse_path_over_the_image(
    browser, classifier, tmp_path
):
    url, signatures = classifier
    image = np.random.default_rng(2).integers(0, 256, (12, 10, 3), dtype="uint8")
    path = write_png(tmp_path, image)
    wanted = answer(signatures, path)
    browser.open(url + "/")
    assert browser.script("return document.title").startswith("zoo classification: ")
    browser.type("#file", str(path))
    assert browser.run() == "done", text(browser, "#status")

    assert text(browser, "#label") == wanted["class_name"].decode()
    rows = browser.script(
        "return [...document.querySelectorAll('#probabilities tr')]"
        ".map((row) => row.cells[0].textContent)"
    )
    assert rows == [NAMES[i] for i in np.argsort(-wanted["probabilities"])]
    # The glimpse centres, (y, x) in [-1, 1] over the image's canvas.
    drawn = upscaled(image, CLASSIFIER_SIDE)
    height, width = drawn.shape[:2]
    canvas = browser.pixels("#figure canvas#glimpses")
    assert canvas.shape == drawn.shape
    centres = (wanted["glimpse_path"][:, ::-1] + 1) / 2 * [width, height]
    points = json.loads(
        browser.script("return document.getElementById('glimpses').dataset.points")
    )
    np.testing.assert_allclose(points, centres, atol=1e-3)
    same = np.all(np.abs(canvas.astype(int) - drawn) <= 2, axis=-1)
    assert 0.5 < same.mean() < 1.0  # The image, under lines and markers.
    for x, y in centres:
        if 0 <= x < width and 0 <= y < height:
            assert not same[int(y), int(x)], "no marker on a glimpse centre"

    shot = browser.screenshot(tmp_path / "serve_page.png")
    viewport = browser.script(
        "return [innerHeight * devicePixelRatio, innerWidth * devicePixelRatio]"
    )
    assert list(shot.shape[:2]) == viewport
    assert len(np.unique(shot.reshape(-1, 3), axis=0)) > 50


def test_classifier_page_reports_errors(browser, classifier):
    url, _ = classifier
    browser.open(url + "/")
    assert browser.run() == "error"
    assert "Choose an image" in text(browser, "#status")


def test_captioner_page_overlays_each_words_attention(browser, captioner, tmp_path):
    url, signatures = captioner
    rng = np.random.default_rng(3)
    image = rng.integers(64, 256, (42, 42, 1), dtype="uint8")
    path = write_png(tmp_path, image)
    wanted = answer(signatures, path)
    length = int(wanted["length"])
    browser.open(url + "/")
    browser.type("#file", str(path))
    assert browser.run() == "done", text(browser, "#status")

    assert text(browser, "#label") == wanted["caption"].decode()
    words = browser.script(
        "return [...document.querySelectorAll('#figure figure.word figcaption')]"
        ".map((caption) => caption.textContent)"
    )
    assert words == [t.decode() for t in wanted["tokens"][:length]]
    drawn = upscaled(image, WORD_SIDE).astype(float)
    side = drawn.shape[0]
    for t in range(length):
        canvas = browser.pixels(f"#figure figure.word:nth-of-type({t + 1}) canvas")
        assert canvas.shape == drawn.shape
        # Over gray g, red (255, 40, 0) at opacity a leaves blue g * (1 - a).
        weights = wanted["attention"][t]
        cell = side / np.array(weights.shape)
        rows, columns = np.meshgrid(*(range(n) for n in weights.shape), indexing="ij")
        y = ((rows + 0.5) * cell[0]).astype(int)
        x = ((columns + 0.5) * cell[1]).astype(int)
        opacity = 1 - canvas[y, x, 2] / drawn[y, x, 2]
        expected = OVERLAY_ALPHA * np.maximum(weights, 0) / weights.max()
        np.testing.assert_allclose(opacity, expected, atol=0.05)
    browser.screenshot(tmp_path / "serve_page_captioner.png")


def test_translator_page_shows_the_translation_and_where_the_heatmap_is(
    browser, tmp_path
):
    module = tf.Module()
    module.serve = tf.function(
        lambda text: {
            "translation": tf.strings.upper(text),
            "score": -tf.cast(tf.strings.length(text), tf.float32),
        },
        input_signature=[tf.TensorSpec([None], tf.string, name="text")],
    )
    tf.saved_model.save(
        module, str(tmp_path), signatures={"serving_default": module.serve}
    )

    loaded = tf.saved_model.load(str(tmp_path))
    exported = types.SimpleNamespace(
        metadata={"kind": "translation"}, signatures=loaded.signatures
    )
    limits = Limits(max_request_bytes=2**16, batch_delay=0.0, max_batch=8)
    server = ModelServer(
        ("127.0.0.1", 0), Signatures(exported, limits), model_name="tiny_translator"
    )
    with serving(server) as address:
        browser.open(base_url(address) + "/")
        default = browser.script("return document.getElementById('text').value")
        assert browser.run() == "done", text(browser, "#status")
        assert text(browser, "#label") == default.upper()
        assert text(browser, "#score") == f"score {-len(default):.3f}"
        assert "--plot" in text(browser, "#note")
        assert json.loads(text(browser, "#result")) == {
            "score": -len(default),
            "translation": default.upper(),
        }
        # One translation a non-empty line (issue #42: the second was lost).
        browser.script(
            "document.getElementById('text').value = arguments[0]", "ab\n\n c \n"
        )
        assert browser.run() == "done", text(browser, "#status")
        assert text(browser, "#label").splitlines() == ["AB", "C"]
        assert text(browser, "#score") == "scores -2.000, -1.000"
        # The page names the model it serves.
        assert "tiny_translator" in text(browser, "#model")
