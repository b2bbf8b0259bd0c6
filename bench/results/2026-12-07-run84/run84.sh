#!/usr/bin/env bash
# Run 84 (2026-12-07): P, the padded two-consumer kernels taking a tile's partial K/V tile first (kPartialFirst:
# its S and softmax 96 keys wide where it holds that few keys, outside the main loop), which replaces run 82's N
# (narrow copies of the last step, whose cold compile broke issue 6's 1.5 s bar in run 83).
# 1. the new partial-tile GPU test on P (.dist): the name as run then held a comma, which Catch2 reads as two names,
#    so this step ran no test (the test ran in step 3);
# 2. rounds (those that start before t = 100 s: three ran) of bf16 B4 H8 d128 non-causal 600/1500/3000 (padded: the
#    changed kernel) and 4096 (even: the same kernel in both builds, a control), P and main (N, .dist-main), main
#    first in round 2, each flashjit run on an empty cache (compile_s cold every round), torch cuDNN and flash beside;
# 3. every [fwd] GPU test on P within 230 s (the last case, which runs none of the changed kernels, was cut off);
# 4. if it can start before t = 300 s (it could not), issue 6's other acceptance cells on P.
# carry [".dist", ".dist-main"], timeout 410 (the session's device time was nearly spent on failed machine starts);
# ran in 340 s on an H100. Written out inline when it ran; since rewritten onto device_prelude.sh's ab_round,
# fwd_tests and accept_cells, which run the same commands.
set -uo pipefail
source bench/device_prelude.sh run84
gpu_line
warm_fwd
fwd_tests tests1 60 "forward: the partial K/V tile first, at each width the padded Hopper kernels run it"
D="--dtypes bfloat16 --head-dims 128 --seqs 600,1500,3000,4096 --causal 0 --modes fwd"
ab_rounds 3 100 D
fwd_tests fwdtests 230
before 300 && accept_cells
gpu_line
pack end
