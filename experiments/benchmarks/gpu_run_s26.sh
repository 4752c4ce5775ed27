#!/bin/bash
# Session 26's GPU command (issue #39), prepared on a CPU (no GPU was lent to
# session 26): the rows of what it put on JAX's Triton kernel, beside Keras's
# layers. JAX only (the PyTorch rows did not change). About 5 minutes.
# Carry `.whl/` (keras, namex, optree wheels) with the working tree.
python3 -m pip install -q --no-index --no-deps --target .site .whl/*.whl && export PYTHONPATH=$PWD/.site:$PWD
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee $OUT/gpu.txt
KERAS_BACKEND=jax python3 -c "import jax, keras; print('jax', jax.__version__, 'keras', keras.__version__, jax.devices())" 2>&1 | tail -1 | tee -a $OUT/gpu.txt
rows() {  # name, seconds, arguments of attention_devices.py
  local name=$1 seconds=$2
  shift 2
  timeout "$seconds" python3 benchmarks/attention_devices.py --backends jax --repeats 3 \
    --jsonl "$OUT/devices.jsonl" --json "$OUT/$name.json" "$@" > "$OUT/$name.md" 2> "$OUT/$name.err"
  echo "$name rc $?"
  grep -v "^I0000\|^WARNING" "$OUT/$name.err" | tail -3
}
# MultiHeadAttention, float32 and bfloat16, T 8,192 and 32,768: a key padding
# mask (the chunked loop: session 25's 1.62x / 1.69x, measured again here)
# beside one mask shared by queries and keys (segment ids on the Triton kernel).
rows mha 120 --lengths= --mask-lengths 8192,32768 --masks padding,shared-padding
# Attention(mode="soft", score="dot"), one head of 64, against
# keras.layers.Attention: no mask and a shared padding mask.
rows attention 100 --layers attention --lengths 8192,32768 --mask-lengths 8192,32768 \
  --masks shared-padding
# ImageSelfAttention on (1, side, side, 128) against the same block of Keras
# layers, float32: 90x90 (8,100 positions, padded to 8,192), 96x96 (9,216),
# 128x128 (16,384).
rows image 50 --layers image --dtypes float32 --image-sides 90,96,128
# The head widths the Triton kernel compiles for (TRITON_DEPTHS is 9-128 from
# the kernel's rules; 64 is measured above): 16, 128, 256, float32 and bfloat16,
# a shared padding mask over 2,000 positions (the padding path too).
KERAS_BACKEND=jax timeout 50 python3 experiments/benchmarks/triton_depth_probe.py --depths 16,128,256 \
  --out "$OUT/depths.jsonl" 2> "$OUT/depths.err" | cut -c1-220; echo "depths rc ${PIPESTATUS[0]}"
for name in mha attention image; do tail -n 10 "$OUT/$name.md"; done
