#!/usr/bin/env bash
# Run 79 (2026-12-06): issue 6's acceptance cells on main (cb36890: K a step ahead of V and the next tile's Q in a
# second buffer, landed in 84ea3fc) with torch (cuDNN, flash) and JAX (cuDNN, XLA) in the same call on the H200;
# then an A/B at d128 non-causal 4096/8192 of run 78's variants L (lse after O's store) and S (K and Q ahead in the
# split tile) against main; then main's [fwd] GPU tests, and L's if L beat main in every A/B cell.
# bf16 B4 H8 forward. carry [".dist", ".dist-L", ".dist-S"] (.dist = main; .dist-L/-S = main + one run 78 patch).
# ~420-540 s (SKIP_AB=1: ~250 s); every part packs its own tarball, so a call cut short keeps what it finished.
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
before() { [ "$(el)" -lt "$1" ]; }
O=$OUT/run79; mkdir -p $O
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > $O/gpu.txt 2>&1
pack() { tar czf $OUT/run79-$1.tgz -C $O . && rm -f $O/*; }
D="--dtypes bfloat16 --head-dims 128 --seqs 1500,3000,4096,8192 --causal 0 --modes fwd"
S="--dtypes bfloat16 --head-dims 64 --seqs 4096 --causal 0 --modes fwd"
K="--dtypes bfloat16 --head-dims 128 --seqs 8192 --causal 1 --modes fwd"
Q="--dtypes bfloat16 --head-dims 128 --seqs 600 --seq-k 1500,3000 --causal 0 --modes fwd"
T="--dtypes float32 --head-dims 128 --seqs 8192 --causal 0 --modes fwd"
F="--dtypes bfloat16 --head-dims 128 --seqs 4096 --causal 0 --modes fwd"
G="--dtypes bfloat16 --head-dims 128 --seqs 4096,8192 --causal 0 --modes fwd"
fj() {  # pass, config, groups... (main's pass 1 cold: its compile_s is the acceptance's)
  local p=$1 c=$2; shift 2
  local dist=.dist; [ $c != main ] && dist=.dist-$c
  for g in "$@"; do
    before ${DEADLINE:-400} || return
    local tile=""; [ $g = Gsk ] && tile=bm128_bn128_w12_s2_wg_sk
    local grp=$g; [ $g = Gsk ] && grp=F
    FLASHJIT_FWD_TILE=$tile FLASHJIT_CACHE_DIR=/tmp/fjc-$c timeout 60 $dist/bin/flashjit-bench ${!grp} --tag $c \
      --out $O/$c-$g-p$p.json > $O/$c-$g-p$p.out 2>&1 || echo "$c $g pass $p failed $?"
  done
}
fj 1 main D S K Q T
echo "flashjit pass 1 (t=$(el))"; grep -h "TFLOP/s (" $O/main-*-p1.out | awk '{print $4, $5, $6, $(NF-3)}'
pack p1
for g in D S K Q; do
  before 200 && { timeout 80 python3 bench/peers.py --framework torch --impls torch_cudnn,torch_flash ${!g} \
    --out $O/torch-$g.json > $O/torch-$g.out 2>&1; echo "torch $g exit $? (t=$(el))"; }
done
before 230 && { timeout 60 python3 bench/peers.py --framework torch --impls torch_cudnn,torch_flash,torch_efficient \
  --torch-tf32 $T --out $O/torch-T.json > $O/torch-T.out 2>&1; echo "torch T exit $? (t=$(el))"; }
grep -h "TFLOP" $O/torch-*.out | tail -20
pack torch
fj 2 main D S K Q T; fj 3 main F; fj 4 main F
echo "flashjit passes 2-4 (t=$(el))"; grep -h "TFLOP/s (" $O/main-*-p[234].out | awk '{print $4, $5, $6, $(NF-3)}'
before 280 && { timeout 90 python3 bench/peers.py --framework jax --impls jax_cudnn,jax_xla $G \
  --out $O/jax-G.json > $O/jax-G.out 2>&1; echo "jax G exit $? (t=$(el))"; grep -h "TFLOP" $O/jax-G.out | tail -4; }
pack p2
# A/B: L and S against main, interleaved, two passes (main's cache is warm; L's and S's compile in their first).
DEADLINE=380; [ -n "${SKIP_AB:-}" ] && DEADLINE=0  # SKIP_AB=1: acceptance and main's tests only
fj 5 main G; fj 5 L G; fj 5 S G Gsk; fj 5 main Gsk
fj 6 S Gsk G; fj 6 L G; fj 6 main G Gsk
echo "A/B (t=$(el))"
python3 - $O > $O/verdict.txt <<'PY'
import glob, json, os, sys
t = {}
for f in glob.glob(os.path.join(sys.argv[1], "*-G-p[56].json")):
    c, _, p = os.path.basename(f)[:-5].split("-")
    for r in json.load(open(f))["results"]:
        if r.get("tflops"): t[(c, p, r["seq"])] = r["tflops"]
for k in sorted(t): print(*k, f"{t[k]:.1f}")
wins = all(t.get(("L", p, s), 0) > t.get(("main", p, s), 1e9) for p in ("p5", "p6") for s in (4096, 8192))
print("L wins" if wins else "L does not win")
PY
cat $O/verdict.txt
pack ab
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv >> $O/gpu.txt 2>&1
# [fwd] GPU tests, warm caches (the warm-up compiles every forward spec with 16 jobs).
.dist/bin/flashjit-warmup --grid all --arch sm90 --list 2>/dev/null | grep '^fwd' > $O/fwd-specs.txt
tests() {  # config, deadline
  local c=$1 dist=.dist; [ $1 != main ] && dist=.dist-$1
  FLASHJIT_CACHE_DIR=/tmp/fjt-$c $dist/bin/flashjit-warmup -j16 $(cat $O/fwd-specs.txt) > $O/warmup-$c.txt 2>&1
  FLASHJIT_CACHE_DIR=/tmp/fjt-$c timeout $(( $2 - $(el) )) $dist/bin/flashjit_gpu_tests "[fwd]" --durations yes \
    > $O/fwd-tests-$c.txt 2>&1
  echo "[fwd] on $c exit $? (t=$(el))"; tail -2 $O/fwd-tests-$c.txt
}
tests main 470
tar xzf $OUT/run79-ab.tgz -O ./verdict.txt | grep -q "L wins" \
  && before 460 && tests L 575
pack end
