#!/usr/bin/env python3
"""fit_gpu.py — fit the simulated GPUs' roofline to published single-GPU throughput.

    sim/fit_gpu.py [--figures CSV] [--out DIR] [--groups "k80 p100 v100 a100 h100+h200"]
                   [--steps S] [--only ID,ID...] [--check EC]

The figures (docs/studies/2026-12-07-gpu-models/figures.csv: one published ResNet-50 training
throughput per row, its GPU, precision, batch per GPU and role) are simulated with
scripts/simulate.sh as the source ran them: one GPU, GPU-only (--ncpu 0), the source's batch in
one chunk (one kernel per layer over the whole batch, as the frameworks do). What is fitted is the
roofline's compute efficiency (eff_compute: the fraction of the peak that convolutions and GEMMs
reach) of each GROUP of GPUs, on the group's `fit` rows; the memory efficiency and the launch
cost keep sim/platform.py's values: one figure per GPU and precision cannot tell them apart from
eff_compute (docs/studies/2026-12-07-gpu-models.md, "Fit").

How: in the roofline each task takes launch + max(flops / (peak x eff_compute), bytes / (bandwidth
x eff_memory)), and one GPU runs its tasks one after the other, so a step takes about
T(e) = a + b / e (a: the memory-bound tasks, launches and transfers; b / e: the compute-bound
tasks). Two simulations per figure (e = E0 and E1) give a and b; the group's e minimises the
sum of squared log errors of its fit rows; then every row (fit and hold-out) is simulated at the
fitted e, and a second pass re-linearises around it (tasks near the ridge point switch sides).
The last simulations are the reported ones: DIR/fit.csv (one row per figure and pass) and
DIR/result.csv (the final: published, simulated, error, role). --loo adds DIR/loo.csv: each
figure predicted from the other figures of its group (leave one out), simulated.

Exit status: 0 done, 1 a simulation failed, 2 bad usage.
"""
import argparse
import csv
import math
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
import importlib.util  # noqa: E402

# sim/platform.py by path: its name is the standard library's too
_spec = importlib.util.spec_from_file_location("anp_platform", os.path.join(ROOT, "sim", "platform.py"))
anp_platform = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(anp_platform)


def die(msg, code=2):
    print(f"fit_gpu.py: {msg}", file=sys.stderr)
    sys.exit(code)


def read_figures(path):
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        die(f"--figures {path}: {e.strerror}")
    need = ("id", "gpu", "precision", "role", "images_per_s", "batch_per_gpu")
    for i, r in enumerate(rows, 2):
        for k in need:
            if not r.get(k):
                die(f"{path}:{i}: no {k}")
        if r["gpu"] not in anp_platform.GPUS:
            die(f"{path}:{i}: gpu '{r['gpu']}' is not in sim/platform.py GPUS")
        if r["precision"] not in anp_platform.GPU_PRECISIONS:
            die(f"{path}:{i}: precision '{r['precision']}': expected one of {anp_platform.GPU_PRECISIONS}")
        try:
            r["ips"], r["batch"] = float(r["images_per_s"]), int(r["batch_per_gpu"])
        except ValueError:
            die(f"{path}:{i}: images_per_s and batch_per_gpu must be numbers")
        if not (r["ips"] > 0 and r["batch"] > 0):
            die(f"{path}:{i}: images_per_s and batch_per_gpu must be > 0")
    return rows


def simulate(row, eff, args, log):
    """images/s of one figure's configuration at eff_compute = eff (the GPU's eff_memory and launch)."""
    g = anp_platform.GPUS[row["gpu"]]
    roof = f"{eff:.6f}:{g['eff_memory']}:{g['launch_us']}"
    pdir = os.path.join(args.out, "platforms", row["id"])
    csvf = os.path.join(args.out, "runs.csv")
    cmd = [os.path.join(ROOT, "scripts", "simulate.sh"), "--net", "resnet50", "--batch", str(row["batch"]),
           "--chunks", "1", "--cores", "4", "--ncpu", "0", "--gpus", "1", "--gpu", row["gpu"],
           "--gpu-precision", row["precision"], "--steps", str(args.steps), "--warmup", "1",
           "--platform-dir", pdir, "--csv", csvf, "--quiet"]
    if args.no_build:
        cmd.append("--no-build")
    # The source's batch in one chunk, however much memory this tool's activations would need
    # (about 220 MB per ResNet-50 sample kept for backward, more than the frameworks keep): the
    # fit times the batch, it does not check that it fits.
    env = dict(os.environ, ANP_SIM_GPU_ROOFLINE=roof, ANP_SIM_GPU_MEMSIZE_GB="100000")
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    log.write(f"# {row['id']} eff_compute={eff:.4f} rc={p.returncode}\n{p.stdout}{p.stderr}\n")
    log.flush()
    ips = None
    for line in p.stdout.splitlines():
        if line.startswith("result:"):
            for kv in line.split():
                if kv.startswith("images_per_s="):
                    ips = float(kv.split("=", 1)[1])
    if p.returncode != 0 or not ips:
        die(f"simulating {row['id']} at eff_compute {eff:.4f} failed (rc {p.returncode}; log {log.name})", 1)
    return ips


def fit_group(rows, lin):
    """The e in (0, 1] minimising sum over rows of log(sim(e) / published)^2, sim(e) = B / (a + b / e)."""
    def cost(e):
        return sum(math.log(r["batch"] / (lin[r["id"]][0] + lin[r["id"]][1] / e) / r["ips"]) ** 2 for r in rows)
    lo, hi = 0.01, 1.0
    for _ in range(100):  # golden section: the cost is unimodal in e
        m1, m2 = lo + (hi - lo) * 0.382, lo + (hi - lo) * 0.618
        if cost(m1) < cost(m2):
            hi = m2
        else:
            lo = m1
    return (lo + hi) / 2


def linearise(row, e0, e1, args, log, out):
    """a, b of T(e) = a + b / e from simulations at e0 and e1 (T: seconds per sample)."""
    t = []
    for e in (e0, e1):
        ips = simulate(row, e, args, log)
        out.writerow([row["id"], row["gpu"], row["precision"], row["batch"], f"{e:.6f}", f"{ips:.2f}"])
        t.append(1.0 / ips)
    b = (t[0] - t[1]) / (1 / e0 - 1 / e1)
    return (t[0] - b / e0) * row["batch"], b * row["batch"]


def loo(rows, groups, lin, args, log, w):
    """Leave one out: each figure predicted by the eff_compute fitted on the other figures of its group
    (fit and hold-out rows alike), then simulated: the error of a figure the fit never saw, for every
    figure. DIR/loo.csv."""
    out = open(os.path.join(args.out, "loo.csv"), "w", newline="")
    lw = csv.writer(out)
    lw.writerow(["id", "gpu", "precision", "batch", "group", "fitted_on", "eff_compute", "published", "simulated",
                 "error_pct"])
    for r in rows:
        k = (groups.get(r["gpu"], r["gpu"]), r["precision"])
        others = [o for o in rows if o is not r and (groups.get(o["gpu"], o["gpu"]), o["precision"]) == k]
        if not others:
            print(f"{r['id']}: no other figure in group {k[0]} {k[1]}: no leave-one-out prediction", file=sys.stderr)
            continue
        e = min(1.0, fit_group(others, lin))
        ips = simulate(r, e, args, log)
        w.writerow([r["id"], r["gpu"], r["precision"], r["batch"], f"{e:.6f}", f"{ips:.2f}"])
        err = 100.0 * (ips / r["ips"] - 1)
        lw.writerow([r["id"], r["gpu"], r["precision"], r["batch"], k[0], len(others), f"{e:.4f}", r["ips"],
                     f"{ips:.1f}", f"{err:+.1f}"])
        print(f"leave-one-out {r['id']:28s} published {r['ips']:8.1f} simulated {ips:8.1f} error {err:+6.1f}% "
              f"(eff_compute {e:.4f} from {len(others)} other figure(s))")
    out.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--figures", default=os.path.join(ROOT, "docs/studies/2026-12-07-gpu-models/figures.csv"))
    ap.add_argument("--out", default="fit-gpu")
    ap.add_argument("--groups", default="k80 p100 v100 a100 h100+h200",
                    help="GPUs that share one eff_compute per precision: space-separated groups, '+' joins")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--only", default=None, help="comma-separated figure ids (default: every fit/holdout row)")
    ap.add_argument("--e0", type=float, default=0.25)
    ap.add_argument("--e1", type=float, default=0.5)
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--loo", action="store_true", help="also predict each figure from the others of its group")
    a = ap.parse_args()
    if a.steps < 1 or not (0 < a.e0 < a.e1 <= 1):
        die("--steps >= 1 and 0 < --e0 < --e1 <= 1")
    rows = [r for r in read_figures(a.figures) if r["role"] in ("fit", "holdout")]
    if a.only:
        ids = set(a.only.split(","))
        unknown = ids - {r["id"] for r in rows}
        if unknown:
            die(f"--only: no fit/holdout figure {', '.join(sorted(unknown))}")
        rows = [r for r in rows if r["id"] in ids]
    groups = {}
    for tok in a.groups.split():
        for g in tok.split("+"):
            if g not in anp_platform.GPUS:
                die(f"--groups: '{g}' is not a GPU of sim/platform.py")
            groups[g] = tok
    os.makedirs(a.out, exist_ok=True)
    a.out = os.path.abspath(a.out)
    log = open(os.path.join(a.out, "fit.log"), "a")
    fout = open(os.path.join(a.out, "fit.csv"), "a", newline="")
    w = csv.writer(fout)
    if fout.tell() == 0:
        w.writerow(["id", "gpu", "precision", "batch", "eff_compute", "images_per_s"])
    # pass 1: linearise every row at e0, e1; fit each (group, precision) on its fit rows
    lin = {r["id"]: linearise(r, a.e0, a.e1, a, log, w) for r in rows}
    fout.flush()
    keys = sorted({(groups.get(r["gpu"], r["gpu"]), r["precision"]) for r in rows})
    eff = {}
    for _pass in range(2):
        for k in keys:
            fit_rows = [r for r in rows if (groups.get(r["gpu"], r["gpu"]), r["precision"]) == k and r["role"] == "fit"]
            if fit_rows:
                eff[k] = min(1.0, fit_group(fit_rows, lin))
        if _pass == 0:  # pass 2: re-linearise around the fitted e (a task near its ridge point may switch sides)
            for r in rows:
                k = (groups.get(r["gpu"], r["gpu"]), r["precision"])
                if k in eff:
                    e = eff[k]
                    lin[r["id"]] = linearise(r, e / 1.15, min(1.0, e * 1.15), a, log, w)
            fout.flush()
    # the reported simulations, at the fitted e
    res = open(os.path.join(a.out, "result.csv"), "w", newline="")
    rw = csv.writer(res)
    rw.writerow(["id", "gpu", "precision", "role", "batch", "group", "eff_compute", "eff_memory", "launch_us",
                 "published", "simulated", "error_pct"])
    for r in rows:
        k = (groups.get(r["gpu"], r["gpu"]), r["precision"])
        if k not in eff:
            print(f"{r['id']}: no fit row for group {k[0]} {k[1]}: not simulated", file=sys.stderr)
            continue
        ips = simulate(r, eff[k], a, log)
        w.writerow([r["id"], r["gpu"], r["precision"], r["batch"], f"{eff[k]:.6f}", f"{ips:.2f}"])
        g = anp_platform.GPUS[r["gpu"]]
        err = 100.0 * (ips / r["ips"] - 1)
        rw.writerow([r["id"], r["gpu"], r["precision"], r["role"], r["batch"], k[0], f"{eff[k]:.4f}", g["eff_memory"],
                     g["launch_us"], r["ips"], f"{ips:.1f}", f"{err:+.1f}"])
        print(f"{r['id']:28s} {r['role']:8s} published {r['ips']:8.1f} simulated {ips:8.1f} error {err:+6.1f}% "
              f"(eff_compute {eff[k]:.4f}, group {k[0]} {k[1]})")
    res.close()
    if a.loo:
        loo(rows, groups, lin, a, log, w)
    for k, e in sorted(eff.items()):
        print(f"fitted: {k[0]} {k[1]} eff_compute={e:.4f}")


if __name__ == "__main__":
    main()
