#!/usr/bin/python3
"""trace_summary.py DIR — summarise a StarPU trace converted by starpu_fxt_tool (starpu_anp --trace).

Reads DIR/tasks.rec (task times, workers), DIR/paje.trace (worker states and names) and
DIR/dag.dot (task dependencies), and writes DIR/summary.txt and DIR/gantt.png (gnuplot):

  * per worker: busy, idle and overhead as % of the span. busy = task time from tasks.rec;
    idle = Idle + Sleeping states, overhead = every other runtime state (scheduling, data fetch
    and push, progressing, callbacks) from paje.trace. The three are measured separately, so
    their sum (~100%) is a consistency check.
  * per codelet: count, total and mean time, split by CPU and CUDA workers.
  * parallel efficiency: total task time / (span x workers).
  * critical path: the longest chain of dag.dot dependencies weighted by measured task times,
    against the span (a lower bound on the span with unlimited workers and zero overhead).

The span runs from the first task start to the last task end. Several ranks' files converted
together (MPI) give rank-prefixed JobIds ("1_42") and containers; workers are then named "1_CPU0".
Python 3 standard library only.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys

# Worker-state names StarPU's Paje output uses for the runtime itself; any other state name is a task.
IDLE_STATES = {"Idle", "Sleeping"}
RUNTIME_STATES = {
    "Idle", "Sleeping", "Initializing", "Deinitializing", "FetchingInput", "PushingOutput", "Callback",
    "Overhead", "Parallel sync", "Scheduling", "Progressing", "Unpartitioning", "Hypervisor",
    "Building task", "Submitting task", "Throttling task submission", "Decoding task for MPI",
    "Preparing task for MPI", "Post-processing task for MPI",
}


def die(msg):
    print("trace_summary: " + msg, file=sys.stderr)
    sys.exit(1)


def read_rec(path):
    """Records of a GNU recutils-style file: 'Key: value' lines, blank-line separated."""
    rec = {}
    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                if rec:
                    yield rec
                    rec = {}
                continue
            if line.startswith("#"):
                continue
            k, sep, v = line.partition(": ")
            if sep:
                rec[k] = v
    if rec:
        yield rec


def rank_prefix(jobid):
    """'3_42' -> '3_' (several ranks' files converted together), '42' -> ''."""
    i = jobid.rfind("_")
    return jobid[: i + 1] if i >= 0 else ""


def task_label(rec):
    name = rec.get("Name", "")
    model = rec.get("Model", "")
    # StarPU names the reduction tasks of a STARPU_REDUX handle itself; show the codelet too.
    if name.startswith("redux_task") and model:
        m = model[7:] if model.startswith("dnn_cl_") else model
        return "redux:" + m
    return name or model or "unnamed"


def load_tasks(path):
    tasks = []
    for r in read_rec(path):
        if "StartTime" not in r or "EndTime" not in r or "WorkerId" not in r:
            continue  # runtime-internal tasks that never ran on a worker (sync, acquire...)
        try:
            s, e, w = float(r["StartTime"]), float(r["EndTime"]), int(r["WorkerId"])
        except ValueError:
            continue
        if w < 0 or e < s:
            continue
        jid = r.get("JobId", "")
        tasks.append({
            "job": jid, "label": task_label(r), "start": s, "end": e,
            "worker": rank_prefix(jid) + "w%d" % w, "node": r.get("MemoryNode", "0"),
            "rank": rank_prefix(jid), "iteration": r.get("Iteration"),
        })
    return tasks


def is_backward(label):
    return "_bwd" in label


def is_allreduce(label):
    """The cross-rank gradient reduction tasks that read a step's gradients: the tree's
    contributions and StarPU-MPI's tree tasks, or the ring's tasks. Not allreduce_zero, which
    only clears the sum and may run before the step's backward starts."""
    return (label == "allreduce_contrib" or label.startswith("redux_prio_tree_redux")
            or label.startswith("ring_"))


def allreduce_overlap(tasks):
    """Per (rank, training step): how many all-reduce tasks started before that rank's last backward
    task of the same step ended, i.e. ran while the backward of lower layers was still going.
    Needs the steps' tasks tagged with starpu_iteration_push (tasks.rec "Iteration:")."""
    groups = {}
    for t in tasks:
        if t["iteration"] is None:
            continue
        g = groups.setdefault((t["rank"], t["iteration"]), {"bwd": [], "red": []})
        if is_backward(t["label"]):
            g["bwd"].append(t)
        elif is_allreduce(t["label"]):
            g["red"].append(t)
    total = early = steps = 0
    frac = []
    for g in groups.values():
        if not g["bwd"] or not g["red"]:
            continue
        b0 = min(t["start"] for t in g["bwd"])
        b1 = max(t["end"] for t in g["bwd"])
        steps += 1
        total += len(g["red"])
        early += sum(1 for t in g["red"] if t["start"] < b1)
        first = min(t["start"] for t in g["red"])
        if b1 > b0:
            frac.append(max(0.0, min(1.0, (first - b0) / (b1 - b0))))
    if not total:
        return None
    return early, total, steps, sum(frac) / len(frac) if frac else 1.0


def paje_color(s):
    """'r g b' with components in [0,1] or [0,255] -> '#rrggbb'."""
    try:
        c = [float(x) for x in s.strip('"').split()]
    except ValueError:
        return None
    if len(c) != 3:
        return None
    if max(c) > 1.0:
        c = [x / 255.0 for x in c]
    return "#%02x%02x%02x" % tuple(max(0, min(255, int(round(x * 255)))) for x in c)


def load_paje(path, t0, t1):
    """Worker containers (alias -> name), application threads (alias -> name), ms per state name
    and container within [t0, t1], and the task colours."""
    names = {}          # worker container alias -> name ("w0" -> "CPU0")
    threads = {}        # application-thread container alias -> name ("t123" -> "UserThread123")
    ws_alias = {"WS": {}, "US": {}}  # state type -> state alias -> state name
    colors = {}         # task state name -> '#rrggbb'
    stacks = {}         # alias -> [state names]
    last = {}           # alias -> time of the last event
    acc = {}            # alias -> {state name: ms}

    def account(alias, t):
        st = stacks.get(alias)
        prev = last.get(alias)
        if st and prev is not None:
            a, b = max(prev, t0), min(t, t1)
            if b > a:
                d = acc.setdefault(alias, {})
                d[st[-1]] = d.get(st[-1], 0.0) + (b - a)
        last[alias] = t

    with open(path, errors="replace") as f:
        for line in f:
            if not line or line[0] == "%":
                continue
            tok = line.split(None, 1)
            if not tok:
                continue
            code = tok[0]
            if code == "6":
                p = re.findall(r'"[^"]*"|\S+', line)
                if len(p) >= 5 and p[2] in ws_alias:
                    name = p[3].strip('"')
                    ws_alias[p[2]][p[1].strip('"')] = name
                    if p[2] == "WS" and name not in RUNTIME_STATES:
                        col = paje_color(p[4])
                        if col:
                            colors.setdefault(name, col)
            elif code == "7":
                p = line.split()
                if len(p) >= 6 and p[3] == "W":
                    names[p[2]] = " ".join(p[5:]).strip('"')
                elif len(p) >= 6 and p[3] == "UT":
                    threads[p[2]] = " ".join(p[5:]).strip('"')
            elif code in ("10", "11", "12"):
                p = line.split(None, 4)
                if len(p) < 4 or p[3] not in ws_alias:
                    continue
                try:
                    alias, t = p[2], float(p[1])
                except ValueError:
                    continue
                account(alias, t)
                st = stacks.setdefault(alias, [])
                if code == "12":
                    if st:
                        st.pop()
                    continue
                v = p[4].strip().strip('"') if len(p) > 4 else ""
                v = ws_alias[p[3]].get(v, v)
                if code == "10":
                    if st:
                        st[-1] = v
                    else:
                        st.append(v)
                else:
                    st.append(v)
    for alias in list(stacks):
        account(alias, t1)
    return names, threads, acc, colors


def load_dag(path):
    """Edges and node fill colours of StarPU's dag.dot."""
    edges, colors = [], {}
    node_re = re.compile(r'^\s*"([^"]+)"\s*\[(.*)\]\s*$')
    with open(path, errors="replace") as f:
        for line in f:
            if "->" in line:
                chain = re.findall(r'"([^"]+)"', line.split("[", 1)[0])
                edges.extend(zip(chain, chain[1:]))
                continue
            m = node_re.match(line)
            if m:
                c = re.search(r'fillcolor="(#[0-9a-fA-F]{6})"', m.group(2))  # not graphviz schemes
                if c and m.group(1).startswith("task_"):
                    colors[m.group(1)[5:]] = c.group(1)
    return edges, colors


def critical_path(edges, dur):
    """Longest path (sum of node weights) through the DAG, with Kahn's topological order.
    Returns (length_ms, [nodes]) or (None, []) when the graph has a cycle."""
    succ, indeg, nodes = {}, {}, set()
    for a, b in edges:
        succ.setdefault(a, []).append(b)
        indeg[b] = indeg.get(b, 0) + 1
        nodes.add(a)
        nodes.add(b)
    for n in dur:
        nodes.add(n)
    best = {n: dur.get(n, 0.0) for n in nodes}
    pred = {}
    ready = [n for n in nodes if indeg.get(n, 0) == 0]
    seen = 0
    while ready:
        n = ready.pop()
        seen += 1
        for m in succ.get(n, ()):
            cand = best[n] + dur.get(m, 0.0)
            if cand > best[m]:
                best[m] = cand
                pred[m] = n
            indeg[m] -= 1
            if indeg[m] == 0:
                ready.append(m)
    if seen != len(nodes):
        return None, []
    if not best:
        return 0.0, []
    end = max(best, key=best.get)
    path = [end]
    while path[-1] in pred:
        path.append(pred[path[-1]])
    return best[end], path[::-1]


def worker_key(alias, name):
    m = re.match(r"(.*?)([A-Za-z]+)(\d+)$", name)
    if m:
        return (m.group(1), 0 if m.group(2) == "CPU" else 1, m.group(2), int(m.group(3)))
    return ("", 2, name, 0)


def arch_of(name):
    n = re.sub(r"^\d+_", "", name)
    return "CUDA" if n.startswith("CUDA") else "CPU" if n.startswith("CPU") else re.sub(r"\d+$", "", n) or "?"


def fmt_ms(x):
    return "%.3f" % x if x is not None else "-"


def gantt(outdir, tasks, workers, names, colors_task, colors_state, t0, rng, verbose):
    gp = shutil.which("gnuplot")
    if not gp:
        print("trace_summary: gnuplot not found; no gantt.png", file=sys.stderr)
        return False
    lo, hi = rng if rng else (None, None)
    row = {w: i for i, w in enumerate(workers)}
    dat = os.path.join(outdir, "gantt.dat")
    used = {}
    with open(dat, "w") as f:
        f.write("# start_ms end_ms row color label  (ms since the first task start)\n")
        for t in tasks:
            s, e = t["start"] - t0, t["end"] - t0
            if lo is not None and (e < lo or s > hi):
                continue
            col = colors_task.get(t["job"]) or colors_state.get(t["label"]) or "#888888"
            used.setdefault(t["label"], col)
            f.write("%.6f %.6f %d %d %s\n" % (s, e, row[t["worker"]], int(col.lstrip("#"), 16), t["label"]))
    n = len(workers)
    # gnuplot's enhanced text reads '_' as a subscript: escape it in the worker names.
    ytics = ", ".join('"%s" %d' % (names.get(w, w).replace("_", "\\\\_"), row[w]) for w in workers)
    legend = ", ".join("NaN with boxes fs solid 1.0 lc rgb '%s' title '%s'" % (c, l.replace("_", "\\_"))
                       for l, c in sorted(used.items()))
    script = os.path.join(outdir, "gantt.gnuplot")
    with open(script, "w") as f:
        f.write("""# gnuplot gantt.gnuplot  (written by traces/trace_summary.py)
set terminal pngcairo size 1400,%d font 'sans,10'
set output 'gantt.png'
set title 'StarPU tasks per worker (%s)'
set xlabel 'time since the first task start (ms)'
set yrange [%f:-0.6]
set ytics (%s)
set grid xtics
set style fill solid 1.0 noborder
set key outside right top
%s
plot 'gantt.dat' using (($1+$2)/2):3:1:2:($3-0.4):($3+0.4):4 with boxxyerror lc rgb variable notitle%s
""" % (200 + 40 * max(n, 1) + 14 * len(used) // max(1, n), os.path.basename(os.path.abspath(outdir)).replace("_", "\\_"),
            n - 0.4, ytics, "set xrange [%f:%f]" % (lo, hi) if lo is not None else "",
            (", " + legend) if legend else ""))
    r = subprocess.run([gp, "gantt.gnuplot"], cwd=outdir, capture_output=True, text=True)
    if r.returncode != 0:
        print("trace_summary: gnuplot failed: " + r.stderr.strip()[-500:], file=sys.stderr)
        return False
    return True


def main():
    ap = argparse.ArgumentParser(description="Summarise a StarPU trace directory (starpu_anp --trace DIR).")
    ap.add_argument("dir", help="directory with tasks.rec, paje.trace and dag.dot")
    ap.add_argument("--quiet", action="store_true", help="do not print the summary (still write summary.txt)")
    ap.add_argument("--no-png", action="store_true", help="skip the gnuplot Gantt chart")
    ap.add_argument("--range", metavar="A:B", help="Gantt chart from A to B ms after the first task start")
    a = ap.parse_args()
    d = a.dir
    rng = None
    if a.range:
        try:
            lo, hi = (float(x) for x in a.range.split(":"))
            rng = (lo, hi)
        except ValueError:
            die("--range: '%s' is not A:B in ms" % a.range)
    for f in ("tasks.rec", "paje.trace"):
        if not os.path.isfile(os.path.join(d, f)):
            die("%s: no %s (convert a trace first: starpu_anp ... --trace %s)" % (d, f, d))

    tasks = load_tasks(os.path.join(d, "tasks.rec"))
    if not tasks:
        die("%s/tasks.rec: no task ran on a worker" % d)
    t0 = min(t["start"] for t in tasks)
    t1 = max(t["end"] for t in tasks)
    span = t1 - t0
    names, threads, states, state_colors = load_paje(os.path.join(d, "paje.trace"), t0, t1)
    workers = sorted(set(names) | {t["worker"] for t in tasks},
                     key=lambda w: worker_key(w, names.get(w, w)))
    wname = {w: names.get(w, w) for w in workers}

    busy = {w: 0.0 for w in workers}
    for t in tasks:
        busy[t["worker"]] += min(t["end"], t1) - max(t["start"], t0)
    total_task = sum(busy.values())

    out = []
    p = out.append
    p("StarPU trace summary: %s" % os.path.abspath(d))
    p("span (first task start to last task end): %.3f ms; %d tasks on %d workers" % (span, len(tasks), len(workers)))
    p("")
    p("per worker (% of span): busy = task time (tasks.rec); idle = Idle+Sleeping, overhead = other runtime")
    p("states (paje.trace: scheduling, fetch/push data, progressing, callbacks)")
    p("%-12s %8s %8s %9s %8s   %s" % ("worker", "busy%", "idle%", "overhead%", "sum%", "top overhead states"))
    for w in workers:
        st = states.get(w, {})
        idle = sum(v for k, v in st.items() if k in IDLE_STATES)
        over = {k: v for k, v in st.items() if k in RUNTIME_STATES and k not in IDLE_STATES}
        ov = sum(over.values())
        top = ", ".join("%s %.1f%%" % (k, 100 * v / span) for k, v in sorted(over.items(), key=lambda kv: -kv[1])[:3]
                        if span > 0)
        pc = (lambda x: 100.0 * x / span) if span > 0 else (lambda x: 0.0)
        p("%-12s %8.1f %8.1f %9.1f %8.1f   %s" % (wname[w], pc(busy[w]), pc(idle), pc(ov), pc(busy[w] + idle + ov), top))
    for th in sorted(threads):
        st = states.get(th, {})
        if st and span > 0:
            p("application thread %s (submits the tasks): %s" % (threads[th], ", ".join(
                "%s %.1f%%" % (k, 100 * v / span) for k, v in sorted(st.items(), key=lambda kv: -kv[1])[:4])))
    p("")

    # per codelet, split by architecture
    archs = sorted({arch_of(wname[t["worker"]]) for t in tasks}, key=lambda x: (x != "CPU", x))
    per = {}
    for t in tasks:
        k = (t["label"], arch_of(wname[t["worker"]]))
        c = per.setdefault(k, [0, 0.0])
        c[0] += 1
        c[1] += t["end"] - t["start"]
    labels = sorted({k[0] for k in per}, key=lambda l: -sum(v[1] for k, v in per.items() if k[0] == l))
    p("per codelet (times in ms)")
    head = "%-26s" % "codelet"
    for ar in archs:
        head += " | %5s %7s %10s %9s" % (ar, "count", "total", "mean")
    head += " | %6s" % "%busy"
    p(head)
    for l in labels:
        row = "%-26s" % l
        tot = 0.0
        for ar in archs:
            c = per.get((l, ar))
            if c:
                row += " | %5s %7d %10.3f %9.4f" % ("", c[0], c[1], c[1] / c[0])
                tot += c[1]
            else:
                row += " | %5s %7s %10s %9s" % ("", "-", "-", "-")
        row += " | %6.1f" % (100 * tot / total_task if total_task else 0)
        p(row)
    p("")

    nw = len(workers)
    eff = total_task / (span * nw) if span > 0 and nw else 0.0
    p("parallel efficiency: task time %.3f ms / (span %.3f ms x %d workers) = %.3f" % (total_task, span, nw, eff))

    dag = os.path.join(d, "dag.dot")
    task_colors = {}
    if os.path.isfile(dag):
        edges, task_colors = load_dag(dag)
        dur = {"task_" + t["job"]: t["end"] - t["start"] for t in tasks}
        cp, path = critical_path(edges, dur)
        if cp is None:
            p("critical path: dag.dot has a cycle; not computed")
        else:
            byjob = {"task_" + t["job"]: t for t in tasks}
            on = [byjob[n] for n in path if n in byjob]
            mix = {}
            for t in on:
                mix[t["label"]] = mix.get(t["label"], 0.0) + t["end"] - t["start"]
            p("critical path: %.3f ms = %.1f%% of the span (%d tasks; dag.dot dependencies weighted by measured task "
              "times)" % (cp, 100 * cp / span if span > 0 else 0, len(on)))
            p("  average parallelism (task time / critical path): %.2f" % (total_task / cp if cp > 0 else 0))
            p("  on it: " + ", ".join("%s %.3f ms" % kv for kv in sorted(mix.items(), key=lambda kv: -kv[1])[:6]))
    else:
        p("critical path: no dag.dot")

    ov = allreduce_overlap(tasks)
    if ov:
        early, total, steps, first = ov
        p("all-reduce overlap: %d of %d gradient all-reduce tasks (%.0f%%) started before their rank's backward of the "
          "same step ended (%d rank-steps); the first one started at %.0f%% of the backward span on average"
          % (early, total, 100.0 * early / total, steps, 100 * first))

    text = "\n".join(out) + "\n"
    with open(os.path.join(d, "summary.txt"), "w") as f:
        f.write(text)
    if not a.quiet:
        sys.stdout.write(text)
    if not a.no_png:
        if gantt(d, tasks, workers, wname, task_colors, state_colors, t0, rng, not a.quiet) and not a.quiet:
            print("gantt chart: %s" % os.path.join(d, "gantt.png"))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (OSError, ValueError, KeyError, IndexError, ZeroDivisionError) as e:
        die("%s: %s" % (type(e).__name__, e))
