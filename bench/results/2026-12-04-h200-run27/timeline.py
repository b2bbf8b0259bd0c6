import sys,re
f=sys.argv[1]
tr={}; cta={}
for l in open(f):
    m=re.match(r'flashjit_trace (\d+) : (.*)',l)
    if m: tr[int(m.group(1))]=[int(x) for x in m.group(2).split()]
    m=re.match(r'flashjit_trace_cta (\d+) : (.*)',l)
    if m: cta[int(m.group(1))]=[int(x) for x in m.group(2).split()]
g0=min(v[0] for v in cta.values()); g1=max(v[1] for v in cta.values())
starts=sorted(v[0]-g0 for v in cta.values()); ends=sorted(v[1]-g0 for v in cta.values())
print(f"{f}: CTAs {len(cta)} kernel span {(g1-g0)/1000:.1f} us; CTA starts {starts[0]/1000:.2f}..{starts[-1]/1000:.2f} us; ends {ends[0]/1000:.1f}..{ends[-1]/1000:.1f} us (median {ends[len(ends)//2]/1000:.1f})")
for c in range(2):
    p=[x for x in tr[c*3] if x]; 
    for w in (1,2):
        v=[x for x in tr[c*3+w] if x]
        base=v[0]
        ntile=(len(v)-2)//9
        out=[]
        for k in range(ntile):
            e=v[9*k:9*k+9]
            out.append(dict(take=e[1]-e[0], q=e[2]-e[1], k0=e[3]-e[2], turn=e[4]-e[3], loop=e[5]-e[4], pvturn=e[6]-e[5], pv=e[7]-e[6], store=e[8]-e[7]))
        # gap from PV done to next turn0
        gaps=[v[9*(k+1)+4]-v[9*k+7] for k in range(ntile-1)]
        print(f" cta {c} w{w} tiles {ntile}:", '; '.join(' '.join(f"{a}={b}" for a,b in d.items()) for d in out[:3]), '| pvdone->next turn0', gaps[:4])
    # producer: per tile [K0, Q, V0, all]
    print(f" cta {c} producer (rel. to consumer1 start):", [[x-tr[c*3+1][0] for x in p[i:i+4]] for i in range(0,len(p),4)][:3])
