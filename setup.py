"""Installs keras-attention-zoo: the `keras_attention` and `zoo` packages."""

import pathlib

from setuptools import find_namespace_packages, setup

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
    # keras-hub 0.32 installs only on Python 3.11+.
    python_requires=">=3.11",
    # The data folders (samples, presets and their assets) are declared as
    # namespace packages, so setuptools installs them without "Package would
    # be ignored" warnings; only the files below go in. Logs, figures, run
    # history and tests live outside the packages (experiments/, tests/).
    packages=find_namespace_packages(
        include=["keras_attention", "keras_attention.*", "zoo", "zoo.*"],
        exclude=["*.__pycache__"],
    ),
    include_package_data=False,
    package_data={
        "zoo": [
            "data/samples/*",
            "serving/page.html",
            "*/presets/*/*",
            "*/presets/*/*/*",
            "*/presets/*/*/*/*",
        ]
    },
    install_requires=[
        "tensorflow==2.21.*",
        "keras>=3.15",
        "keras-hub>=0.32",
        # 2.21.0 broke keras-hub's tokenizers (keras-hub #2979).
        "tensorflow-text>=2.21.1,<2.22",
        "sacrebleu>=2.4",
        "numpy",
        "matplotlib",
        "pysword>=0.2.8",
        # `zoo serve`'s /metrics, in Prometheus' text format.
        "prometheus-client>=0.20",
        # `zoo serve`'s gRPC port (zoo/serving/grpc_server.py): grpcio (which
        # TensorFlow requires already) and TF Serving's messages (its
        # PredictionService), which pin nothing TensorFlow does not.
        "grpcio>=1.60",
        "tensorflow-serving-api==2.21.*",
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
            # Triton's client: the KServe v2 binary tensor and gRPC tests
            # (it pins ml-dtypes<=0.5.4 and, for gRPC, protobuf<7, which
            # TensorFlow 2.21 (>=6.31.1) and JAX here accept).
            "tritonclient[http,grpc]",
        ],
        # benchmarks/decode_engines.py times the Transformer preset beside
        # CTranslate2 (tests/benchmarks skip without it); never the
        # library's dependency.
        "bench": ["ctranslate2>=4.5"],
    },
    entry_points={"console_scripts": ["keras-attention = zoo.cli:main"]},
    classifiers=[
        "Programming Language :: Python :: 3",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
)
