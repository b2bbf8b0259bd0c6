#!/usr/bin/env python3
"""A run's table from its extracted tarballs (unpacked into one or more folders under the given directory;
flashjit rows in <config>-<group>-p<pass>.json, peers in any other JSON): per cell, each config's TFLOP/s in
pass 1 and 2, its ratio to main per pass, the peers of the same call and flashjit / each peer, rel_err and the
spec each config ran. A cell is also told apart by its precision (f32 rows: tf32 or ieee) and, where the same
cell ran in several groups (e.g. one with a tile forced), by its group. Runs 70 and 72-75 use it
(python3 ../2026-12-05-h200-run70/summarize.py <dir>)."""
import glob, json, os, statistics, sys

here = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
cells, errs, specs, peers = {}, {}, {}, {}
for f in sorted(glob.glob(os.path.join(here, "**", "*.json"), recursive=True)):
    try:
        rows = json.load(open(f))["results"]
    except Exception as e:  # a bench cut by its timeout leaves what it had written
        print("unreadable", f, e)
        continue
    for r in rows:
        if not r.get("tflops"):
            continue
        key = (r["dtype"], r["head_dim"], r["causal"], r["seq"], r.get("seq_k") or r["seq"], r.get("precision"))
        if r["impl"] == "flashjit":
            config, group, p = os.path.basename(f)[:-5].split("-")
            key += (group,)
            cells.setdefault(key, {}).setdefault(config, {})[p] = r["tflops"]
            errs.setdefault(config, []).append(r.get("rel_err") or 0)
            specs[(key, config)] = r.get("spec")
        elif not r["impl"].startswith("flashjit"):
            peers.setdefault(key[:5], {})[r["impl"]] = r["tflops"]  # peers' precision field is unreliable
# Groups only where a cell ran in more than one; peers match a cell by shape alone.
groups_of = {}
for key in cells:
    groups_of.setdefault(key[:-1], set()).add(key[-1])
# main first, then the other configs in file-name order
ORDER = ["main"] + sorted({c for b in cells.values() for c in b} - {"main"})
for key in sorted(cells):
    b = cells[key]
    seqs = f"{key[3]}" if key[3] == key[4] else f"{key[3]}x{key[4]}"
    precision = f" {key[5]}" if key[5] not in (None, "native") else ""
    group = f" [{key[6]}]" if len(groups_of[key[:-1]]) > 1 else ""
    line = [f"{key[0]}{precision} d{key[1]} {'causal' if key[2] else 'nc'} {seqs}{group}:"]
    for config in ORDER:
        if config not in b:
            continue
        ps = b[config]
        vals = "/".join(f"{ps[p]:.1f}" for p in sorted(ps))
        ratio = ""
        if config != "main" and "main" in b:
            rs = [ps[p] / b["main"][p] for p in sorted(ps) if p in b["main"]]
            ratio = " (" + "/".join(f"{x:.3f}" for x in rs) + ")"
        line.append(f"{config} {vals}{ratio}")
    best = max((statistics.median(b[c].values()), c) for c in b)
    for impl, t in sorted(peers.get(key[:5], {}).items()):
        line.append(f"{impl} {t:.1f} (best {best[1]}/{impl} {best[0] / t:.3f})")
    print("  ".join(line))
    print("    " + "  ".join(f"{c}: {specs[(key, c)]}" for c in ORDER if (key, c) in specs))
for config in ORDER:
    if config in errs:
        print(f"rel_err {config}: max {max(errs[config]):.2g}")
