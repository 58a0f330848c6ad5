#!/usr/bin/env python3
"""rule_table.py — from dnn_op_bench --op conv2d --conv-algo winograd,onednn --precision bf16 output holding several
rounds (each round's table after a '# round' line), per 3x3 conv shape and pass: each round's Winograd ms / oneDNN ms
(> 1: oneDNN faster), for the passes ONEDNN_CONV_RULE decides (fwd with a bf16 y, as the step runs it; bwd_data;
bwd_filter).
  python3 rule_table.py OPBENCH.txt"""
import re, sys, collections
if len(sys.argv) != 2:
    sys.exit(__doc__)
rnd, t = 0, collections.defaultdict(dict)
for line in open(sys.argv[1]):
    if line.startswith("# round"):
        rnd += 1
        continue
    m = re.match(r"\|\s*conv2d\s*\|\s*(.*?)\s*\|\s*(\S+) (winograd|onednn) bf16( y)?\s*\|\s*([0-9.]+)", line)
    if not m or "3x3" not in m.group(1):
        continue
    shape, phase, algo, y, ms = m.group(1), m.group(2), m.group(3), m.group(4), float(m.group(5))
    if phase == "fwd" and not y:
        continue  # the step's convs write a bf16 y: the "fwd ... y" rows
    t[(shape, phase)].setdefault(rnd, {})[algo] = ms
print("| shape | pass | Winograd ms (rounds) | oneDNN ms (rounds) | Winograd/oneDNN per round |")
print("|---|---|---|---|---|")
for (shape, phase), by in t.items():
    rs = sorted(r for r in by if "winograd" in by[r] and "onednn" in by[r])
    if not rs:
        continue
    w = " ".join("%.3f" % by[r]["winograd"] for r in rs)
    o = " ".join("%.3f" % by[r]["onednn"] for r in rs)
    q = " ".join("%.2f" % (by[r]["winograd"] / by[r]["onednn"]) for r in rs)
    print("| %s | %s | %s | %s | %s |" % (shape, phase, w, o, q))
