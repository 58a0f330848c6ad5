#!/usr/bin/env bash
# bn_fuse_profile.sh — where a training step's time goes with DNN_FUSE=1 and 3: `starpu_anp bench --trace` of each
# net and batch, the two levels alternated round by round at measuring priority (scripts/lib.sh), and the trace
# summary's per-codelet task times (traces/trace_summary.py) divided by the timed and warm-up steps.
#
#   bench/bn_fuse_profile.sh [BUILD_DIR]   environment: ROUNDS [2], STEPS [20], NETS ["resnet20:64 resnet8:64"],
#                                          STARPU_NCPU [2]
# Output: CSV `round,net,batch,fuse,codelet,count_per_step,ms_per_step`, and per run a line
# `...,TOTAL,,<task ms per step>` and `...,images_per_s,,<the traced run's images/s>` (tracing slows it).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
source "$ROOT/scripts/lib.sh"
APP="${1:-$ROOT/build}/apps/starpu_anp"
[ -x "$APP" ] || { echo "error: $APP: not an executable (build first, or give BUILD_DIR)" >&2; exit 2; }
ROUNDS="${ROUNDS:-2}" STEPS="${STEPS:-20}" NETS="${NETS:-resnet20:64 resnet8:64}"
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || { echo "error: ROUNDS=$ROUNDS: expected a positive integer" >&2; exit 2; }
[[ "$STEPS" =~ ^[1-9][0-9]*$ ]] || { echo "error: STEPS=$STEPS: expected a positive integer" >&2; exit 2; }
export STARPU_SILENT=1 STARPU_NCPU="${STARPU_NCPU:-2}"
anp_measure_prio "$ROOT"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "round,net,batch,fuse,codelet,count_per_step,ms_per_step"
for r in $(seq "$ROUNDS"); do
  for nb in $NETS; do
    net="${nb%%:*}" batch="${nb##*:}" order="1 3"
    [ $((r % 2)) = 0 ] && order="3 1"
    for f in $order; do
      rm -rf "$tmp/tr"
      line="$(DNN_FUSE=$f timeout 900 env -u OPENBLAS_CORETYPE "${ANP_PRIO[@]}" "$APP" bench --net "$net" --batch "$batch" \
        --steps "$STEPS" --warmup 2 --trace "$tmp/tr" --quiet 2>/dev/null | anp_result_line)" || {
        echo "error: DNN_FUSE=$f $APP bench --net $net --batch $batch --trace failed" >&2
        exit 1
      }
      [ -f "$tmp/tr/summary.txt" ] || { echo "error: no trace summary for DNN_FUSE=$f $net" >&2; exit 1; }
      # the trace holds every step, the warm-up ones too: STEPS + 2
      awk -v pre="$r,$net,$batch,$f" -v n="$((STEPS + 2))" '
        /^per codelet/ { on = 1; next } /^parallel efficiency/ { on = 0 }
        on && $2 == "|" && $3 ~ /^[0-9]+$/ { printf "%s,%s,%.1f,%.3f\n", pre, $1, $3 / n, $4 / n; tot += $4 }
        END { printf "%s,TOTAL,,%.3f\n", pre, tot / n }' "$tmp/tr/summary.txt"
      echo "$r,$net,$batch,$f,images_per_s,,$(anp_result_field "$line" images_per_s)"
    done
  done
done
