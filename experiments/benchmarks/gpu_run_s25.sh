#!/bin/bash
# Session 25's one GPU command (issue #39): the float32 probe, then the device table.
python3 -m pip install -q --no-index --no-deps --target .site .whl/*.whl && export PYTHONPATH=$PWD/.site:$PWD
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee $OUT/gpu.txt
KERAS_BACKEND=jax python3 -c "import jax, torch, keras; print('jax', jax.__version__, 'torch', torch.__version__, 'keras', keras.__version__, jax.devices())" 2>&1 | tail -1 | tee -a $OUT/gpu.txt
lscpu | grep "Model name" | tee -a $OUT/gpu.txt
KERAS_BACKEND=jax timeout 200 python3 experiments/benchmarks/attention_gpu_probe.py --budget-s 170 \
  --names xla,chunked-2048x2048,chunked-4096x4096,chunked-8192x8192,chunked-2048x4096,chunked-4096x2048,pallas-128x128,pallas-64x64,pallas-64x64-tf32,pallas-128x64-tf32 \
  --out $OUT/probe.jsonl 2> $OUT/probe.err | grep -v '^{"T"' ; echo "probe rc $?"
timeout 320 python3 benchmarks/attention_devices.py --repeats 3 --jsonl $OUT/devices.jsonl --json $OUT/devices.json > $OUT/devices.md 2> $OUT/devices.err; echo "devices rc $?"
tail -45 $OUT/devices.md
cat $OUT/probe.jsonl | cut -c1-200
