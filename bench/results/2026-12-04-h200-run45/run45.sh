#!/usr/bin/env bash
# Run 45: three consumer warpgroups at bf16 head_dim 128 (192 rows, 64 keys per tile: 128 would spill at 160
# registers), two and four stages, against the policy tile (two consumers, 128 keys), through FLASHJIT_FWD_TILE
# (a build whose validation admits the tile). Non-causal and causal s1500-8192, two alternating passes.
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
O=$OUT/m192; mkdir -p $O
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 500 > $O/smi.csv 2>&1 &
SMI=$!
G="--dtypes bfloat16 --head-dims 128 --seqs 1500,3000,4096,8192 --causal 0,1 --modes fwd"
for pass in 1 2; do
  for v in base m192s4 m192s2; do
    case $v in
      base) E="";;
      m192s4) E="FLASHJIT_FWD_TILE=bm192_bn64_w16_s4_wg";;
      m192s2) E="FLASHJIT_FWD_TILE=bm192_bn64_w16_s2_wg";;
    esac
    env $E FLASHJIT_CACHE_DIR=/tmp/fjc-$v timeout 90 .dist/bin/flashjit-bench $G --tag $v --out $O/$v-p$pass.json > $O/$v-p$pass.txt 2>&1; echo "$v$pass exit $? (t=$(el))"
  done
done
kill $SMI
python3 - <<'PY'
import json,os,glob,statistics
O=os.environ['OUT']+'/m192'
t={}; err={}
for f in sorted(glob.glob(f'{O}/*.json')):
    n=os.path.basename(f)[:-5].split('-p')[0]
    if n=='ragged': continue
    for r in json.load(open(f))['results']:
        if r.get('tflops'):
            t.setdefault((r['causal'],r['seq']),{}).setdefault(n,[]).append(round(r['tflops']))
            err.setdefault(n,[]).append(r.get('rel_err'))
for k in sorted(t):
    med={n:statistics.median(v) for n,v in t[k].items()}
    print(k, t[k], ' '.join('%s/base %.3f' % (n, med[n]/med['base']) for n in med if n!='base'))
print({n:(min(v),max(v)) for n,v in err.items() if None not in v})
PY
tar czf $OUT/m192.tgz -C $OUT m192 && rm -rf $O && echo packed
