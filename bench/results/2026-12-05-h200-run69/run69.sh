#!/usr/bin/env bash
# Run 69: the landed build (run 67's variant N: P V wait below the softmax, lazy O rescaling, Q's address through a
# shuffle; 16-bit d128 non-causal back to 128 keys per tile from 8192 keys) against the peers in the same call.
# One call, carry [".dist"]: the seed-grid long/ragged GPU test, then issue 6's cells twice (H: bf16 d64/d128
# non-causal 1500-8192, K: causal d128 8192, F: TF32 d128) with torch cuDNN (H, K) and JAX XLA (F) between the
# passes. Writes straight into $OUT (a cut call still returns what it finished); the device returns at most
# 8 files, so each stage's files are packed as they finish. `run69.sh short`: one pass of H and K, torch cuDNN.
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
O=$OUT/run69; mkdir -p $O
H="--dtypes bfloat16 --head-dims 64,128 --seqs 1500,3000,4096,8192 --causal 0 --modes fwd"
K="--dtypes bfloat16 --head-dims 128 --seqs 8192 --causal 1 --modes fwd"
F="--dtypes float32 --head-dims 128 --seqs 600,1500,8192 --causal 0 --modes fwd"
pack() { tar czf $OUT/run69-$1.tgz -C $O . && rm -f $O/*; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > $O/gpu.txt 2>&1
if [ "${1:-}" = short ]; then  # ~150 s: one pass of the bf16 cells (H, K), then torch cuDNN on them
  for g in H K; do
    FLASHJIT_CACHE_DIR=/tmp/fjc timeout 70 .dist/bin/flashjit-bench ${!g} --out $O/flashjit-$g-p1.json > $O/flashjit-$g-p1.out 2>&1 || echo "$g failed $?"
  done
  echo "flashjit (t=$(el))"; grep -h "TFLOP/s (" $O/flashjit-*-p1.out | awk '{print $4, $5, $6, $(NF-3), $(NF-2)}'
  pack p1
  timeout 80 python3 bench/peers.py --framework torch --impls torch_cudnn $H --out $O/torch-H.json > $O/torch-H.out 2>&1; echo "torch H exit $? (t=$(el))"
  timeout 30 python3 bench/peers.py --framework torch --impls torch_cudnn $K --out $O/torch-K.json > $O/torch-K.out 2>&1; echo "torch K exit $? (t=$(el))"
  grep -h "TFLOP" $O/torch-*.out | tail -12
  pack torch
  exit 0
fi
FLASHJIT_CACHE_DIR=/tmp/fjc timeout 90 .dist/bin/flashjit_gpu_tests "forward: long and ragged sequences of the seed grid" -r compact -d yes > $O/seed-grid-test.txt 2>&1
echo "seed-grid test exit $? (t=$(el))"; tail -2 $O/seed-grid-test.txt
pass() {
  for g in H K F; do
    FLASHJIT_CACHE_DIR=/tmp/fjc timeout 90 .dist/bin/flashjit-bench ${!g} --out $O/flashjit-$g-p$1.json > $O/flashjit-$g-p$1.out 2>&1 || echo "$g pass $1 failed $?"
  done
  echo "pass $1 (t=$(el))"; grep -h "TFLOP/s (" $O/flashjit-*-p$1.out | awk '{print $3, $4, $5, $6, $(NF-2)}'
  pack p$1
}
pass 1
timeout 100 python3 bench/peers.py --framework torch --impls torch_cudnn $H --out $O/torch-H.json > $O/torch-H.out 2>&1; echo "torch H exit $? (t=$(el))"
timeout 40 python3 bench/peers.py --framework torch --impls torch_cudnn $K --out $O/torch-K.json > $O/torch-K.out 2>&1; echo "torch K exit $? (t=$(el))"
pack torch
pass 2
[ "$(el)" -lt 330 ] && { timeout 70 python3 bench/peers.py --framework jax --impls jax_xla $F --out $O/jax-F.json > $O/jax-F.out 2>&1; echo "jax F exit $? (t=$(el))"; pack jax; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv >> $O/gpu.txt 2>&1
pack end
