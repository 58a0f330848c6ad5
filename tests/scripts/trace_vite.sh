#!/usr/bin/env bash
# trace_vite — `--trace DIR` on a short bench run: ViTE parses paje.trace and exports an SVG with a
# state drawn for every worker; tasks.rec holds every codelet the net's layers need; the summary's
# numbers are consistent (busy + idle + overhead ~ 100% per worker, critical path <= span).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
command -v vite >/dev/null || { echo "SKIP: ViTE (vite) not installed"; exit 77; }
command -v gnuplot >/dev/null || { echo "SKIP: gnuplot not installed"; exit 77; }
PY=/usr/bin/python3
export STARPU_NCPU=2 STARPU_NCUDA=0 STARPU_SCHED=lws
T="$TMP/tr"

# --- 1. a traced run: the result line stays last on stdout, and every output file is there
rc=0; "$STARPU_ANP" bench --net lenet5 --steps 3 --warmup 1 --quiet --trace "$T" >"$TMP/out" 2>"$TMP/err" || rc=$?
if [ $rc -ne 0 ]; then cat "$TMP/err" >&2; fail "traced bench exited $rc"; finish; fi
LINE="$(tail -1 "$TMP/out")"
case "$LINE" in result:*) ;; *) fail "last stdout line is not the result line: $LINE" ;; esac
WORKERS="$(result_field "$LINE" workers)"
grep -q "^trace: " "$TMP/err" || fail "no 'trace:' line on stderr"
for f in paje.trace tasks.rec dag.dot trace.svg summary.txt gantt.png; do
  [ -s "$T/$f" ] || fail "$f missing or empty"
done
[ "$(head -c 4 "$T/gantt.png" | od -An -c | tr -d ' ')" = "211PNG" ] || fail "gantt.png is not a PNG"
[ -s "$T/vite.log" ] && grep -q '^0 errors and 0 warnings' "$T/vite.log" || fail "ViTE did not parse paje.trace cleanly (vite.log)"

# --- 2. ViTE itself, again: parses without a warning, exports a non-empty SVG
(cd "$TMP" && QT_QPA_PLATFORM=offscreen timeout 120 vite "$T/paje.trace" -e "$TMP/check.svg" >"$TMP/vite.out" 2>&1) \
  || fail "ViTE export exited non-zero: $(tail -3 "$TMP/vite.out")"
grep -q '^0 errors and 0 warnings' "$TMP/vite.out" || fail "ViTE reports parse problems: $(grep -i 'error\|warning' "$TMP/vite.out" | head -3)"

# --- 3. checks on the trace contents (Python, standard library)
"$PY" - "$T" "$TMP/check.svg" "$WORKERS" "$DNN_SOURCE_DIR/graph/nets/lenet5.net" <<'EOF' || fail "trace content checks"
import re, sys, xml.etree.ElementTree as ET
tdir, svg, nworkers, netfile = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
bad = []

# paje.trace: worker containers, and at least one task state on each
workers, task_states = {}, {}
builtin = {"I", "In", "D", "Fi", "Po", "C", "B", "Ps", "E", "Sc", "Sl", "P", "U", "H", "Bu", "Su", "Th",
           "MD", "MPr", "MPo"}
for line in open(tdir + "/paje.trace", errors="replace"):
    p = line.split()
    if len(p) >= 6 and p[0] == "7" and p[3] == "W":
        workers[p[2]] = p[5]
    elif len(p) >= 5 and p[0] == "10" and p[3] == "WS":
        v = p[4].strip('"')
        if v not in builtin:
            task_states[p[2]] = task_states.get(p[2], 0) + 1
if len(workers) != nworkers:
    bad.append("paje.trace has %d worker containers, the run had %d workers" % (len(workers), nworkers))
for alias, name in workers.items():
    if not task_states.get(alias):
        bad.append("paje.trace: no task state on worker %s" % name)

# SVG: parses as XML, and every worker's row holds at least one drawn state
root = ET.parse(svg).getroot()
ns = "{http://www.w3.org/2000/svg}"
rects = [r for r in root.iter(ns + "rect") if r.get("height") and r.get("y")]
labels = {t.text.strip(): (float(t.get("x")), float(t.get("y"))) for t in root.iter(ns + "text") if t.text}
box = lambda r: tuple(float(r.get(k)) for k in ("x", "y", "width", "height"))
containers = [box(r) for r in rects if "0,0,153" in r.get("fill", "")]   # ViTE's container boxes
drawn = [box(r) for r in rects if "0,0,153" not in r.get("fill", "") and float(r.get("x", 0)) >= 150]
if len(drawn) < 10:
    bad.append("trace.svg has only %d state rectangles" % len(drawn))
for name in workers.values():
    if name not in labels:
        bad.append("trace.svg: no row labelled %s" % name)
        continue
    lx, ly = labels[name]
    row = [c for c in containers if c[0] <= lx <= c[0] + c[2] and c[1] <= ly <= c[1] + c[3]]
    if not row:
        bad.append("trace.svg: no container box around the label %s" % name)
        continue
    cy, ch = row[0][1], row[0][3]
    if not [d for d in drawn if cy - 0.5 <= d[1] <= cy + ch]:
        bad.append("trace.svg: no state drawn in the row of %s" % name)

# tasks.rec: every codelet the net's layers need (first layer: no bwd-data), plus data loading,
# the SGD update and the gradient reduction
names, models = set(), set()
for line in open(tdir + "/tasks.rec", errors="replace"):
    if line.startswith("Name: "):
        names.add(line[6:].strip())
    elif line.startswith("Model: "):
        models.add(line[7:].strip())
want = {"load_batch", "optim_update"}
for line in open(netfile):
    f = line.split("#")[0].split()
    if len(f) < 3:
        continue
    op, inp = f[0], f[2]
    first = inp == "x"
    if op == "conv":
        want |= {"conv_fwd", "conv_bwd_filter"} | (set() if first else {"conv_bwd_data"})
        if "bias=1" in f:
            want |= {"bias_fwd", "bias_bwd"}
    elif op == "dense":
        want |= {"dense_fwd", "dense_bwd_weight"} | (set() if first else {"dense_bwd_data"})
    elif op in ("relu", "maxpool", "avgpool"):
        want |= {op + "_fwd", op + "_bwd"}
    elif op == "softmax_xent":
        want.add("softmax_xent")
missing = sorted(want - names)
if missing:
    bad.append("tasks.rec lacks codelets: " + " ".join(missing))
if "dnn_cl_vec_add_clear" not in models:  # the fixed-order sums over chunks (--deterministic on)
    bad.append("tasks.rec has no gradient-sum task (model dnn_cl_vec_add_clear)")

# summary.txt: one row per worker, busy + idle + overhead ~ 100%, efficiency in (0,1], CP <= span
s = open(tdir + "/summary.txt").read()
m = re.search(r"^worker\s+busy%.*?\n(.*?)\n\n", s, re.S | re.M)
rows = [l.split() for l in m.group(1).splitlines() if not l.startswith("application thread")] if m else []
if len(rows) != nworkers:
    bad.append("summary.txt: %d worker rows, want %d" % (len(rows), nworkers))
for r in rows:
    busy, idle, over, tot = (float(x) for x in r[1:5])
    if not (0 <= busy <= 100.5 and 0 <= idle <= 100.5 and 0 <= over <= 100.5):
        bad.append("summary.txt: %s has a percentage out of range: %s" % (r[0], r[1:5]))
    if abs(busy + idle + over - 100) > 3 or abs(tot - (busy + idle + over)) > 0.3:
        bad.append("summary.txt: %s busy %.1f + idle %.1f + overhead %.1f = %.1f, not ~100" % (r[0], busy, idle, over, busy + idle + over))
    if busy <= 0:
        bad.append("summary.txt: %s never busy" % r[0])
span = float(re.search(r"span \(.*?\): ([0-9.]+) ms", s).group(1))
eff = float(re.search(r"parallel efficiency: .* = ([0-9.]+)", s).group(1))
cp = re.search(r"critical path: ([0-9.]+) ms", s)
if not 0 < eff <= 1.0:
    bad.append("summary.txt: parallel efficiency %g not in (0, 1]" % eff)
if not cp:
    bad.append("summary.txt: no critical path")
elif not 0 < float(cp.group(1)) <= span * 1.001:
    bad.append("summary.txt: critical path %s ms not in (0, span %g ms]" % (cp.group(1), span))
for name in ("conv_fwd", "conv_bwd_data", "conv_bwd_filter", "optim_update", "grad_sum"):
    if not re.search(r"^%s\s" % re.escape(name), s, re.M):
        bad.append("summary.txt: no per-codelet row for %s" % name)
for b in bad:
    print("  " + b, file=sys.stderr)
sys.exit(1 if bad else 0)
EOF

# --- 4. trace-summary from the CLI; train --trace too; errors are one line
"$STARPU_ANP" trace-summary --no-png "$T" >"$TMP/sum.out" 2>&1 || fail "trace-summary exited non-zero"
grep -q '^parallel efficiency' "$TMP/sum.out" || fail "trace-summary printed no summary"
mkdir -p "$TMP/empty"
expect_rc 1 "$STARPU_ANP" trace-summary "$TMP/empty" && [ "$(printf '%s\n' "$ERR" | wc -l)" = 1 ] \
  || fail "trace-summary on an empty dir: want one error line, got: $ERR"
touch "$TMP/afile"
expect_rc 2 "$STARPU_ANP" bench --steps 1 --trace "$TMP/afile" && [ "$(printf '%s\n' "$ERR" | wc -l)" = 1 ] \
  || fail "--trace FILE: want one error line, got: $ERR"
expect_rc 2 "$STARPU_ANP" bench --trace
"$STARPU_ANP" train --data synthetic --max-steps 2 --limit-train 256 --no-eval --quiet --trace "$TMP/tr_train" \
  >/dev/null 2>"$TMP/err2" || { cat "$TMP/err2" >&2; fail "traced train exited non-zero"; }
for f in paje.trace tasks.rec dag.dot summary.txt; do [ -s "$TMP/tr_train/$f" ] || fail "train --trace: $f missing"; done
finish
