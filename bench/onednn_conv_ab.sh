#!/usr/bin/env bash
# onednn_conv_ab.sh — what oneDNN's bf16 convolution primitives (codelets/conv2d_onednn.c, taken by auto under
# ONEDNN_CONV_RULE in codelets/conv2d_algo.c) are worth in the training step: `bench` images/s of three variants side
# by side, interleaved over rounds (the order rotates each round), for each NET:BATCH:
#   fp32    build/apps/starpu_anp --precision fp32
#   before  a build with -DONEDNN_CONV_IN_AUTO=0 (auto without the rule: the bf16 paths of before), --precision bf16
#   after   build/apps/starpu_anp --precision bf16
#
#   bench/onednn_conv_ab.sh [--rounds R] [--steps S] [--ncpu N] [--out DIR] [NET:BATCH...]
#   default nets: resnet8:64 resnet8:256 resnet20:64 resnet20:256; R 5, S 8, N 2
#   STARPU_ANP (build/apps/starpu_anp) and STARPU_ANP_OFF (build-off/apps/starpu_anp) name the two binaries; make
#   the second with
#     cmake -S . -B build-off -DCMAKE_C_FLAGS=-DONEDNN_CONV_IN_AUTO=0 && cmake --build build-off --target starpu_anp
#
# Writes DIR/runs.csv (round,net,batch,variant,images_per_s,load1) and prints, per NET:BATCH, the median images/s of
# each variant and the medians (min-max) of the per-round ratios after/before and after/fp32 (runs side by side in
# one round, which a loaded machine disturbs less than absolute figures). Runs at scripts/lib.sh's measuring
# priority (anp_measure_prio), each under `timeout 300`. Exit status: 0, 1 if a run failed, 2 on a usage error.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
A="${STARPU_ANP:-$ROOT/build/apps/starpu_anp}"
OFF="${STARPU_ANP_OFF:-$ROOT/build-off/apps/starpu_anp}"
ROUNDS=5 STEPS=8 NCPU=2 OUT="$ROOT/out/onednn_conv_ab"
usage() { sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || { echo "onednn_conv_ab.sh: --rounds '${2:-}': expected a positive integer" >&2; exit 2; }; ROUNDS="$2"; shift 2 ;;
    --steps) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || { echo "onednn_conv_ab.sh: --steps '${2:-}': expected a positive integer" >&2; exit 2; }; STEPS="$2"; shift 2 ;;
    --ncpu) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || { echo "onednn_conv_ab.sh: --ncpu '${2:-}': expected a positive integer" >&2; exit 2; }; NCPU="$2"; shift 2 ;;
    --out) [ -n "${2:-}" ] || { echo "onednn_conv_ab.sh: --out needs a directory" >&2; exit 2; }; OUT="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "onednn_conv_ab.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || set -- resnet8:64 resnet8:256 resnet20:64 resnet20:256
for nb in "$@"; do
  [[ "$nb" =~ ^[a-z0-9_]+:[1-9][0-9]*$ ]] || { echo "onednn_conv_ab.sh: '$nb': expected NET:BATCH" >&2; exit 2; }
done
for b in "$A" "$OFF"; do [ -x "$b" ] || { echo "onednn_conv_ab.sh: $b: not built (see --help)" >&2; exit 2; }; done
source "$ROOT/scripts/lib.sh"
anp_measure_prio "$ROOT"
mkdir -p "$OUT"
CSV="$OUT/runs.csv"
echo "round,net,batch,variant,images_per_s,load1" >"$CSV"
echo "onednn_conv_ab: $ROUNDS rounds, $STEPS steps, STARPU_NCPU=$NCPU, $ANP_PRIO_SAID; $(uptime)"
VARIANTS=(fp32 before after)
for r in $(seq 1 "$ROUNDS"); do
  for nb in "$@"; do
    net=${nb%%:*} batch=${nb#*:}
    for i in 0 1 2; do
      v=${VARIANTS[$(((i + r) % 3))]}
      bin="$A" prec=bf16
      [ "$v" = fp32 ] && prec=fp32
      [ "$v" = before ] && bin="$OFF"
      load=$(cut -d' ' -f1 /proc/loadavg)
      line=$(env -u OPENBLAS_CORETYPE STARPU_NCPU="$NCPU" DNN_CONV_ALGO=auto "${ANP_PRIO[@]}" timeout 300 "$bin" bench \
        --net "$net" --batch "$batch" --steps "$STEPS" --warmup 2 --precision "$prec" 2>&1 | anp_result_line) \
        || { echo "onednn_conv_ab.sh: $v $net:$batch failed" >&2; exit 1; }
      ips=$(anp_result_field "$line" images_per_s)
      echo "$r,$net,$batch,$v,$ips,$load" | tee -a "$CSV"
    done
  done
done
echo "after: $(uptime)"
python3 - "$CSV" <<'PY'
import csv, statistics as st, sys
rows = list(csv.DictReader(open(sys.argv[1])))
keys = sorted({(r["net"], int(r["batch"])) for r in rows})
print("| net | batch | fp32 img/s | bf16 before img/s | bf16 after img/s | after/before | after/fp32 | before/fp32 | load1 |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
for net, b in keys:
    sel = [r for r in rows if r["net"] == net and int(r["batch"]) == b]
    med = {v: st.median(float(r["images_per_s"]) for r in sel if r["variant"] == v) for v in ("fp32", "before", "after")}
    by = {}
    for r in sel: by.setdefault(r["round"], {})[r["variant"]] = float(r["images_per_s"])
    rat = lambda u, v: [d[u] / d[v] for d in by.values() if u in d and v in d]
    cell = lambda x: "%.3f (%.3f-%.3f)" % (st.median(x), min(x), max(x))
    loads = [float(r["load1"]) for r in sel]
    print("| %s | %d | %.0f | %.0f | %.0f | %s | %s | %s | %.1f-%.1f |" % (net, b, med["fp32"], med["before"], med["after"],
          cell(rat("after", "before")), cell(rat("after", "fp32")), cell(rat("before", "fp32")), min(loads), max(loads)))
PY
