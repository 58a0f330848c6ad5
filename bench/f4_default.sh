#!/usr/bin/env bash
# f4_default.sh — what taking Winograd F(4x4, 3x3) in DNN_CONV_ALGO=auto would be worth: training
# step throughput (`bench`, images/s) of three variants side by side, interleaved over rounds
# (the variants' order rotates each round), for each NET:BATCH:
#   auto       build/apps/starpu_anp, DNN_CONV_ALGO=auto (F(2x2) where auto takes Winograd)
#   winograd4  the same binary, DNN_CONV_ALGO=winograd4 (F(4x4) on every 3x3 stride-1 conv)
#   auto4      a build with -DWINO4_ENABLED_IN_AUTO=1 (codelets/conv2d_algo.c), DNN_CONV_ALGO=auto:
#              F(4x4) where WINO4_RULE / WINO4_STEM_RULE say it pays
#
#   bench/f4_default.sh [--rounds R] [--steps S] [--ncpu N] [--out DIR] [NET:BATCH...]
#   default nets: resnet8:64 resnet8:256 resnet20:64 resnet20:256; R 5, S 10, N 2
#   STARPU_ANP (build/apps/starpu_anp) and STARPU_ANP_W4 (build-w4/apps/starpu_anp) name the two
#   binaries; make the second with
#     cmake -S . -B build-w4 -DCMAKE_C_FLAGS=-DWINO4_ENABLED_IN_AUTO=1 && cmake --build build-w4 --target starpu_anp
#
# Writes DIR/runs.csv (round,net,batch,variant,images_per_s,load1) and prints, per NET:BATCH, the
# median images/s of each variant and the medians of the per-round ratios winograd4/auto and
# auto4/auto (ratios of runs side by side in one round, which a loaded machine disturbs less than
# absolute figures). Runs at scripts/lib.sh's measuring priority (anp_measure_prio), each under
# `timeout 300`. Exit status: 0, 1 if a run failed, 2 on a usage error.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
A="${STARPU_ANP:-$ROOT/build/apps/starpu_anp}"
A4="${STARPU_ANP_W4:-$ROOT/build-w4/apps/starpu_anp}"
ROUNDS=5 STEPS=10 NCPU=2 OUT="$ROOT/out/f4_default"
usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || { echo "f4_default.sh: --rounds '${2:-}': expected a positive integer" >&2; exit 2; }; ROUNDS="$2"; shift 2 ;;
    --steps) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || { echo "f4_default.sh: --steps '${2:-}': expected a positive integer" >&2; exit 2; }; STEPS="$2"; shift 2 ;;
    --ncpu) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || { echo "f4_default.sh: --ncpu '${2:-}': expected a positive integer" >&2; exit 2; }; NCPU="$2"; shift 2 ;;
    --out) [ -n "${2:-}" ] || { echo "f4_default.sh: --out needs a directory" >&2; exit 2; }; OUT="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "f4_default.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || set -- resnet8:64 resnet8:256 resnet20:64 resnet20:256
for b in "$A" "$A4"; do [ -x "$b" ] || { echo "f4_default.sh: $b: not built (see --help)" >&2; exit 2; }; done
source "$ROOT/scripts/lib.sh"
anp_measure_prio "$ROOT"
mkdir -p "$OUT"
CSV="$OUT/runs.csv"
echo "round,net,batch,variant,images_per_s,load1" >"$CSV"
echo "f4_default: $ROUNDS rounds, $STEPS steps, STARPU_NCPU=$NCPU, $ANP_PRIO_SAID; $(uptime)"
VARIANTS=(auto winograd4 auto4)
for r in $(seq 1 "$ROUNDS"); do
  for nb in "$@"; do
    net=${nb%%:*} batch=${nb#*:}
    for i in 0 1 2; do
      v=${VARIANTS[$(((i + r) % 3))]}
      bin="$A" algo=auto
      [ "$v" = winograd4 ] && algo=winograd4
      [ "$v" = auto4 ] && bin="$A4"
      load=$(cut -d' ' -f1 /proc/loadavg)
      line=$(env -u OPENBLAS_CORETYPE STARPU_NCPU="$NCPU" DNN_CONV_ALGO=$algo "${ANP_PRIO[@]}" timeout 300 "$bin" bench \
        --net "$net" --batch "$batch" --steps "$STEPS" --warmup 2 2>&1 | anp_result_line) \
        || { echo "f4_default.sh: $v $net:$batch failed" >&2; exit 1; }
      ips=$(anp_result_field "$line" images_per_s)
      echo "$r,$net,$batch,$v,$ips,$load" | tee -a "$CSV"
    done
  done
done
python3 - "$CSV" <<'PY'
import csv, statistics as st, sys
rows = list(csv.DictReader(open(sys.argv[1])))
keys = sorted({(r["net"], int(r["batch"])) for r in rows})
print("| net | batch | auto img/s | winograd4 img/s | auto4 img/s | winograd4/auto | auto4/auto | load1 |")
print("|---|---:|---:|---:|---:|---:|---:|---|")
for net, b in keys:
    sel = [r for r in rows if r["net"] == net and int(r["batch"]) == b]
    med = {v: st.median(float(r["images_per_s"]) for r in sel if r["variant"] == v) for v in ("auto", "winograd4", "auto4")}
    by = {}
    for r in sel: by.setdefault(r["round"], {})[r["variant"]] = float(r["images_per_s"])
    rat = lambda v: [d[v] / d["auto"] for d in by.values() if v in d and "auto" in d]
    w4, a4 = rat("winograd4"), rat("auto4")
    loads = [float(r["load1"]) for r in sel]
    print("| %s | %d | %.0f | %.0f | %.0f | %.3f (%.3f-%.3f) | %.3f (%.3f-%.3f) | %.1f-%.1f |" % (net, b, med["auto"], med["winograd4"],
          med["auto4"], st.median(w4), min(w4), max(w4), st.median(a4), min(a4), max(a4), min(loads), max(loads)))
PY
