#!/usr/bin/env bash
# Run 73 (2026-12-05): issue 6's acceptance cells on main (48ce6d2, .dist) with the peers in the same call.
# bf16 B4 H8 forward: d128 non-causal 1500/3000/4096/8192 (D), d64 non-causal 4096 (S), d128 causal 8192 (K),
# 600 queries over 1500/3000 keys (Q); float32 (TF32) d128 8192 (T). Two passes of flashjit; torch cuDNN and
# flash between them; JAX cuDNN and XLA last, while time is left. carry [".dist"]; ~300-440 s.
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
before() { [ "$(el)" -lt "$1" ]; }
O=$OUT/run73; mkdir -p $O
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > $O/gpu.txt 2>&1
pack() { tar czf $OUT/run73-$1.tgz -C $O . && rm -f $O/*; }
D="--dtypes bfloat16 --head-dims 128 --seqs 1500,3000,4096,8192 --causal 0 --modes fwd"
S="--dtypes bfloat16 --head-dims 64 --seqs 4096 --causal 0 --modes fwd"
K="--dtypes bfloat16 --head-dims 128 --seqs 8192 --causal 1 --modes fwd"
Q="--dtypes bfloat16 --head-dims 128 --seqs 600 --seq-k 1500,3000 --causal 0 --modes fwd"
T="--dtypes float32 --head-dims 128 --seqs 8192 --causal 0 --modes fwd"
fj() {
  for g in D S K Q T; do
    FLASHJIT_CACHE_DIR=/tmp/fjc-73 timeout 60 .dist/bin/flashjit-bench ${!g} --tag main --out $O/main-$g-p$1.json \
      > $O/main-$g-p$1.out 2>&1 || echo "main $g pass $1 failed $?"
  done
  echo "flashjit pass $1 (t=$(el))"; grep -h "TFLOP/s (" $O/main-*-p$1.out | awk '{print $4, $5, $6, $(NF-3)}'
  pack p$1
}
fj 1
for g in D S K Q; do
  before 250 && { timeout 80 python3 bench/peers.py --framework torch --impls torch_cudnn,torch_flash ${!g} \
    --out $O/torch-$g.json > $O/torch-$g.out 2>&1; echo "torch $g exit $? (t=$(el))"; }
done
before 290 && { timeout 60 python3 bench/peers.py --framework torch --impls torch_cudnn,torch_flash,torch_efficient \
  --torch-tf32 $T --out $O/torch-T.json > $O/torch-T.out 2>&1; echo "torch T exit $? (t=$(el))"; }
grep -h "TFLOP" $O/torch-*.out | tail -20
pack torch
fj 2
before 350 && { timeout $(( 440 - $(el) )) python3 bench/peers.py --framework jax --impls jax_cudnn,jax_xla $D \
  --out $O/jax-D.json > $O/jax-D.out 2>&1; echo "jax D exit $? (t=$(el))"; grep -h "TFLOP" $O/jax-D.out | tail -8; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv >> $O/gpu.txt 2>&1
pack end
