"""The wheel: what goes in, and that it runs every shipped preset on its own.

`pip wheel` builds it from a copy of the package sources (an in-tree build
would leave `build/` and `*.egg-info` in the checkout). It is installed
without dependencies into a fresh venv outside the repository; the
dependencies come from this interpreter's site-packages through a `.pth`
line (its `.pth` files, the editable install among them, are not run). The
check then runs from a folder outside the repository with `python -I`
(no PYTHONPATH, no script folder on the path) and asserts that `zoo` and
every preset it finds are the wheel's.
"""

import os
import re
import shutil
import site
import subprocess
import sys
import venv
import zipfile

import pytest

import zoo
from zoo import registry

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# What the build sees: the packages, and beside them what must stay out of
# the wheel (run history, docs, tests), as in a checkout.
SOURCES = ["setup.py", "pyproject.toml", "README.md", "keras_attention", "zoo"]
LEFT_OUT = ["experiments", "docs", "tests"]
FAMILIES = {family.name: family.presets for family in registry.families()}

pytestmark = [pytest.mark.slow, pytest.mark.tensorflow_only]

CHECK = """
import os
import sys

venv = os.path.realpath(sys.argv[1])

import keras_attention
import zoo
from zoo import cli
from zoo.data import fashion_mnist

for module in (keras_attention, zoo, cli):
    path = os.path.realpath(module.__file__)
    assert path.startswith(venv + os.sep), path
shipped = zoo.list_presets()
for directory in shipped.values():
    assert os.path.realpath(directory).startswith(venv + os.sep), directory
kinds = {name: family.kind for name, family in zoo.registry.presets().items()}
translators = [name for name, kind in kinds.items() if kind == "translation"]
others = [name for name, kind in kinds.items() if kind != "translation"]
assert sorted(translators + others) == sorted(shipped), sorted(shipped)
sample = fashion_mnist.sample_path()
for name in translators:
    assert cli.main(["translate", name, "Jesus wept."]) == 0, name
for name in others:
    assert cli.main(["evaluate", name, "--limit", "20", "--data-path", sample]) == 0
print("ran", len(shipped), "presets from", venv)
"""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    source = tmp_path_factory.mktemp("source")
    junk = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build")
    for name in SOURCES + LEFT_OUT:
        path = os.path.join(ROOT, name)
        if os.path.isdir(path):
            shutil.copytree(path, source / name, ignore=junk)
        else:
            shutil.copy(path, source / name)
    out = tmp_path_factory.mktemp("wheel")
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
        + ["--no-index", "-w", str(out), str(source)],
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stdout + build.stderr
    assert "would be ignored" not in build.stdout + build.stderr
    (path,) = out.glob("*.whl")
    return path


def test_the_wheel_holds_the_packages_shipped_presets_and_samples_only(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    presets = set()
    for name in names:
        top, *rest = name.split("/")
        if top.endswith(".dist-info"):
            continue
        assert top in ("keras_attention", "zoo"), name
        assert not name.endswith((".md", ".png", ".log")), name
        if name.endswith(".py"):
            continue
        # Data: the samples, and the files of the presets each family lists.
        if rest[:2] == ["data", "samples"] or rest == ["serving", "page.html"]:
            continue
        family, folder, preset = rest[:3]
        assert folder == "presets" and preset in FAMILIES[family], name
        presets.add(preset)
    assert presets == set(zoo.list_presets())
    assert not [n for n in names if "experiments" in n or n.startswith("tests/")]


def test_the_readme_gives_the_wheels_size_and_file_count(wheel):
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        text = " ".join(f.read().split())
    megabytes, files = re.search(r"([\d.]+) MB, (\d+) files", text).groups()
    assert int(files) == len(zipfile.ZipFile(wheel).namelist())
    assert abs(float(megabytes) - os.path.getsize(wheel) / 1e6) <= 0.1


def test_the_wheel_metadata_pins_python_and_tensorflow_text(wheel):
    archive = zipfile.ZipFile(wheel)
    (metadata,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
    lines = archive.read(metadata).decode().splitlines()
    assert "Requires-Python: >=3.11" in lines
    (pin,) = [
        line for line in lines if line.startswith("Requires-Dist: tensorflow-text")
    ]
    assert ">=2.21.1" in pin and "<2.22" in pin, pin


def test_a_fresh_venv_runs_every_shipped_preset_from_the_wheel(wheel, tmp_path):
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    python = str(env_dir / "bin" / "python")
    install = subprocess.run(
        [sys.executable, "-m", "pip", "--python", python, "install", "--no-deps"]
        + ["--no-index", "-q", str(wheel)],
        capture_output=True,
        text=True,
    )
    assert install.returncode == 0, install.stdout + install.stderr
    purelib = subprocess.run(
        [python, "-I", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    with open(os.path.join(purelib, "test_dependencies.pth"), "w") as f:
        f.write("\n".join(site.getsitepackages()) + "\n")
    assert os.path.isfile(env_dir / "bin" / "keras-attention")  # the console script
    outside = tmp_path / "outside"
    outside.mkdir()
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    environment["TF_CPP_MIN_LOG_LEVEL"] = "3"
    run = subprocess.run(
        [python, "-I", "-c", CHECK, str(env_dir)],
        cwd=outside,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert f"ran {len(zoo.list_presets())} presets" in run.stdout
    # Chance is 90%; the presets: 14.98% and 12.28% on the full test sets.
    errors = re.findall(r"Fashion-MNIST test: error ([\d.]+)%", run.stdout)
    assert len(errors) == len(zoo.ram.PRESETS), run.stdout[-3000:]
    assert all(float(error) < 50 for error in errors), errors
