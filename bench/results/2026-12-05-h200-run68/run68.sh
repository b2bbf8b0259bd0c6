#!/usr/bin/env bash
# Run 68 (planned; no device was lent on 2026-12-05): the tile choices re-timed on the build that lands run 67's
# P V wait after the softmax (README.md says why). One device call:
#   bash bench/results/2026-12-05-h200-run68/run68.sh DIST      (DIST: .dist once a variant has landed, or
#   .dist-N before), carry [DIST].
# Every tile through FLASHJIT_FWD_TILE on one binary, two alternating passes, flashjit-bench's float64 check on
# (rel_err per row: some of these tiles are not the policy's, so no GPU test covers them). ~330 s.
set -uo pipefail
D=${1:-.dist}
[ -x $D/bin/flashjit-bench ] || { echo "run68: no $D/bin/flashjit-bench" >&2; exit 1; }
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
O=$OUT/run68; mkdir -p $O
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > $O/gpu.txt 2>&1
# group: bench flags, then the tiles it times (the policy picks one of them per length).
A="--dtypes bfloat16 --head-dims 128 --seqs 3000,4096,8192 --causal 0 --modes fwd"
A_TILES="bm128_bn128_w12_s2_wg bm128_bn144_w12_s2_wg bm128_bn160_w12_s2_wg bm128_bn176_w12_s2_wg"
C="--dtypes bfloat16 --head-dims 128 --seqs 4096,8192 --causal 1 --modes fwd"
C_TILES="bm128_bn128_w12_s2_wg bm128_bn160_w12_s2_wg bm128_bn176_w12_s2_wg"
S="--dtypes bfloat16 --head-dims 64 --seqs 1500,3000,4096,8192 --causal 0 --modes fwd"
S_TILES="bm128_bn192_w12_s3_wg bm192_bn128_w16_s4_wg bm192_bn128_w16_s4_wg_sk"
for pass in 1 2; do
  for g in A C S; do
    tiles=${g}_TILES
    for t in ${!tiles}; do
      [ "$(el)" -lt 540 ] || { echo "skipped $g $t pass $pass"; continue; }
      FLASHJIT_FWD_TILE=$t FLASHJIT_CACHE_DIR=/tmp/fjc-68 timeout 60 $D/bin/flashjit-bench ${!g} --tag $t \
        --out $O/$g-$t-p$pass.json > $O/$g-$t-p$pass.out 2>&1 || echo "$g $t pass $pass failed $?"
    done
    echo "$g pass $pass (t=$(el))"
  done
done
python3 - <<'PY' | tee $O/summary.txt
import glob, json, os, statistics
O = os.environ['OUT'] + '/run68'
t = {}
for f in sorted(glob.glob(f'{O}/*.json')):
    g, tile = os.path.basename(f).split('-')[:2]
    try: rows = json.load(open(f))['results']
    except Exception as e: print('bad', f, e); continue
    for r in rows:
        if r.get('tflops'):
            t.setdefault((g, r['head_dim'], r['causal'], r['seq']), {}).setdefault(tile, []).append(
                (round(r['tflops'], 1), r.get('rel_err'), r.get('spec')))
for k in sorted(t):
    med = {n: statistics.median(x[0] for x in v) for n, v in t[k].items()}
    best = max(med, key=med.get)
    print(k, ' | '.join(f"{n} {[x[0] for x in v]} rel_err {max((x[1] or 0) for x in v):.2g}"
                        for n, v in sorted(t[k].items())), '| best', best, ' '.join(
        f"{n}/best {med[n] / med[best]:.3f}" for n in sorted(med) if n != best))
PY
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv >> $O/gpu.txt 2>&1
tar czf $OUT/run68.tgz -C $OUT run68 && rm -rf $O && echo packed
