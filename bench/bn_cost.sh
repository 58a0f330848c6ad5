#!/usr/bin/env bash
# bn_cost.sh — what --batchnorm global costs against local (per-chunk) statistics: images/s of
# `starpu_anp bench` for resnet8 and resnet20, in one process and over 2 ranks (mpirun on this
# machine), the two variants side by side in one run (alternated, best of REPS). Prints a
# Markdown table (docs/batchnorm.md "Cost"). Usage: bench/bn_cost.sh [BUILD_DIR]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
source "$ROOT/scripts/lib.sh"
APP="${1:-$ROOT/build}/apps/starpu_anp"
export STARPU_SILENT=1
REPS="${REPS:-3}" STEPS="${STEPS:-30}" BATCH="${BATCH:-64}" CHUNKS="${CHUNKS:-4}"
CPU="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//') (family $(grep -m1 'cpu family' /proc/cpuinfo | awk '{print $NF}'), model $(grep -m1 '^model\s*:' /proc/cpuinfo | awk '{print $NF}')), $(nproc) cores"
echo "CPU: $CPU; bench --batch $BATCH --chunks $CHUNKS (per rank) --steps $STEPS, best of $REPS, STARPU_SCHED=${STARPU_SCHED:-lws}"
echo
echo "| net | ranks | local img/s | global img/s | global / local |"
echo "|---|---|---|---|---|"
for net in resnet8 resnet20; do
  for np in 1 2; do
    declare -A best=([local]=0 [global]=0)
    for _ in $(seq "$REPS"); do for bn in local global; do
      L=()
      [ "$np" = 1 ] || L=("${ANP_MPIRUN[@]}" -np "$np" -x STARPU_NCPU=1 -x STARPU_SILENT)
      LINE="$(timeout 600 "${L[@]}" "$APP" bench --net "$net" --batch "$BATCH" --chunks "$CHUNKS" --steps "$STEPS" --batchnorm "$bn" --quiet 2>/dev/null | tail -1)"
      ips="$(anp_result_field "$LINE" images_per_s)"
      awk -v a="$ips" -v b="${best[$bn]}" 'BEGIN { exit !(a > b) }' && best[$bn]="$ips"
    done; done
    echo "| $net | $np | ${best[local]} | ${best[global]} | $(awk -v g="${best[global]}" -v l="${best[local]}" 'BEGIN { printf "%.3f", g / l }') |"
  done
done
