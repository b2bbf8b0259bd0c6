#!/usr/bin/env bash
# The main job. Sets up and builds, then:
#  - with a GPU: runs the benchmark (flashjit and the peers) into bench/results/;
#  - without one: warms the kernel cache with every spec of the seed benchmark
#    and prints compile_s per kernel (runtime metrics need a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  exec bash bench/run_all.sh --bin-dir build "$@"
fi
echo "run: no GPU on this machine: warming the kernel cache for the seed grid instead."
echo "run: runtime metrics (median_ms, TFLOP/s) need a GPU; compile_s below is real."
./build/flashjit-warmup --grid seed -j"$(nproc)" "$@"
