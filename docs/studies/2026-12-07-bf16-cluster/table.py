#!/usr/bin/env python3
"""table.py CSV... — the 2x2 tables of docs/studies/2026-12-07-bf16-cluster.md from simulate.sh's rows: per GPU math
(gpu_precision) and wire (grad_precision), 16-node images/s and scaling efficiency against the one-node run of the
same GPU math (images/s at N nodes / (N x one node's); the one-node run has no wire)."""
import csv
import sys

for path in sys.argv[1:]:
    rows = list(csv.DictReader(open(path)))
    one = {r["gpu_precision"]: float(r["images_per_s"]) for r in rows if r["nodes"] == "1"}
    print(f"{path}\n\n| GPU math | one node, images/s | wire | nodes | images/s | × one node | scaling efficiency | ms per step |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        if r["nodes"] == "1":
            continue
        n, ips, gp = int(r["nodes"]), float(r["images_per_s"]), r["gpu_precision"]
        base = one.get(gp)
        ms = 1000.0 * int(r["batch"]) / ips
        if base:
            print(f"| {gp} | {base:.1f} | {r['grad_precision']} | {n} | {ips:.1f} | {ips / base:.2f}× | {100 * ips / (n * base):.1f}% | {ms:.0f} |")
        else:
            print(f"| {gp} | — | {r['grad_precision']} | {n} | {ips:.1f} | — | — | {ms:.0f} |")
    print()
