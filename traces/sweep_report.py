#!/usr/bin/python3
"""sweep_report.py DIR — medians, speedups and plots for a traces/sweep.sh run.

Reads DIR/sweep.csv (one row per run), fills in its speedup and efficiency columns, and writes
DIR/summary.csv (one row per configuration: runs, median, min, max and spread of images/s,
speedup and efficiency of the median), DIR/throughput.png and DIR/speedup.png (gnuplot), and
prints the summary as a Markdown table.

workers = (ncpu + ncuda) x ranks. The baseline of a scheduler is its configuration with the fewest
workers (1 CPU when the sweep has it); speedup = images/s / baseline median images/s and
efficiency = speedup / (workers / baseline workers). Failed or timed-out runs are kept in
sweep.csv with their status and left out of the statistics. load1 (the 1-minute load average
when each run started) shows how busy the machine was with other work. Python 3 standard library only.
"""
import csv
import os
import shutil
import statistics
import subprocess
import sys


def die(msg):
    print("sweep_report: " + msg, file=sys.stderr)
    sys.exit(1)


def main():
    if len(sys.argv) != 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(sys.argv) == 2 else 2
    d = sys.argv[1]
    path = os.path.join(d, "sweep.csv")
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
            fields = list(rows[0].keys()) if rows else []
    except OSError as e:
        die("%s: %s" % (path, e.strerror))
    if not rows:
        die("%s: no runs" % path)

    def key(r):
        return (r["scheduler"], int(r["ncpu"]), int(r["ncuda"]), int(r["ranks"]), r["mode"])

    def workers(k):
        return (k[1] + k[2]) * k[3]

    cfg = {}
    for r in rows:
        cfg.setdefault(key(r), []).append(r)
    stats = {}
    for k, rs in cfg.items():
        v = [float(r["images_per_s"]) for r in rs if r["status"] == "ok" and r["images_per_s"]]
        chunks = sorted({r["chunks"] for r in rs if r["chunks"]})
        loads = [float(r["load1"]) for r in rs if r.get("load1")]
        stats[k] = {"runs": len(rs), "ok": len(v), "chunks": "/".join(chunks),
                    "load": statistics.median(loads) if loads else None,
                    "median": statistics.median(v) if v else None,
                    "min": min(v) if v else None, "max": max(v) if v else None}

    # baseline per scheduler: fewest workers, then no GPU, then one rank
    base = {}
    for k in sorted(stats, key=lambda k: (workers(k), k[2], k[3])):
        if stats[k]["median"] and k[0] not in base:
            base[k[0]] = k
    for k, s in stats.items():
        b = base.get(k[0])
        if b and s["median"]:
            s["speedup"] = s["median"] / stats[b]["median"]
            s["efficiency"] = s["speedup"] / (workers(k) / workers(b))
        else:
            s["speedup"] = s["efficiency"] = None
    for r in rows:
        b = base.get(r["scheduler"])
        if b and r["status"] == "ok" and r["images_per_s"]:
            sp = float(r["images_per_s"]) / stats[b]["median"]
            r["speedup"] = "%.4f" % sp
            r["efficiency"] = "%.4f" % (sp / (workers(key(r)) / workers(b)))
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)

    scheds = list(dict.fromkeys(r["scheduler"] for r in rows))  # sweep order
    order = sorted(stats, key=lambda k: (scheds.index(k[0]), k[3], k[4], k[2], k[1]))
    net, batch = rows[0]["net"], rows[0]["batch"]
    with open(os.path.join(d, "summary.csv"), "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["scheduler", "ncpu", "ncuda", "ranks", "mode", "workers", "net", "batch", "chunks", "runs", "ok",
                    "median_images_per_s", "min_images_per_s", "max_images_per_s", "spread_pct", "speedup",
                    "efficiency", "baseline_workers", "median_load1"])
        for k in order:
            s = stats[k]
            fmt = lambda x, p="%.1f": (p % x) if x is not None else ""
            spread = 100 * (s["max"] - s["min"]) / s["median"] if s["median"] else None
            w.writerow([k[0], k[1], k[2], k[3], k[4], workers(k), net, batch, s["chunks"], s["runs"], s["ok"],
                        fmt(s["median"]), fmt(s["min"]), fmt(s["max"]), fmt(spread), fmt(s["speedup"], "%.3f"),
                        fmt(s["efficiency"], "%.3f"), workers(base[k[0]]) if k[0] in base else "",
                        fmt(s["load"], "%.2f")])

    # Markdown table
    print("| scheduler | ncpu | ncuda | ranks | mode | images/s (median) | min-max | spread | speedup | efficiency "
          "| load |")
    print("|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|")
    for k in order:
        s = stats[k]
        if s["median"] is None:
            print("| %s | %d | %d | %d | %s | failed (%d runs) | | | | | |" % (k + (s["runs"],)))
            continue
        print("| %s | %d | %d | %d | %s | %.1f | %.1f-%.1f | %.1f%% | %.2f | %.2f | %s |" % (
            k + (s["median"], s["min"], s["max"], 100 * (s["max"] - s["min"]) / s["median"], s["speedup"],
                 s["efficiency"], "%.1f" % s["load"] if s["load"] is not None else "")))

    plot(d, stats, order, base, workers, net, batch)
    return 0


def plot(d, stats, order, base, workers, net, batch):
    gp = shutil.which("gnuplot")
    if not gp:
        print("sweep_report: gnuplot not found; no plots", file=sys.stderr)
        return
    vary_cuda = len({k[2] for k in stats}) > 1
    vary_ranks = len({(k[3], k[4]) for k in stats}) > 1
    series = {}
    for k in order:
        if stats[k]["median"] is None:
            continue
        name = k[0]
        if vary_cuda:
            name += " cuda=%d" % k[2]
        if vary_ranks:
            name += " %dx%s" % (k[3], k[4])
        series.setdefault(name, []).append(k)
    if not series:
        print("sweep_report: every run failed; no plots", file=sys.stderr)
        return
    dat = os.path.join(d, "sweep_plot.dat")
    names = list(series)
    with open(dat, "w") as f:
        for name in names:
            f.write("# %s\n# workers median min max speedup efficiency\n" % name)
            for k in sorted(series[name], key=workers):
                s = stats[k]
                f.write("%d %.3f %.3f %.3f %.5f %.5f\n" % (workers(k), s["median"], s["min"], s["max"], s["speedup"],
                                                           s["efficiency"]))
            f.write("\n\n")
    xs = sorted({workers(k) for k in stats})
    xtics = ", ".join("%d" % x for x in xs)
    esc = lambda s: s.replace("_", "\\_")
    title = "starpu\\_anp bench --net %s --batch %s" % (esc(net), batch)
    th = ", ".join("'sweep_plot.dat' index %d using 1:2:3:4 with yerrorlines lt %d lw 2 pt 7 title '%s'" % (i, i + 1, esc(n))
                   for i, n in enumerate(names))
    bw = min(workers(b) for b in base.values()) if base else 1
    sp = ", ".join("'sweep_plot.dat' index %d using 1:5 with linespoints lt %d lw 2 pt 7 title '%s'" % (i, i + 1, esc(n))
                   for i, n in enumerate(names))
    script = """# gnuplot sweep.gnuplot  (written by traces/sweep_report.py)
set terminal pngcairo size 900,560 font 'sans,11'
set grid
set key left top
set xlabel 'workers ((CPU + CUDA) x ranks)'
set xtics (%s)
set xrange [%f:%f]
set output 'throughput.png'
set title '%s: throughput (median, bars: min-max)'
set ylabel 'images/s'
set yrange [0:*]
plot %s
set output 'speedup.png'
set title '%s: speedup over the fewest-worker run'
set ylabel 'speedup'
plot x/%d with lines dt 2 lc rgb '#888888' title 'ideal', %s
""" % (xtics, min(xs) - 0.3, max(xs) + 0.3, title, th, title, bw, sp)
    with open(os.path.join(d, "sweep.gnuplot"), "w") as f:
        f.write(script)
    r = subprocess.run([gp, "sweep.gnuplot"], cwd=d, capture_output=True, text=True)
    if r.returncode != 0:
        print("sweep_report: gnuplot failed: " + r.stderr.strip()[-500:], file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
