#!/usr/bin/env bash
# Run 77 (2026-12-05): run 76's KQ (K a step ahead of V in non-causal two-consumer d128 kernels and TF32; the next
# tile's Q loaded into a second buffer as a tile starts, 16-bit non-causal two-consumer d128 kernels; landed)
# against main in the same call, and issue 6's acceptance cells on KQ with torch (cuDNN, flash) and JAX (cuDNN,
# XLA) in the same call. Cold compile_s (the bench's fresh cache); then the [fwd] GPU tests while time is left.
# carry [".dist", ".dist-KQ"] (.dist-KQ: main at 84ea3fc); ~580 s.
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
before() { [ "$(el)" -lt "$1" ]; }
O=$OUT/run77; mkdir -p $O
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > $O/gpu.txt 2>&1
pack() { tar czf $OUT/run77-$1.tgz -C $O . && rm -f $O/*; }
D="--dtypes bfloat16 --head-dims 128 --seqs 1500,3000,4096,8192 --causal 0 --modes fwd"
S="--dtypes bfloat16 --head-dims 64 --seqs 4096 --causal 0 --modes fwd"
K="--dtypes bfloat16 --head-dims 128 --seqs 8192 --causal 1 --modes fwd"
Q="--dtypes bfloat16 --head-dims 128 --seqs 600 --seq-k 1500,3000 --causal 0 --modes fwd"
T="--dtypes float32 --head-dims 128 --seqs 8192 --causal 0 --modes fwd"
E="--dtypes bfloat16 --head-dims 64,128 --seqs 1024,2048 --causal 0 --modes fwd"
F="--dtypes bfloat16 --head-dims 128 --seqs 4096 --causal 0 --modes fwd"
fj() {  # pass, config, groups...
  local p=$1 c=$2; shift 2
  local dist=.dist; [ $c != main ] && dist=.dist-$c
  for g in "$@"; do
    before ${DEADLINE:-500} || return
    timeout 60 $dist/bin/flashjit-bench ${!g} --tag $c --out $O/$c-$g-p$p.json > $O/$c-$g-p$p.out 2>&1 \
      || echo "$c $g pass $p failed $?"
  done
}
fj 1 KQ D S K Q T E; fj 1 main D T E
echo "flashjit pass 1 (t=$(el))"; grep -h "TFLOP/s (" $O/*-p1.out | awk '{print $4, $5, $6, $(NF-3)}'
pack p1
for g in D S K Q; do
  before 260 && { timeout 80 python3 bench/peers.py --framework torch --impls torch_cudnn,torch_flash ${!g} \
    --out $O/torch-$g.json > $O/torch-$g.out 2>&1; echo "torch $g exit $? (t=$(el))"; }
done
before 290 && { timeout 60 python3 bench/peers.py --framework torch --impls torch_cudnn,torch_flash,torch_efficient \
  --torch-tf32 $T --out $O/torch-T.json > $O/torch-T.out 2>&1; echo "torch T exit $? (t=$(el))"; }
grep -h "TFLOP" $O/torch-*.out | tail -20
pack torch
fj 2 main D E; fj 2 KQ D E; fj 3 KQ F; fj 3 main F; fj 4 main F; fj 4 KQ F
echo "flashjit passes 2-4 (t=$(el))"
pack p2
before 480 && { timeout $(( 560 - $(el) )) python3 bench/peers.py --framework jax --impls jax_cudnn,jax_xla $F \
  --out $O/jax-F.json > $O/jax-F.out 2>&1; echo "jax F exit $? (t=$(el))"; grep -h "TFLOP" $O/jax-F.out | tail -4; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv >> $O/gpu.txt 2>&1
left=$(( 580 - $(el) ))
if [ $left -gt 60 ]; then  # the landed build's [fwd] GPU tests, warm cache
  .dist-KQ/bin/flashjit-warmup --grid all --arch sm90 --list 2>/dev/null | grep '^fwd' > $O/fwd-specs.txt
  FLASHJIT_CACHE_DIR=/tmp/fjc-tests .dist-KQ/bin/flashjit-warmup -j16 $(cat $O/fwd-specs.txt) > $O/warmup.txt 2>&1
  FLASHJIT_CACHE_DIR=/tmp/fjc-tests timeout $(( 580 - $(el) )) .dist-KQ/bin/flashjit_gpu_tests "[fwd]" --durations yes \
    > $O/fwd-tests.txt 2>&1
  echo "[fwd] exit $? (t=$(el))"; tail -2 $O/fwd-tests.txt
fi
pack end
