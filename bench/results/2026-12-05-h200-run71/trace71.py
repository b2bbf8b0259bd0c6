#!/usr/bin/env python3
"""Reads run 71's traces (flashjit-bench stdout with FLASHJIT_TRACE=1 and the trace build): per CTA, consumer 0's
pieces of the 41st launch: [tile, n_begin, n_end] and clock64 at take, main loop done, epilogue done.
Usage: trace71.py FILE.out [...] (block_n 128: steps per tile from the row's sequence length)"""
import re
import statistics as st
import sys


def pieces_of(row):
    out = []
    for i in range(4, 124, 4):
        desc = row[i]
        if row[i + 1] == 0:
            break
        tile, nb, ne = desc >> 32, (desc >> 16) & 0xffff, desc & 0xffff
        if nb & 0x8000: nb -= 0x10000
        if ne & 0x8000: ne -= 0x10000
        out.append(dict(tile=tile, nb=nb, ne=ne, take=row[i + 1], loop=row[i + 2], done=row[i + 3]))
    return out


def main(path):
    rows = {}
    seq = None
    for line in open(path):
        m = re.search(r" s(\d+) (non)?causal fwd", line)
        if m and seq is None: seq = int(m.group(1))
        if line.startswith("trace "):
            head, vals = line.split(":", 1)
            rows[int(head.split()[1])] = [int(x) for x in vals.split()]
    if not rows:
        print(f"{path}: no trace"); return
    g0 = min(r[0] for r in rows.values()); g1 = max(r[1] for r in rows.values())
    ghz = st.median((r[3] - r[2]) / max(1, r[1] - r[0]) for r in rows.values())
    ends = sorted((r[1] - g0) / 1000 for r in rows.values())
    starts = sorted((r[0] - g0) / 1000 for r in rows.values())
    print(f"{path}: {len(rows)} CTAs, span {(g1 - g0) / 1000:.1f} us, clock {ghz:.3f} GHz; starts {starts[0]:.2f}..{starts[-1]:.2f} us;"
          f" ends min {ends[0]:.1f} median {ends[len(ends) // 2]:.1f} max {ends[-1]:.1f} us")
    whole_step, whole_epi, gaps = [], [], []
    per_cta = {}
    for cta, r in sorted(rows.items()):
        work = pieces_of(r)[:-1]  # the last take is the end marker
        prev_done = r[2]
        for p in work:
            gaps.append(p['take'] - prev_done)
            prev_done = p['done']
        per_cta[cta] = (work, r)
    # Steps per tile: a split kernel's head pieces end at it (n_end > 0); a
    # plain kernel's pieces are whole tiles (n_end -1), of ceil(seq / 128) steps.
    full_steps = max((p['ne'] for w, _ in per_cta.values() for p in w if p['ne'] > 0), default=None)
    if full_steps is None and seq:
        full_steps = (seq + 127) // 128  # block_n 128
    for w, r in per_cta.values():
        for k, p in enumerate(w):
            p['steps'] = (p['ne'] if p['ne'] >= 0 else full_steps) - p['nb']
            p['whole'] = p['nb'] == 0 and (p['ne'] < 0 or p['ne'] == full_steps)
            if p['whole'] and k > 0 and p['steps']:
                whole_step.append((p['loop'] - p['take']) / p['steps'])
                whole_epi.append(p['done'] - p['loop'])
    if not whole_step:
        print("  no whole tiles"); return
    cps = st.median(whole_step)
    print(f"  whole tiles (not first): {st.median(whole_step):.0f} cycles/step incl. start (q1 {st.quantiles(whole_step)[0]:.0f} q3 {st.quantiles(whole_step)[2]:.0f}),"
          f" epilogue {st.median(whole_epi):.0f} cycles; take gap {st.median(gaps):.0f}; steps per tile {full_steps}")
    kinds = {}
    for w, r in per_cta.values():
        for k, p in enumerate(w):
            if p['whole']: kind = 'first whole' if k == 0 else 'whole'
            elif p['nb'] > 0: kind = 'tail (saves)'
            else: kind = 'head (merges)'
            over = (p['done'] - p['take']) - p['steps'] * cps
            kinds.setdefault(kind, []).append((p['steps'], p['loop'] - p['take'], p['done'] - p['loop'], over))
    for kind, v in kinds.items():
        print(f"  {kind:14s} n={len(v):4d} steps median {st.median(x[0] for x in v):5.1f}, loop {st.median(x[1] for x in v):7.0f},"
              f" epilogue {st.median(x[2] for x in v):6.0f} (max {max(x[2] for x in v):6.0f}), over whole-step rate {st.median(x[3] for x in v):6.0f} cycles")
    # per CTA: finish time, steps, pieces
    fin = []
    for cta, (w, r) in per_cta.items():
        steps = sum(p['steps'] for p in w)
        fin.append((r[1] - g0, steps, len(w), cta))
    fin.sort()
    lastcta = fin[-1]
    print(f"  CTA steps: min {min(x[1] for x in fin)} max {max(x[1] for x in fin)}; pieces min {min(x[2] for x in fin)} max {max(x[2] for x in fin)};"
          f" last to end: CTA {lastcta[3]} ({lastcta[1]} steps); ideal (mean steps x rate) {st.mean(x[1] for x in fin) * cps / ghz / 1000:.1f} us")
    print(f"  span in steps at the whole-tile rate: {(g1 - g0) * ghz / cps:.1f} (mean CTA steps {st.mean(x[1] for x in fin):.1f},"
          f" max {max(x[1] for x in fin)})")


for f in sys.argv[1:]:
    main(f)
