"""The zoo's version (`zoo.__version__`), in a module of its own.

Any zoo module may read it (the server names it in its metadata) without
importing the `zoo` package, which imports every family.

Example:
>>> from zoo.version import __version__
>>> import zoo
>>> zoo.__version__ == __version__
True
"""

__version__ = "0.1.0"
