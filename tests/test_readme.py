"""Runs every ```python and ```bash block of README.md and of docs/*.md.

Python blocks run as written. A block that reads the full Debian data
(`/usr/share/...`, e.g. the SWORD modules or Fashion-MNIST) is skipped when
that data is absent; the others run on what the repository ships
(`zoo/data/samples/`, `examples/images/`). Each distinct shell command runs
in a fresh process from a scratch folder that sees the checkout's
`examples/`, as copied from the page, with the small limits of `LIMITS`
appended (a train of an hour runs 2 steps on the sample data); where the
pages show the same verb on the same preset more than once, the longest form
runs and the others are parsed by the CLI. The few that cannot run in a
test are in `NOT_RUN`, each with its reason. The README stays
what a newcomer reads in two minutes: the long material is in `docs/`, and
every relative link of the README and the docs leads to a file.
"""

import glob
import os
import re
import shlex
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")
PAGES = [README, *sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
# What a block must find on disk to run (the full data sets).
NEEDS = {
    'load("train")': "/usr/share/sword",
    "fashion_mnist.load(": "/usr/share/dataset-fashion-mnist",
}

#: Python blocks that are a client of a running server (by a name they use),
#: and the test that sends their requests to one.
NEEDS_SERVER = {
    "httpclient.": "tritonclient against `python -m zoo serve`; "
    "tests/zoo/serving/test_serve_v2_binary.py sends these requests",
    "localhost:8500": "gRPC clients against `python -m zoo serve`; "
    "tests/zoo/serving/test_serve_grpc.py sends these requests",
}


SHELL = re.compile(r"^```(?:bash|sh)\n(.*?)^```", re.DOTALL | re.MULTILINE)
#: Shell commands no test runs (by their first words), and why.
NOT_RUN = {
    "make demo": "installs the venv and runs every shipped preset for minutes "
    "(tests/test_makefile.py checks its install step)",
    "make test": "is the suite that runs this test",
    "python -m zoo serve": "serves until stopped; tests/zoo/serving starts the "
    "server and sends these requests",
    "curl": "asks the server of `serve`, above",
    "tensorflow_model_server": "another program, not installed by the project",
    "python -m zoo.translation.arrays": "tokenizes the whole Bible (minutes); "
    "tests/experiments/test_gpu_script.py writes sample arrays the same way",
    "MINUTES=5 bash experiments/gpu/run_gpu.sh": "runs on the lent GPU machine",
    "python experiments/gpu/": "needs the arrays or a GPU run's weights; "
    "tests/experiments/test_gpu_script.py runs --smoke and loads its weights",
}
#: What a shell command must find on disk to run (a translator's test split).
SHELL_NEEDS = {"python -m zoo evaluate seq2seq": "/usr/share/sword"}
#: Verbs whose standard error holds only the project's `warning:` lines, run
#: as a user starts them: without the variables that quiet or wake
#: TensorFlow's logs (`LOUD`). tests/zoo/cli/test_quiet.py has the rest.
QUIET_VERBS = ("presets", "translate", "caption", "classify")
LOUD = ("TF_CPP_MIN_LOG_LEVEL", "ZOO_VERBOSE")
#: Arguments appended to a command (by its first words) to keep it short.
LIMITS = {
    "python -m zoo train seq2seq": [
        *("--data", "sample", "--max-steps", "2", "--eval-limit", "2"),
        *("--beam-width", "1", "--verbose", "0"),
    ],
    "python -m zoo evaluate": ["--limit", "4", "--beam", "2"],
}


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def blocks(paths=PAGES):
    found = []
    for path in paths:
        text = read(path)
        name = os.path.relpath(path, ROOT)
        for index, match in enumerate(BLOCK.finditer(text)):
            line = text[: match.start()].count("\n") + 2
            found.append(
                pytest.param(path, match.group(1), id=f"{name}:block{index}_line{line}")
            )
    return found


def test_readme_has_python_blocks_and_is_short():
    assert len(blocks([README])) >= 2
    assert len(read(README).splitlines()) <= 150


def test_the_readme_links_each_docs_page():
    pages = [os.path.relpath(p, ROOT) for p in PAGES[1:]]
    assert pages, "no docs/*.md"
    linked = LINK.findall(read(README))
    assert sorted(set(pages) - set(linked)) == []


@pytest.mark.parametrize("path", PAGES, ids=lambda p: os.path.relpath(p, ROOT))
def test_every_relative_link_leads_to_a_file(path):
    for target in LINK.findall(read(path)):
        if "://" in target:
            continue
        resolved = os.path.join(os.path.dirname(path), target)
        assert os.path.exists(resolved), f"{path}: {target}"


@pytest.mark.tensorflow_only
@pytest.mark.parametrize("path, code", blocks())
def test_readme_block_runs(path, code):
    for marker, needed in NEEDS.items():
        if marker in code and not os.path.exists(needed):
            pytest.skip(f"needs the full data set in {needed}")
    for marker, reason in NEEDS_SERVER.items():
        if marker in code:
            pytest.skip(f"a client of a running server: {reason}")
    exec(compile(code, path, "exec"), {"__name__": "readme"})


def test_every_metric_of_a_training_log_is_explained():
    # The names a fit logs: compiled ones, and the models' own trackers.
    from zoo.transformer.losses import TargetTokens

    source = "".join(
        read(path)
        for path in glob.glob(os.path.join(ROOT, "zoo", "**", "*.py"), recursive=True)
    )
    names = {"loss", "accuracy", TargetTokens().name}
    names |= set(re.findall(r'keras\.metrics\.\w+\(name="(\w+)"', source))
    assert len(names) > 3
    explained = read(os.path.join(ROOT, "docs", "training.md"))
    assert sorted(n for n in names if f"`{n}`" not in explained) == []
    assert "`val_`" in explained


@pytest.mark.parametrize("path", PAGES[1:], ids=lambda p: os.path.relpath(p, ROOT))
def test_the_docs_cite_no_wheel_size_or_issue_number(path):
    # The README's wheel size is the one checked (tests/test_wheel.py); a
    # copy here goes stale, and an issue number means nothing to a reader.
    text = read(path)
    assert re.findall(r"wheel.{0,200}?\d MB", text, re.DOTALL) == []
    assert re.findall(r"\bissues? #?\d+|#\d+\b", text, re.IGNORECASE) == []


def shell_commands(paths=PAGES):
    """Each distinct shell command of the pages (continuations joined,
    comments dropped), as a list of words."""
    found = {}
    for path in paths:
        for block in SHELL.findall(read(path)):
            for line in block.replace("\\\n", " ").splitlines():
                words = shlex.split(line, comments=True)
                if words:
                    found.setdefault(shlex.join(words), words)
    return list(found.values())


def _first_words(words, table):
    command = " ".join(words)
    return next((key for key in table if command.startswith(key)), None)


def test_every_shell_command_runs_or_says_why_not():
    commands = shell_commands()
    assert any(words[:3] == ["python", "-m", "zoo"] for words in commands)
    for words in commands:
        skipped = _first_words(words, NOT_RUN)
        assert skipped or words[0] == "python", (
            f"{shlex.join(words)}: run it or say why not"
        )


def _runs_and_parses():
    """The commands to run, and those only parsed: of the commands that name
    the same verb and preset (their first five words), the one with the most
    words runs; the others differ from it in flags, which the CLI's parser
    must accept (a `train` of two steps is ~100 s, and the pages show it three
    times)."""
    runnable = [w for w in shell_commands() if not _first_words(w, NOT_RUN)]
    longest = {}
    for words in runnable:
        key = tuple(words[:5])
        if len(words) > len(longest.get(key, ())):
            longest[key] = words
    run = [w for w in runnable if longest[tuple(w[:5])] is w]
    return run, [w for w in runnable if longest[tuple(w[:5])] is not w]


SHELL_RUN, SHELL_PARSED = _runs_and_parses()


def test_each_shell_command_runs_or_shares_a_run():
    run, parsed = _runs_and_parses()
    assert run and len(run) + len(parsed) == len(
        [w for w in shell_commands() if not _first_words(w, NOT_RUN)]
    )
    for words in parsed:
        assert any(w[:5] == words[:5] and len(w) > len(words) for w in run)


@pytest.mark.parametrize("words", SHELL_PARSED, ids=shlex.join)
def test_shell_command_parses(words):
    import importlib

    from zoo import registry
    from zoo.cli import build_parser

    try:
        args, rest = build_parser().parse_known_args(words[3:])
        if args.command == "train":  # the family's recipe parses the rest
            recipe = importlib.import_module(registry.get(args.model).train_module)
            recipe.parse_args(rest)
        else:
            assert not rest, f"{shlex.join(words)}: unrecognized {rest}"
    except SystemExit as stop:  # argparse's answer to a bad flag or value
        pytest.fail(f"{shlex.join(words)}: the parser refused it ({stop})")


@pytest.mark.slow
@pytest.mark.tensorflow_only
@pytest.mark.parametrize("words", SHELL_RUN, ids=lambda words: shlex.join(words[:5]))
def test_shell_command_runs(words, tmp_path):
    needed = SHELL_NEEDS.get(_first_words(words, SHELL_NEEDS))
    if needed and not os.path.exists(needed):
        pytest.skip(f"needs the full data set in {needed}")
    os.symlink(os.path.join(ROOT, "examples"), tmp_path / "examples")
    limits = LIMITS.get(_first_words(words, LIMITS), [])
    env = {k: v for k, v in os.environ.items() if k not in LOUD}
    env["PYTHONPATH"] = ROOT
    result = subprocess.run(
        [sys.executable, *words[1:], *limits],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip()
    if words[3] in QUIET_VERBS:  # the answer, and the project's warnings only
        err = result.stderr.splitlines()
        assert [line for line in err if not line.startswith("warning: ")] == []
    for flag in ("--plot", "--out"):
        if flag in words:
            assert os.path.exists(tmp_path / words[words.index(flag) + 1])
