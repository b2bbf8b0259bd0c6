#!/usr/bin/env bash
# Run 85 (planned 2026-12-08, not run yet): R, run 84's kernel without its narrow step 0
# (partial-first-full-width.patch: the padded two-consumer kernels still take the partial K/V tile first, so the main
# loop has no mask, but step 0 runs 128 keys wide), before it lands. R compiles as fast as the even kernel (0.58 s
# against main's 0.74 s on the 2-core CPU machine; the even kernel 0.55 s), which is what issue 6's 1.5 s bar needs
# on a device host that compiles ~2x slower than that machine (run 84: main's padded kernel 1.47-1.79 s there).
# 0. the SASS of the cells' kernels as .dist loads them (cuobjdump: HGMMA and LDL/STL counts, sass.txt);
# 1. the partial-tile GPU test on R (.dist);
# 2. three rounds (those that start before t = 150 s) of bf16 B4 H8 d128 non-causal 600/1500/3000 (padded: the
#    changed kernel) and 4096 (even: the same kernel in both builds, a control), R and main (.dist-main), main first
#    in round 2, each flashjit run on an empty cache (compile_s cold every round), torch cuDNN and flash beside;
# 3. every [fwd] GPU test on R (run 84's host needed ~240 s; 230 s cut the last case off);
# 4. if it can start before t = 480 s, issue 6's other acceptance cells on R, one pass, torch beside;
# 5. if it can start before t = 525 s, causal d128 8192 on 128-key tiles (FLASHJIT_FWD_TILE), the fallback
#    if the 160-key kernel's compile_s nears 1.5 s (one pass, ~15 s; compare with stage 4's cell K);
# 6. if it can start before t = 545 s, three cold compiles of each cell's kernel (and the causal 128-key one) by
#    flashjit-warmup -j1 (~30 s).
# carry [".dist", ".dist-main"], timeout 590; every stage packs its own tarball.
set -uo pipefail
source bench/device_prelude.sh run85
gpu_line
warm_fwd
CELL_KERNELS="fwd_bf16_d128_noncausal_padded_sm90a_bm128_bn128_w12_s2_wg fwd_bf16_d128_noncausal_even_sm90a_bm128_bn128_w12_s2_wg
  fwd_bf16_d128_noncausal_even_sm90a_bm128_bn128_w12_s2_wg_sk fwd_bf16_d128_causal_padded_sm90a_bm128_bn160_w12_s2_wg
  fwd_bf16_d64_noncausal_padded_sm90a_bm192_bn128_w16_s4_wg_sk fwd_f32tf32_d128_noncausal_even_sm90a_bm128_bn64_w12_s2_wg"
sass_counts $CELL_KERNELS
fwd_tests tests1 60 "forward: the padded Hopper kernels take the partial K/V tile first at each width"
D="--dtypes bfloat16 --head-dims 128 --seqs 600,1500,3000,4096 --causal 0 --modes fwd"
ab_rounds 3 150 D
fwd_tests fwdtests 320
before 480 && accept_cells
# The fallback if the causal 160-key kernel's compile nears 1.5 s: causal 8192 on 128-key tiles, same call.
KF="--dtypes bfloat16 --head-dims 128 --seqs 8192 --causal 1 --modes fwd"
before 525 && { FLASHJIT_FWD_TILE=bm128_bn128_w12_s2_wg FLASHJIT_CACHE_DIR=$BENCH_CACHE timeout 40 \
  .dist/bin/flashjit-bench $KF --tag bn128 --out $O/bn128-K-p1.json > $O/bn128-K-p1.out 2>&1
  echo "bn128 K exit $? (t=$(el))"; grep -h "TFLOP/s (" $O/bn128-K-p1.out; pack causal128; }
before 545 && { compile_samples 3 $CELL_KERNELS fwd_bf16_d128_causal_even_sm90a_bm128_bn128_w12_s2_wg; pack compile; }
gpu_line
pack end
