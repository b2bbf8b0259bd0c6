#!/usr/bin/env bash
# Run 83 (2026-12-07): issue 6's acceptance cells on main with N landed (.dist), peers in the same call.
# bf16 B4 H8 forward: d128 non-causal 1500/3000/4096/8192 (D), d64 non-causal 4096 (S), d128 causal 8192 (K);
# float32 (TF32) d128 8192 (T). flashjit twice (the bench compiles cold in each pass: compile_s), torch cuDNN
# and flash between the passes (torch TF32 for T). carry [".dist"]; ran in 89 s on an H100 (README.md).
set -uo pipefail
source bench/device_prelude.sh run83
gpu_line
D="--dtypes bfloat16 --head-dims 128 --seqs 1500,3000,4096,8192 --causal 0 --modes fwd"
S="--dtypes bfloat16 --head-dims 64 --seqs 4096 --causal 0 --modes fwd"
K="--dtypes bfloat16 --head-dims 128 --seqs 8192 --causal 1 --modes fwd"
T="--dtypes float32 --head-dims 128 --seqs 8192 --causal 0 --modes fwd"
fj() { bench_pass .dist main $1 D S K T; pack p$1; }
fj 1
for g in D S K; do
  before 150 && { timeout 60 python3 bench/peers.py --framework torch --impls torch_cudnn,torch_flash ${!g} \
    --out $O/torch-$g.json > $O/torch-$g.out 2>&1; echo "torch $g exit $? (t=$(el))"; }
done
before 170 && { timeout 40 python3 bench/peers.py --framework torch --impls torch_flash,torch_efficient \
  --torch-tf32 $T --out $O/torch-T.json > $O/torch-T.out 2>&1; echo "torch T exit $? (t=$(el))"; }
grep -h "TFLOP/s (" $O/torch-*.out | awk '{print $2, $4, $5, $6, $(NF-3)}'
pack torch
before 200 && fj 2
gpu_line
pack end
