#!/bin/bash
# Session 25's second GPU command (issue #39): the JAX rows of the device table
# after the Triton kernel replaced the chunked loop (no mask, causal).
python3 -m pip install -q --no-index --no-deps --target .site .whl/*.whl && export PYTHONPATH=$PWD/.site:$PWD
timeout 280 python3 benchmarks/attention_devices.py --backends jax --repeats 3 --jsonl $OUT/devices.jsonl --json $OUT/devices.json > $OUT/devices.md 2> $OUT/devices.err; echo "devices rc $?"
tail -22 $OUT/devices.md; grep -v "^I0000\|^WARNING" $OUT/devices.err | tail -5
