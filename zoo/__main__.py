"""`python -m zoo`: the command-line entry point (see `zoo.cli`)."""

import sys

from zoo.cli import main

sys.exit(main(prog="python -m zoo"))
