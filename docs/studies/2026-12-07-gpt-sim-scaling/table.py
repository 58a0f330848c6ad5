#!/usr/bin/env python3
"""The study's table from its CSVs (scripts/simulate.sh rows): per run, tokens/s, per GPU, the
per-node efficiency against the one-node run of the same net, GPU and samples per node, the
step breakdown (shares of the workers' time) and the memory per device."""
import csv, sys
rows = []
for f in sys.argv[1:]:
    rows += list(csv.DictReader(open(f)))
one = {}
for r in rows:
    if r["nodes"] == "1":
        one[(r["net"], r["gpu"], int(r["batch"]))] = float(r["tokens_per_s"])
print("| net | GPU, network | nodes | samples per GPU | tokens per step | all-reduce | bucket MiB | tokens/s | per GPU | per node vs 1 node | compute | all-reduce work | update | idle | other | GPU memory per device (activations) |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
CONTEXT = {"gpt2": 1024, "gpt2-xl": 1024, "gpt-nano": 128}
# by net, GPU, samples per GPU, nodes (one node first), all-reduce, bucket
rows.sort(key=lambda r: (r["net"], r["gpu"] != "h200", int(r["batch"]) // (int(r["nodes"]) * int(r["gpus"])),
                         int(r["nodes"]), r["allreduce"], float(r["bucket_mb"]) if r["bucket_mb"] not in ("", "-") else 0))
seen = set()
for r in rows:
    key = tuple(r[k] for k in ("net", "gpu", "network", "nodes", "batch", "allreduce", "bucket_mb", "tokens_per_s"))
    if key in seen:  # a configuration run twice (the simulation is deterministic: the same figures)
        continue
    seen.add(key)
    n, g = int(r["nodes"]), int(r["gpus"])
    b = int(r["batch"])
    tps = float(r["tokens_per_s"])
    ref = one.get((r["net"], r["gpu"], b // n))
    eff = f"{100 * tps / (n * ref):.1f}%" if ref else "—"
    T = CONTEXT[r["net"]]
    ar = r["allreduce"] if n > 1 else "—"
    bk = r["bucket_mb"] if n > 1 else "—"
    net = r["network"].upper() if n > 1 else "—"
    print(f"| {r['net']} | {r['gpu'].upper()}, {net} | {n} | {b // (n * g)} | {b * T:,} | {ar} | {bk} | {tps:,.0f} | "
          f"{tps / (n * g):,.0f} | {eff} | {r['bd_compute']} | {r['bd_allreduce']} | {r['bd_update']} | {r['bd_idle']} | "
          f"{r['bd_other']} | {r['gpu_mem_gib']} GiB ({r['gpu_act_gib']}) |")
