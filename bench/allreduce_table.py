#!/usr/bin/env python3
"""allreduce_table.py — bench/allreduce_bench.sh's CSV as markdown tables (docs/NETWORK.md).

    bench/allreduce_table.py FILE.csv [--tol 0.15]

One table per rate: a row per variant and host count, a column per size; each cell is the
measured time per all-reduce and simulated/measured, in bold where it is outside 1 +- tol.
"""
import argparse
import csv
from collections import OrderedDict


def human(b):
    for unit, k in (("MiB", 2**20), ("KiB", 2**10)):
        if b >= k and b % k == 0:
            return f"{b // k} {unit}"
    return f"{b} B"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--tol", type=float, default=0.15)
    a = ap.parse_args()
    rows = list(csv.DictReader(open(a.csv)))
    rates = list(OrderedDict.fromkeys(r["rate"] for r in rows))
    sizes = sorted({int(r["size_bytes"]) for r in rows})
    for rate in rates:
        sel = [r for r in rows if r["rate"] == rate]
        keys = list(OrderedDict.fromkeys((r["variant"], int(r["hosts"])) for r in sel))
        keys.sort(key=lambda k: (k[1], ["tree", "ring", "rhd"].index(k[0])))
        n_in = sum(1 for r in sel if abs(float(r["ratio"]) - 1) <= a.tol)
        print(f"\n**rate {rate}** ({n_in} of {len(sel)} cells within ±{a.tol:.0%}): measured ms per all-reduce · simulated/measured\n")
        print("| variant | hosts | " + " | ".join(human(s) for s in sizes) + " |")
        print("|---|---|" + "---|" * len(sizes))
        for v, h in keys:
            cells = []
            for s in sizes:
                m = [r for r in sel if r["variant"] == v and int(r["hosts"]) == h and int(r["size_bytes"]) == s]
                if not m:
                    cells.append("–")
                    continue
                ms, ratio = float(m[-1]["measured_s"]) * 1e3, float(m[-1]["ratio"])
                rs = f"{ratio:.2f}"
                if abs(ratio - 1) > a.tol:
                    rs = f"**{rs}**"
                cells.append(f"{ms:.4g} · {rs}")
            print(f"| {v} | {h} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
