#!/usr/bin/env bash
# convout_step_ab.sh — the conv forward and batch norm in a --precision bf16 training step, two builds side by side
# (docs/studies/2026-12-07-convout-bf16.md: a build whose convs write bf16 outputs that batch norm reads, against
# one whose convs write fp32): `starpu_anp bench` with DNN_BREAKDOWN=2 on one worker, whose critical-path line gives
# each codelet's compute ms over the timed steps (cl_conv2d_fwd, cl_batchnorm_fwd_train, cl_batchnorm_bwd), and the
# step's images/s, for each NET:BATCH and build, interleaved round by round (A B, then B A, ...) at measuring priority
# (scripts/lib.sh anp_measure_prio), OpenBLAS left to pick its kernels (env -u OPENBLAS_CORETYPE). Compare the
# ratios within a round, not absolute times across runs; each row carries the 1-minute load average.
#
#   bench/convout_step_ab.sh APP_A APP_B [OUT.csv]    environment: ROUNDS [5], STEPS [10], NETS ["resnet20:64 resnet8:64"]
# Output CSV: round,net,batch,build,conv_fwd_ms,bn_fwd_ms,bn_bwd_ms,bf16_activations,images_per_s,load1; then per net the
# median (min-max) over rounds of B/A for each time and for images/s. Exit status: 0, 1 if a run failed, 2 on a
# usage error.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
source "$ROOT/scripts/lib.sh"
[ $# -ge 2 ] && [ $# -le 3 ] || { echo "usage: bench/convout_step_ab.sh APP_A APP_B [OUT.csv]" >&2; exit 2; }
A="$1" B="$2" OUTCSV="${3:-$(mktemp)}"
for app in "$A" "$B"; do [ -x "$app" ] || { echo "convout_step_ab.sh: $app: not an executable" >&2; exit 2; }; done
ROUNDS="${ROUNDS:-5}" STEPS="${STEPS:-10}" NETS="${NETS:-resnet20:64 resnet8:64}"
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || { echo "convout_step_ab.sh: ROUNDS=$ROUNDS: expected a positive integer" >&2; exit 2; }
[[ "$STEPS" =~ ^[1-9][0-9]*$ ]] || { echo "convout_step_ab.sh: STEPS=$STEPS: expected a positive integer" >&2; exit 2; }
export STARPU_SILENT=1 STARPU_NCPU=1 STARPU_NCUDA=0
anp_measure_prio "$ROOT"
echo "convout_step_ab: $ROUNDS rounds, $STEPS steps, one worker, $ANP_PRIO_SAID; $(uptime)"
echo "round,net,batch,build,conv_fwd_ms,bn_fwd_ms,bn_bwd_ms,bf16_activations,images_per_s,load1" >"$OUTCSV"
ms() { sed -n "s/.*[:;] $2 \([0-9.]*\) (compute \([0-9.]*\).*/\2/p" <<<"$1" | head -1; }
for r in $(seq "$ROUNDS"); do
  for nb in $NETS; do
    net=${nb%%:*} batch=${nb#*:}
    order="A B"; [ $((r % 2)) = 0 ] && order="B A"
    for build in $order; do
      app="$A"; [ "$build" = B ] && app="$B"
      load=$(cut -d' ' -f1 /proc/loadavg)
      out=$(env -u OPENBLAS_CORETYPE DNN_BREAKDOWN=2 "${ANP_PRIO[@]}" timeout 600 "$app" bench --net "$net" --batch "$batch" \
        --chunks 2 --steps "$STEPS" --warmup 3 --precision bf16 2>&1) || { echo "convout_step_ab.sh: $build $nb failed" >&2; exit 1; }
      cp=$(grep '^critpath:' <<<"$out" | sed 's/.*by codelet, ms: //; s/^/; /')
      line=$(anp_result_line <<<"$out")
      row="$r,$net,$batch,$build,$(ms "$cp" cl_conv2d_fwd),$(ms "$cp" cl_batchnorm_fwd_train),$(ms "$cp" cl_batchnorm_bwd)"
      echo "$row,$(anp_result_field "$line" bf16_activations),$(anp_result_field "$line" images_per_s),$load" | tee -a "$OUTCSV"
    done
  done
done
echo "after: $(uptime)"
python3 - "$OUTCSV" <<'PY'
import csv, statistics as st, sys
rows = list(csv.DictReader(open(sys.argv[1])))
print("| net | batch | B/A conv fwd | B/A bn fwd | B/A bn bwd | B/A images/s | bf16_activations A, B | load1 |")
print("|---|---:|---:|---:|---:|---:|---|---|")
for net, b in sorted({(r["net"], r["batch"]) for r in rows}):
    sel = [r for r in rows if r["net"] == net and r["batch"] == b]
    by = {}
    for r in sel: by.setdefault(r["round"], {})[r["build"]] = r
    def cell(k):
        x = [float(d["B"][k]) / float(d["A"][k]) for d in by.values() if "A" in d and "B" in d and float(d["A"][k]) > 0]
        return "%.3f (%.3f-%.3f)" % (st.median(x), min(x), max(x)) if x else "-"
    acts = {r["build"]: r["bf16_activations"] for r in sel}
    loads = [float(r["load1"]) for r in sel]
    print("| %s | %s | %s | %s | %s | %s | %s, %s | %.1f-%.1f |" % (net, b, cell("conv_fwd_ms"), cell("bn_fwd_ms"),
          cell("bn_bwd_ms"), cell("images_per_s"), acts.get("A"), acts.get("B"), min(loads), max(loads)))
PY
