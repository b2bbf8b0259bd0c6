#!/usr/bin/env bash
# Run 46: wider key tiles at bf16 head_dim 128, two consumers: 144, 160 (O apart, 231424 bytes) and 176 keys (O in
# the Q tile: no room beside two stages) against main (128), through FLASHJIT_FWD_TILE (validation admits them
# for 16-bit inputs in this build). Non-causal and causal s1500-8192, two alternating passes.
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
O=$OUT/wide; mkdir -p $O
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 500 > $O/smi.csv 2>&1 &
SMI=$!
G="--dtypes bfloat16 --head-dims 128 --seqs 1500,2048,3000,4096,8192 --causal 0,1 --modes fwd"
for pass in 1 2; do
  for v in base bn144 bn160 bn176; do
    case $v in
      base) E="";;
      bn144) E="FLASHJIT_FWD_TILE=bm128_bn144_w12_s2_wg";; bn160) E="FLASHJIT_FWD_TILE=bm128_bn160_w12_s2_wg";;
      bn176) E="FLASHJIT_FWD_TILE=bm128_bn176_w12_s2_wg";;
    esac
    env $E FLASHJIT_CACHE_DIR=/tmp/fjc-$v timeout 90 .dist/bin/flashjit-bench $G --tag $v --out $O/$v-p$pass.json > $O/$v-p$pass.txt 2>&1; echo "$v$pass exit $? (t=$(el))"
  done
done
kill $SMI
python3 - <<'PY'
import json,os,glob,statistics
O=os.environ['OUT']+'/wide'
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
tar czf $OUT/wide.tgz -C $OUT wide && rm -rf $O && echo packed
