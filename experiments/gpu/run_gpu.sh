#!/usr/bin/env bash
# The lent GPU machine's run (#56 item 3), from the repository root.
#
# That machine has JAX and CUDA but no TensorFlow, Keras or network: the
# Keras wheel and its dependencies travel in .whl/ (absl-py, h5py,
# ml-dtypes, namex, optree, rich and theirs, as `pip download keras` lists
# them; keras-hub is not needed), with pysword (`import zoo` reads the Bible
# canon through it), and the Bible pairs as token ids in bible_arrays.npz,
# all made here beforehand:
#   python -m zoo.translation.arrays --out bible_arrays.npz
# Usage: MINUTES=5 bash experiments/gpu/run_gpu.sh [train_transformer_gpu.py flags]
set -euo pipefail
python3 -m pip install -q --no-index --no-deps --target .site .whl/*.whl
export PYTHONPATH=$PWD/.site:$PWD
export KERAS_BACKEND=jax
python3 experiments/gpu/train_transformer_gpu.py \
    --arrays "${ARRAYS:-bible_arrays.npz}" --minutes "${MINUTES:-5}" \
    --out "${OUT:-gpu_run}" "$@"
