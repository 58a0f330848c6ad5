#!/usr/bin/env python3
"""table.py CSV... : the study's table from simulate.sh's CSVs (docs/studies/2026-12-07-horovod-cluster.md).

Scaling efficiency as the Horovod paper defines it: images/s on N GPUs / (N x images/s on one GPU),
the one-GPU row (nodes=1, gpus=1) of the same CSV (or of the CSV named without -b64 and -nvlink);
per node: images/s per node / images/s of the 1-node row (4 GPUs). bd_*: the per-step breakdown
(shares of the workers' time) and the critical path's shares (bd_cp_*)."""
import csv
import os
import sys


def rows(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def main(paths):
    base1, base4 = {}, {}
    for p in paths:
        for r in rows(p):
            if r["nodes"] == "1":
                (base1 if r["gpus"] == "1" else base4)[os.path.basename(p)] = float(r["images_per_s"])
    print("| CSV | nodes x GPUs | GPUs | bucket MiB | images/s | scaling efficiency (vs 1 GPU) | per node (vs 1 node) "
          "| compute | all-reduce | update | idle | other | critical path: transfer | all-reduce | comm | sim wall s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for p in paths:
        name = os.path.basename(p)
        key = name.replace("-b64", "").replace("-nvlink", "")
        b1 = base1.get(name) or base1.get(key)
        b4 = base4.get(name) or base4.get(key)
        for r in rows(p):
            n, g = int(r["nodes"]), int(r["gpus"])
            ips = float(r["images_per_s"])
            eff = f"{ips / (n * g * b1):.1%}" if b1 else "-"
            pn = f"{ips / n / b4:.1%}" if b4 and g == 4 else "-"
            print(f"| {name} | {n} x {g} | {n * g} | {r['bucket_mb']} | {ips:.1f} | {eff} | {pn} | {r['bd_compute']} | "
                  f"{r['bd_allreduce']} | {r['bd_update']} | {r['bd_idle']} | {r['bd_other']} | {r['bd_cp_transfer']} | "
                  f"{r['bd_cp_allreduce']} | {r['bd_cp_comm']} | {r['sim_wall_s']} |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        sys.exit(2)
    main(sys.argv[1:])
