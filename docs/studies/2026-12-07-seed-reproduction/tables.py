#!/usr/bin/env python3
"""tables.py TAG — the study's 1 -> 16 core tables from seed-TAG-{e5-2667v2,here}[-1core].csv:
images/s, the speedup over 1 core with 1 chunk (strong scaling, the paper's measure) and over 1
core running the same C chunks (the same task shapes: the parallel speedup alone)."""
import csv
import os
import sys

D = os.path.dirname(os.path.abspath(__file__))
tag = sys.argv[1] if len(sys.argv) > 1 else ""


def load(name):
    path = os.path.join(D, f"seed{'-' + tag if tag else ''}-{name}.csv")
    out = {}
    if os.path.exists(path):
        for r in csv.DictReader(open(path)):
            out[(r["net"], int(r["cores"]), int(r["chunks"]))] = r
    return out


for cpu in ("e5-2667v2", "here"):
    multi, one = load(cpu), load(cpu + "-1core")
    print(f"\n{cpu}:\n")
    print("| net (batch) | cores = chunks | images/s | vs 1 core, 1 chunk | 1 core, same chunks: images/s | vs 1 core, same chunks | bd_compute | bd_idle |")
    print("|---|---|---|---|---|---|---|---|")
    for net in ("caffe_lenet", "cifar10_quick"):
        base = multi.get((net, 1, 1))
        for c in (1, 2, 4, 8, 16):
            r = multi.get((net, c, c))
            if not r:
                continue
            ips = float(r["images_per_s"])
            o = one.get((net, 1, c)) if c > 1 else base
            oips = float(o["images_per_s"]) if o else float("nan")
            print(f"| {net} ({r['batch']}) | {c} | {ips:.1f} | {ips / float(base['images_per_s']):.2f}x | "
                  f"{oips:.1f} | {ips / oips:.2f}x | {r.get('bd_compute', '')} | {r.get('bd_idle', '')} |")
