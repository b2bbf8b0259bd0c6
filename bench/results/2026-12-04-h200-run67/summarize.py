#!/usr/bin/env python3
"""Run 67's table from the extracted run67-1/ and run67-2/ folders: per cell, each build's TFLOP/s in
pass 1 and 2, its ratio to .dist (HEAD, "new") per pass, the peers of the same call and rel_err."""
import glob, json, os, statistics, sys

here = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
ORDER = ["new", "N", "M", "L", "W", "main"]
cells = {}  # (dtype, d, causal, seq) -> build -> pass -> tflops
errs, specs, peers = {}, {}, {}
for f in sorted(glob.glob(os.path.join(here, "run67-*", "*.json"))):
    name = os.path.basename(f)[:-5]
    try:
        rows = json.load(open(f))["results"]
    except Exception as e:  # a bench cut by its timeout leaves what it had written
        print("unreadable", f, e)
        continue
    for r in rows:
        if not r.get("tflops"):
            continue
        key = (r["dtype"], r["head_dim"], r["causal"], r["seq"])
        if r["impl"].startswith("flashjit"):
            if r["impl"] != "flashjit":
                continue  # flashjit_ieee
            build, _group, p = name.split("-")
            if build not in ORDER:
                continue  # the tail calls' forced tiles (A-<tile>-pN): their own table in README.md
            cells.setdefault(key, {}).setdefault(build, {})[p] = r["tflops"]
            errs.setdefault(build, []).append(r.get("rel_err") or 0)
            specs[(key, build)] = r.get("spec")
        else:
            peers.setdefault(key, {})[r["impl"]] = r["tflops"]
for key in sorted(cells):
    b = cells[key]
    line = [f"{key[0]} d{key[1]} {'causal' if key[2] else 'nc'} {key[3]}:"]
    for build in ORDER:
        if build not in b:
            continue
        ps = b[build]
        vals = "/".join(f"{ps[p]:.1f}" for p in sorted(ps))
        ratio = ""
        if build != "new" and "new" in b:
            rs = [ps[p] / b["new"][p] for p in ps if p in b["new"]]
            ratio = " (" + "/".join(f"{x:.3f}" for x in rs) + ")"
        line.append(f"{build} {vals}{ratio}")
    for impl, t in sorted(peers.get(key, {}).items()):
        best = statistics.median(b["N"].values()) if "N" in b else None
        line.append(f"{impl} {t:.1f}" + (f" (N/{impl} {best / t:.3f})" if best else ""))
    print("  ".join(line))
for build in ORDER:
    if build in errs:
        print(f"rel_err {build}: max {max(errs[build]):.2g}")
