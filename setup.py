"""Installs keras-attention-zoo: the `keras_attention` and `zoo` packages."""

import pathlib

from setuptools import find_packages, setup

HERE = pathlib.Path(__file__).parent

setup(
    name="keras-attention-zoo",
    version="0.1.0",
    description=(
        "Every classic attention mechanism as a tested Keras 3 layer, and a "
        "zoo of trained attention models."
    ),
    long_description=(HERE / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=find_packages(include=["keras_attention*", "zoo*"]),
    include_package_data=True,
    package_data={
        "zoo": [
            "data/samples/*",
            "*/presets/*/*",
            "*/presets/*/*/*",
            "*/presets/*/*/*/*",
        ]
    },
    install_requires=[
        "tensorflow==2.21.*",
        "keras>=3.15",
        "keras-hub>=0.32",
        "tensorflow-text==2.21.*",
        "sacrebleu>=2.4",
        "numpy",
        "matplotlib",
        "pysword>=0.2.8",
    ],
    extras_require={
        # torch 2.13: the third test pass. The project's registry serves it
        # as the CPU build (torch==2.13.0+cpu, 190 MB; `torch` alone
        # resolves to 2.14.1 with its CUDA wheels).
        "dev": [
            "pytest>=8",
            "pytest-xdist>=3.5",
            "ruff>=0.6",
            "jax[cpu]",
            "torch==2.13.*",
        ],
    },
    entry_points={"console_scripts": ["keras-attention = zoo.cli:main"]},
    classifiers=[
        "Programming Language :: Python :: 3",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
)
