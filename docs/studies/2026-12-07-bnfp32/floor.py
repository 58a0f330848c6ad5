#!/usr/bin/env python3
"""floor.py KERNELS_CSV — per shape and phase of bench/bn_fp32_ab.sh's kernels.csv: build A's and B's time at batch 32
(median over the rounds), the memory-traffic floor (the phase's tensors of N32 C HW floats, each read or written once,
at the bandwidth of dnn_op_bench's memcpy at that tensor size: the row's %copy times its time), and the cache-warm time
(batch 2, whose tensors fit L2, scaled by 16 to 32 images)."""
import csv, statistics, sys
from collections import defaultdict
d = defaultdict(list)
for r in csv.DictReader(open(sys.argv[1])):
    if r["shape"].startswith("ResNet"):
        continue
    shp = r["shape"].split(" (")[0].split(" ", 1)[1]
    d[(r["who"], int(r["batch"]), shp, r["phase"])].append((float(r["gb_per_s"]), float(r["pct_copy"])))
print("| shape | phase | A ms (N32) | B ms (N32) | floor ms | A / floor | B / floor | cache-warm ms (N2 x 16) | A / cache-warm |")
print("|---|---|--:|--:|--:|--:|--:|--:|--:|")
for shp, C, HW in [("16x1024", 16, 1024), ("32x256", 32, 256), ("64x64", 64, 64)]:
    for ph, tensors in [("fwd", 2), ("fwd +relu", 2), ("bwd", 3), ("bwd +relu", 4)]:
        byt = tensors * 32 * C * HW * 4
        ms = lambda who, b: statistics.median(byt * b / 32 / g / 1e6 for g, _ in d[(who, b, shp, ph)])
        floor = statistics.median(byt / g / 1e6 * pc / 100 for g, pc in d[("A", 32, shp, ph)])
        a, b, w = ms("A", 32), ms("B", 32), ms("A", 2) * 16
        print(f"| {C}x{HW} | {ph} | {a:.4f} | {b:.4f} | {floor:.4f} | {a / floor:.2f} | {b / floor:.2f} | {w:.4f} | "
              f"{a / w:.2f} |")
