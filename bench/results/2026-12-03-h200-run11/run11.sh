#!/usr/bin/env bash
# Device run 11: tests not yet run on a GPU (TF32 graph capture, d256 Hopper), racecheck, d256 timing vs mma.sync and torch.
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
B=.dist/bin; O=$OUT/r11; mkdir -p $O
export FLASHJIT_CACHE_DIR=/tmp/fjc11
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader | tee $O/gpu.txt
timeout 120 $B/flashjit_gpu_tests "forward: f32 on the Hopper kernel captured in a CUDA graph*" -r compact > $O/graph.txt 2>&1; echo "graph exit $? (t=$(el))"; tail -3 $O/graph.txt
timeout 150 $B/flashjit_gpu_tests "forward: head_dim 256 on the Hopper kernel*" -r compact > $O/d256.txt 2>&1; echo "d256 exit $? (t=$(el))"; grep -E "FAILED|failed" -A4 $O/d256.txt | head -30; tail -3 $O/d256.txt
G="--dtypes bfloat16 --head-dims 256 --seqs 8192,4096,3000,1500,600 --causal 0,1 --modes fwd --target-ms 15 --reps 5"
FLASHJIT_FWD_TILE=bm128_bn64_w12_s2_wg timeout 120 $B/flashjit-bench $G --out $O/d256_wg.json > $O/d256_wg.txt 2>&1; echo "d256 wg exit $? (t=$(el))"; tail -12 $O/d256_wg.txt
timeout 120 $B/flashjit-bench $G --no-check --out $O/d256_mma.json > $O/d256_mma.txt 2>&1; echo "d256 mma exit $? (t=$(el))"; tail -12 $O/d256_mma.txt
timeout 150 python3 bench/peers.py --framework torch --impls torch_flash,torch_cudnn $G --out $O/d256_torch.json > $O/d256_torch.txt 2>&1; echo "torch exit $? (t=$(el))"; tail -22 $O/d256_torch.txt
timeout 200 /usr/local/cuda/bin/compute-sanitizer --tool racecheck $B/flashjit_gpu_tests "[sanitize]" > $O/racecheck.txt 2>&1; echo "racecheck exit $? (t=$(el))"; tail -4 $O/racecheck.txt
tar czf $OUT/r11.tgz -C $OUT r11 && echo packed
