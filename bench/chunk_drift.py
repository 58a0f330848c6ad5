#!/usr/bin/env python3
"""chunk_drift.py — how far K chunks (and N ranks) drift from one chunk of the same global batch:
where the float difference is made (the gradients of step 1) and how the trajectory amplifies it.

  bench/chunk_drift.py [--nets lenet5,resnet8,resnet20] [--chunks 2,4,8] [--steps 1,2,5,10,20,40]
                       [--ranks 2] [--out DIR]

For every net, K and S, a run of S steps (`train --stop-after-steps S`, so the learning-rate
schedule is the same 100-step run in every case) with --chunks K is compared with --chunks 1:
  grad_rel  = ||m_K - m_1|| / ||m_1|| over the momentum buffers after step 1, which hold that
              step's gradients (SGD's first step: v = g + wd w, w the same in both runs);
  param_rel = ||w_K - w_1|| / ||w_1|| over the parameters after S steps.
--ranks N does the same for N ranks (mpirun, one chunk per rank) against one process. Default
learning rate (SGD 0.05, momentum 0.9, cosine), batch 64, seed 1, --batchnorm global (the
statistics of the global batch: with per-chunk statistics K chunks compute other gradients by
design); lenet5 and resnet8 on
Fashion-MNIST, resnet20 on synthetic data. Writes DIR/drift.csv and DIR/drift.png (gnuplot).
"""
import argparse, math, os, subprocess, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "scripts"))
import ckpt_compare  # noqa: E402

ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
ap.add_argument("--nets", default="lenet5,resnet8,resnet20")
ap.add_argument("--chunks", default="2,4,8")
ap.add_argument("--steps", default="1,2,5,10,20,40")
ap.add_argument("--ranks", default="2")
ap.add_argument("--out", default=os.path.join(ROOT, "out", "chunk_drift"))
a = ap.parse_args()
app = os.environ.get("STARPU_ANP", os.path.join(ROOT, "build", "apps", "starpu_anp"))
os.makedirs(a.out, exist_ok=True)
env = dict(os.environ, STARPU_NCPU="1", STARPU_NCUDA="0", STARPU_SILENT="1")


def run(net, steps, chunks=1, ranks=1):
    ck = os.path.join(a.out, f"{net}-K{chunks}-N{ranks}-S{steps}.ckpt")
    data = "synthetic" if net == "resnet20" else "fashion-mnist"
    cmd = [app, "train", "--net", net, "--data", data, "--batch", "64", "--chunks", str(chunks), "--epochs", "1",
           "--limit-train", "6400", "--no-eval", "--batchnorm", "global", "--seed", "1", "--quiet", "--checkpoint", ck,
           "--stop-after-steps", str(steps)]
    if ranks > 1:
        cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(ranks)] + cmd
    r = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if r.returncode not in (0, 3):
        sys.exit(f"chunk_drift: {' '.join(cmd)}: exit {r.returncode}: {r.stderr.strip()[-300:]}")
    return ck


def rel(ref, run_, momentum):
    A, B = ckpt_compare.load(ref), ckpt_compare.load(run_)
    d2 = r2 = 0.0
    for (n, va), (_, vb) in zip(A, B):
        if n.endswith(".momentum") != momentum:
            continue
        d2 += sum((x - y) ** 2 for x, y in zip(va, vb))
        r2 += sum(x * x for x in va)
    return math.sqrt(d2 / r2) if r2 > 0 else float("nan")


rows = []
steps = [int(s) for s in a.steps.split(",")]
for net in a.nets.split(","):
    ref = {s: run(net, s) for s in steps}
    cases = [(int(k), 1) for k in a.chunks.split(",") if k] + [(1, int(n)) for n in a.ranks.split(",") if n]
    for k, n in cases:
        if n > 1 and net == "resnet20":
            continue  # a 2-rank resnet20 on synthetic data: each rank draws its own shard, not comparable
        for s in steps:
            ck = run(net, s, k, n)
            g = rel(ref[1], ck, True) if s == 1 else ""
            p = rel(ref[s], ck, False)
            rows.append((net, k, n, s, g, p))
            print(f"{net:9s} K={k} N={n} step {s:3d}: " + (f"grad_rel {g:.3g}  " if g != "" else "") + f"param_rel {p:.3g}",
                  flush=True)
csv = os.path.join(a.out, "drift.csv")
with open(csv, "w") as f:
    f.write("net,chunks,ranks,steps,grad_rel_step1,param_rel\n")
    for r in rows:
        f.write(",".join(str(x) for x in r) + "\n")
png = os.path.join(a.out, "drift.png")
plots = []
for net in a.nets.split(","):
    for k, n in sorted({(r[1], r[2]) for r in rows if r[0] == net}):
        dat = os.path.join(a.out, f"{net}-K{k}-N{n}.dat")
        with open(dat, "w") as f:
            for r in rows:
                if r[0] == net and r[1] == k and r[2] == n and r[5] > 0:
                    f.write(f"{r[3]} {r[5]}\n")
        plots.append(f"'{dat}' with linespoints title '{net} " + (f"N={n}" if n > 1 else f"K={k}") + "'")
gp = (f"set terminal pngcairo size 900,560; set output '{png}'; set logscale xy; set key outside right;"
      "set xlabel 'step'; set ylabel '||w_K - w_1|| / ||w_1||'; set title 'K chunks (N ranks) against one chunk, lr 0.05';"
      "plot " + ", ".join(plots))
subprocess.run(["gnuplot", "-e", gp], check=False)
print(f"chunk_drift: {csv}, {png}")
