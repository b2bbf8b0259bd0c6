#!/usr/bin/env bash
# Run 35: query and key lengths that differ (the seed user's cross-attention shapes), bf16 B4 H8 non-causal,
# flashjit (main, .dist) beside torch cuDNN/flash and JAX cuDNN in the same run, then report.py. Carry [".dist"].
set -uo pipefail
O=$OUT/sqsk; mkdir -p $O
G="--dtypes bfloat16 --head-dims 64,128 --seqs 600,1500,3000 --seq-k 600,1500,3000 --causal 0 --modes fwd,fwd_bwd --target-ms 20 --reps 5"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 500 > $O/smi.csv 2>&1 &
SMI=$!
timeout 75 .dist/bin/flashjit-bench $G --max-seconds 60 --out $O/flashjit-sqsk.json > $O/flashjit-sqsk.out 2>&1; echo "flashjit exit $?"
timeout 60 python3 bench/peers.py --framework torch --impls torch_cudnn,torch_flash $G --max-seconds 50 --out $O/torch-sqsk.json > $O/torch-sqsk.out 2>&1; echo "torch exit $?"
timeout 60 python3 bench/peers.py --framework jax --impls jax_cudnn $G --max-seconds 50 --out $O/jax-sqsk.json > $O/jax-sqsk.out 2>&1; echo "jax exit $?"
kill $SMI
python3 bench/report.py $O/flashjit-sqsk.json $O/torch-sqsk.json $O/jax-sqsk.json --out-dir $O > $O/report.out 2>&1; echo "report exit $?"
tar czf $OUT/sqsk.tgz -C $OUT sqsk && echo packed
