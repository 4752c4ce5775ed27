"""`python -m zoo.cli`: the command line, as `keras-attention` (see `zoo.cli`)."""

import sys

from zoo.cli import main

if __name__ == "__main__":  # not when a doctest run imports this module
    sys.exit(main())
