#!/usr/bin/env python3
"""bn_bf16_ab.py CSV — summary of bench/bn_bf16_ab.sh: per net, the median over rounds of each ratio taken within
one round (side by side): batch norm's forward and backward compute ms, bf16 / fp32 for each build, and build B / A
for each precision; with the rounds' load averages. Ratios only: absolute times move with the machine's load."""
import csv
import statistics
import sys
from collections import defaultdict


def main():
    if len(sys.argv) != 2:
        print("usage: bench/bn_bf16_ab.py CSV", file=sys.stderr)
        return 2
    rows = defaultdict(dict)  # (net, round) -> (build, precision) -> row
    loads = defaultdict(list)
    with open(sys.argv[1], newline="") as f:
        for r in csv.DictReader(f):
            rows[(r["net"], int(r["round"]))][(r["build"], r["precision"])] = r
            loads[r["net"]].append(float(r["load1"]))
    nets = sorted({n for n, _ in rows})
    print("| net | ratio | BN fwd | BN bwd | BN fwd+bwd | images/s | rounds | load (min-max) |")
    print("|---|---|--:|--:|--:|--:|--:|---|")
    pairs = [("bf16 / fp32, build A", ("A", "bf16"), ("A", "fp32")),
             ("bf16 / fp32, build B", ("B", "bf16"), ("B", "fp32")),
             ("B / A, fp32", ("B", "fp32"), ("A", "fp32")),
             ("B / A, bf16", ("B", "bf16"), ("A", "bf16"))]
    for net in nets:
        rounds = sorted(r for n, r in rows if n == net)
        for name, num, den in pairs:
            q = defaultdict(list)
            for r in rounds:
                d = rows[(net, r)]
                if num not in d or den not in d:
                    continue
                a, b = d[num], d[den]
                fa, ba, fb, bb = (float(a["bn_fwd_ms"]), float(a["bn_bwd_ms"]), float(b["bn_fwd_ms"]),
                                  float(b["bn_bwd_ms"]))
                q["fwd"].append(fa / fb)
                q["bwd"].append(ba / bb)
                q["sum"].append((fa + ba) / (fb + bb))
                q["ips"].append(float(a["images_per_s"]) / float(b["images_per_s"]))
            if not q:
                continue
            med = {k: statistics.median(v) for k, v in q.items()}
            print(f"| {net} | {name} | {med['fwd']:.3f} | {med['bwd']:.3f} | {med['sum']:.3f} | {med['ips']:.3f} | "
                  f"{len(q['fwd'])} | {min(loads[net]):.1f}-{max(loads[net]):.1f} |")
    print()
    print("| net | build | precision | BN fwd ms (median) | BN bwd ms (median) | images/s (median) |")
    print("|---|---|---|--:|--:|--:|")
    for net in nets:
        for key in [("A", "fp32"), ("A", "bf16"), ("B", "fp32"), ("B", "bf16")]:
            v = [d[key] for (n, _), d in rows.items() if n == net and key in d]
            if v:
                print(f"| {net} | {key[0]} | {key[1]} | {statistics.median(float(x['bn_fwd_ms']) for x in v):.1f} | "
                      f"{statistics.median(float(x['bn_bwd_ms']) for x in v):.1f} | "
                      f"{statistics.median(float(x['images_per_s']) for x in v):.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
